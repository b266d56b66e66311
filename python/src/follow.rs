//! `cobsfile.follow`: the records of a growing log as they land, through truncation and
//! rotation.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use cobsfile::{FollowEvent, Follower as LogFollower, FollowerBuilder};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::file_error;
use crate::reader::{reader_options, Damage, OnDamage};

/// How long one wait lasts before Python gets to handle signals (Ctrl-C).
const TICK: Duration = Duration::from_millis(100);

enum Got {
    Record(Vec<u8>),
    Truncated,
    Replaced,
    Damage(Damage),
    Idle,
}

/// Iterates the records of a file as appenders add them (like `tail -f`), from its start or
/// its end. Stops after `timeout` seconds without a record (never, if None).
#[pyclass(module = "cobsfile._cobsfile")]
pub(crate) struct Follower {
    follower: LogFollower,
    timeout: Option<Duration>,
    on_damage: OnDamage,
    damage: Vec<Damage>,
    truncations: u64,
    replacements: u64,
}

#[pymethods]
impl Follower {
    #[new]
    #[pyo3(signature = (path, *, from_end=false, timeout=None, on_damage=None, dictionaries=None, max_body_size=None, since=None, until=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        from_end: bool,
        timeout: Option<f64>,
        on_damage: Option<&Bound<'_, PyAny>>,
        dictionaries: Option<Vec<Vec<u8>>>,
        max_body_size: Option<usize>,
        since: Option<&Bound<'_, PyAny>>,
        until: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let on_damage = OnDamage::parse(on_damage)?;
        let (since, until) = (
            crate::time::optional_nanos(since)?,
            crate::time::optional_nanos(until)?,
        );
        let window =
            (since.is_some() || until.is_some()).then(|| cobsfile::Window::new(since, until));
        let timeout = timeout
            .map(|t| {
                Duration::try_from_secs_f64(t).map_err(|_| {
                    pyo3::exceptions::PyValueError::new_err("timeout must be seconds, >= 0")
                })
            })
            .transpose()?;
        let builder = FollowerBuilder::new()
            .reader(reader_options(dictionaries, 1, max_body_size, window))
            .from_end(from_end);
        let follower = py
            .detach(|| builder.open(&path))
            .map_err(|e| crate::errors::path_error(py, &path, e))?;
        Ok(Follower {
            follower,
            timeout,
            on_damage,
            damage: Vec::new(),
            truncations: 0,
            replacements: 0,
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Py<PyBytes>>> {
        let started = Instant::now();
        loop {
            let wait = match self.timeout {
                Some(t) => t.saturating_sub(started.elapsed()).min(TICK),
                None => TICK,
            };
            let follower = &mut self.follower;
            let got = py.detach(|| match follower.next_event_timeout(wait) {
                None => Ok(Got::Idle),
                Some(Ok(FollowEvent::Record(r))) => Ok(Got::Record(r.to_vec())),
                Some(Ok(FollowEvent::Truncated { .. })) => Ok(Got::Truncated),
                Some(Ok(FollowEvent::Replaced)) => Ok(Got::Replaced),
                Some(Ok(_)) => Ok(Got::Idle),
                Some(Err(e)) => match Damage::of_error(&e) {
                    Some(damage) => Ok(Got::Damage(damage)),
                    None => Err(e),
                },
            });
            match got.map_err(|e| file_error(py, e))? {
                Got::Record(r) => return Ok(Some(PyBytes::new(py, &r).unbind())),
                Got::Truncated => self.truncations += 1,
                Got::Replaced => self.replacements += 1,
                Got::Damage(damage) => self.on_damage.handle(py, damage, &mut self.damage)?,
                Got::Idle => {
                    py.check_signals()?;
                    if self.timeout.is_some_and(|t| started.elapsed() >= t) {
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// Damaged ranges skipped so far.
    #[getter]
    fn damage(&self) -> Vec<Damage> {
        self.damage.clone()
    }

    /// Times the file was truncated under the follower (reading started again).
    #[getter]
    fn truncations(&self) -> u64 {
        self.truncations
    }

    /// Times the path was replaced by a new file (log rotation).
    #[getter]
    fn replacements(&self) -> u64 {
        self.replacements
    }
}
