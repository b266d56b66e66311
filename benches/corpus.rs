//! Deterministic benchmark corpora, shared by every benchmark group.
//!
//! Three corpora of records, each generated from a fixed seed by a splitmix64 generator (no
//! `rand` crate, so the bytes never change with a dependency update):
//!
//! - `large-json`: JSON log events of 187..=10000 bytes (uniform sizes);
//! - `small-json`: JSON log events of 80..=400 bytes;
//! - `zero-rich`: binary events of 64..=2048 bytes, about half of whose bytes are zero.
//!
//! Each corpus holds `COBSFILE_BENCH_MB` megabytes (10^6 bytes) of records, 100 by default.
//! The JSON events carry the fields of real service logs (timestamp, level, service, host,
//! request and trace ids, an HTTP object, a user object, message text drawn from a skewed
//! vocabulary, item lists and stack traces in larger events), so they compress roughly like
//! real logs.

#![allow(dead_code)]

use std::fmt::Write as _;
use std::ops::Range;

/// Megabytes per corpus unless `COBSFILE_BENCH_MB` says otherwise.
pub const DEFAULT_MB: usize = 100;

/// The corpus size in bytes, from `COBSFILE_BENCH_MB`.
pub fn corpus_bytes() -> usize {
    let mb = std::env::var("COBSFILE_BENCH_MB")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|&mb| mb > 0.0)
        .unwrap_or(DEFAULT_MB as f64);
    (mb * 1e6) as usize
}

/// The corpora.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// JSON events of 187..=10000 bytes.
    LargeJson,
    /// JSON events of 80..=400 bytes.
    SmallJson,
    /// Binary events of 64..=2048 bytes, about half zeros.
    ZeroRich,
}

impl Kind {
    /// Every corpus, in report order.
    pub const ALL: [Kind; 3] = [Kind::SmallJson, Kind::LargeJson, Kind::ZeroRich];

    /// The name used in benchmark ids.
    pub fn name(self) -> &'static str {
        match self {
            Kind::LargeJson => "large-json",
            Kind::SmallJson => "small-json",
            Kind::ZeroRich => "zero-rich",
        }
    }

    /// Record sizes, inclusive.
    pub fn sizes(self) -> (usize, usize) {
        match self {
            Kind::LargeJson => (187, 10_000),
            Kind::SmallJson => (80, 400),
            Kind::ZeroRich => (64, 2048),
        }
    }

    fn seed(self) -> u64 {
        match self {
            Kind::LargeJson => 0x1A46_E150_0000_0001,
            Kind::SmallJson => 0x5A11_0150_0000_0002,
            Kind::ZeroRich => 0x2E40_21C4_0000_0003,
        }
    }
}

/// Records stored back to back, with their end offsets.
pub struct Corpus {
    /// Which corpus this is.
    pub kind: Kind,
    /// Every record, concatenated.
    pub data: Vec<u8>,
    /// End offset in `data` of each record.
    pub ends: Vec<usize>,
}

impl Corpus {
    /// Generates the corpus `kind` with about `bytes` bytes of records (the last record is
    /// not cut, so the total may exceed `bytes` by less than one record).
    pub fn generate(kind: Kind, bytes: usize) -> Corpus {
        let mut rng = SplitMix64(kind.seed());
        let mut data = Vec::with_capacity(bytes + kind.sizes().1);
        let mut ends = Vec::new();
        let mut json = JsonEvents::new();
        let mut scratch = String::new();
        while data.len() < bytes {
            let (lo, hi) = kind.sizes();
            let size = rng.range(lo, hi + 1);
            let start = data.len();
            match kind {
                Kind::LargeJson | Kind::SmallJson => {
                    json.event(&mut rng, size, &mut scratch);
                    data.extend_from_slice(scratch.as_bytes());
                }
                Kind::ZeroRich => binary_event(&mut rng, size, ends.len() as u64, &mut data),
            }
            debug_assert_eq!(data.len() - start, size);
            ends.push(data.len());
        }
        Corpus { kind, data, ends }
    }

    /// The number of records.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether the corpus holds no records.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Total bytes of records.
    pub fn bytes(&self) -> u64 {
        self.data.len() as u64
    }

    /// The records in order.
    pub fn records(&self) -> Records<'_> {
        Records {
            data: &self.data,
            ends: self.ends.iter(),
            start: 0,
        }
    }

    /// The record at `index`.
    pub fn record(&self, index: usize) -> &[u8] {
        let start = if index == 0 { 0 } else { self.ends[index - 1] };
        &self.data[start..self.ends[index]]
    }

    /// Fraction of zero bytes in the corpus.
    pub fn zero_fraction(&self) -> f64 {
        let zeros = self.data.iter().filter(|&&b| b == 0).count();
        zeros as f64 / self.data.len().max(1) as f64
    }

    /// Mean lengths of the maximal runs of non-zero bytes and of zero bytes.
    pub fn mean_runs(&self) -> (f64, f64) {
        let (mut runs, mut zero_runs) = ([0usize; 2], [0usize; 2]);
        let mut prev = None;
        for &b in &self.data {
            let counts = if b == 0 { &mut zero_runs } else { &mut runs };
            counts[1] += 1;
            if prev != Some(b == 0) {
                counts[0] += 1;
            }
            prev = Some(b == 0);
        }
        let mean = |c: [usize; 2]| c[1] as f64 / c[0].max(1) as f64;
        (mean(runs), mean(zero_runs))
    }

    /// Ranges of `data` of `chunk` bytes (the last one shorter), ignoring record boundaries.
    pub fn chunks(&self, chunk: usize) -> Vec<Range<usize>> {
        (0..self.data.len())
            .step_by(chunk)
            .map(|s| s..(s + chunk).min(self.data.len()))
            .collect()
    }

    /// A one-line description for the log.
    pub fn describe(&self) -> String {
        let (runs, zero_runs) = self.mean_runs();
        format!(
            "{}: {} records, {:.1} MB, mean {:.0} B/record, {:.1}% zero bytes, \
             mean run {:.1} B non-zero, {:.1} B zero",
            self.kind.name(),
            self.len(),
            self.bytes() as f64 / 1e6,
            self.bytes() as f64 / self.len().max(1) as f64,
            100.0 * self.zero_fraction(),
            runs,
            zero_runs,
        )
    }
}

/// Iterator over a corpus's records.
pub struct Records<'a> {
    data: &'a [u8],
    ends: std::slice::Iter<'a, usize>,
    start: usize,
}

impl<'a> Iterator for Records<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let end = *self.ends.next()?;
        let record = &self.data[self.start..end];
        self.start = end;
        Some(record)
    }
}

/// splitmix64 (Steele, Lea, Flood): tiny, fast, and good enough for test data.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..hi` (`hi > lo`).
    #[inline]
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + ((self.next_u64() as u128 * (hi - lo) as u128) >> 64) as usize
    }

    /// Uniform in `0.0..1.0`.
    #[inline]
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    #[inline]
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// An index in `0..n` skewed toward 0 (roughly Zipf-like), as word frequencies are.
    #[inline]
    pub fn skewed(&mut self, n: usize) -> usize {
        let u = self.unit();
        ((u * u * u) * n as f64) as usize
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.range(0, items.len())]
    }
}

// ---------------------------------------------------------------------------------------------
// JSON log events

const SERVICES: &[&str] = &[
    "api-gateway",
    "auth",
    "billing",
    "catalog",
    "checkout",
    "inventory",
    "notifications",
    "orders",
    "payments",
    "recommendations",
    "search",
    "shipping",
    "user-profile",
];

const REGIONS: &[&str] = &[
    "eu-west-1",
    "eu-central-1",
    "us-east-1",
    "us-west-2",
    "ap-south-1",
];

const METHODS: &[&str] = &[
    "GET", "GET", "GET", "POST", "POST", "PUT", "DELETE", "PATCH",
];

#[rustfmt::skip]
const RESOURCES: &[&str] = &[
    "orders", "users", "carts", "items", "payments", "sessions", "products", "invoices",
    "shipments", "reviews",
];

#[rustfmt::skip]
const TENANTS: &[&str] = &[
    "acme-corp", "globex", "initech", "umbrella", "hooli", "stark-industries", "wayne-ent",
    "cyberdyne", "soylent", "tyrell",
];

const ROLES: &[&str] = &["admin", "billing", "support", "viewer", "editor", "owner"];

const USER_AGENTS: &[&str] = &[
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15",
    "okhttp/4.12.0",
    "python-requests/2.31.0",
    "Go-http-client/2.0",
    "curl/8.5.0",
];

const EXCEPTIONS: &[&str] = &[
    "java.lang.IllegalStateException",
    "java.util.concurrent.TimeoutException",
    "java.sql.SQLTransientConnectionException",
    "java.lang.NullPointerException",
    "com.acme.common.RetryExhaustedException",
    "io.grpc.StatusRuntimeException",
];

const CLASSES: &[&str] = &[
    "com.acme.orders.OrderService",
    "com.acme.orders.OrderController",
    "com.acme.payments.PaymentClient",
    "com.acme.common.http.RetryingHttpClient",
    "com.acme.common.db.ConnectionPool",
    "com.acme.inventory.StockRepository",
    "org.springframework.web.servlet.FrameworkServlet",
    "org.apache.catalina.core.ApplicationFilterChain",
    "io.netty.channel.AbstractChannelHandlerContext",
    "java.util.concurrent.ThreadPoolExecutor$Worker",
];

const METHOD_NAMES: &[&str] = &[
    "handle", "process", "execute", "doFilter", "invoke", "call", "run", "apply", "lookup",
    "reserve", "charge", "submit",
];

/// Message vocabulary, most frequent first.
#[rustfmt::skip]
const WORDS: &[&str] = &[
    "the", "request", "to", "for", "user", "failed", "completed", "in", "ms", "order", "id",
    "with", "of", "from", "cache", "connection", "retry", "timeout", "service", "upstream",
    "response", "status", "session", "token", "payment", "item", "queue", "message", "processed",
    "received", "sent", "database", "query", "rows", "returned", "after", "attempt", "backoff",
    "scheduled", "job", "batch", "records", "written", "shard", "partition", "offset", "commit",
    "lag", "consumer", "producer", "latency", "p99", "exceeded", "threshold", "circuit", "breaker",
    "open", "closed", "half-open", "health", "check", "passed", "degraded", "pool", "exhausted",
    "waiting", "lock", "acquired", "released", "transaction", "rolled", "back", "validated",
    "invalid", "missing", "field", "header", "authorization", "expired", "refreshed", "rate",
    "limit", "quota", "tenant", "region", "replica", "leader", "elected", "snapshot", "compaction",
    "started", "finished", "skipped", "duplicate", "idempotency", "key", "webhook", "delivered",
    "bounced", "email", "notification", "inventory", "reserved", "stock", "warehouse", "shipment",
    "label", "carrier", "tracking", "invoice", "generated", "refund", "issued", "customer",
    "account", "created", "updated", "deleted", "config", "reloaded", "feature", "flag", "enabled",
    "disabled", "experiment", "variant", "assigned", "search", "index", "rebuilt", "documents",
    "ranking", "model", "loaded", "version", "deployed", "rollout", "canary", "percent", "memory",
    "heap", "gc", "pause", "threads", "blocked", "cpu", "throttled", "disk", "usage", "high",
    "low", "normal", "unexpected", "error", "warning", "ignored", "fallback", "default", "value",
    "using", "because", "while", "handling", "downstream", "dependency", "unavailable", "slow",
];

const TEMPLATES: &[&str] = &[
    "request completed",
    "request failed",
    "cache miss for key",
    "retrying upstream call",
    "payment authorized",
    "order state changed",
    "slow query detected",
    "user session refreshed",
    "message published to queue",
    "health check degraded",
];

/// Appends one optional field (with its leading comma) to an event.
type Field<'a> = dyn Fn(&mut SplitMix64, &mut String) + 'a;

/// Generator of JSON log events; keeps the clock and sequence between events.
pub struct JsonEvents {
    /// Milliseconds since the Unix epoch.
    clock_ms: u64,
    seq: u64,
}

impl Default for JsonEvents {
    fn default() -> Self {
        Self::new()
    }
}

impl JsonEvents {
    pub fn new() -> Self {
        JsonEvents {
            // 2024-05-01T00:00:00Z
            clock_ms: 1_714_521_600_000,
            seq: 0,
        }
    }

    /// Writes one event of exactly `size` bytes (`size >= 67`) into `out` (cleared first).
    pub fn event(&mut self, rng: &mut SplitMix64, size: usize, out: &mut String) {
        out.clear();
        self.clock_ms += rng.range(0, 40) as u64;
        self.seq += 1;
        let level = match rng.range(0, 100) {
            0..=4 => "ERROR",
            5..=14 => "WARN",
            15..=29 => "DEBUG",
            _ => "INFO",
        };
        let service = rng.pick(SERVICES);

        out.push('{');
        push_timestamp(out, self.clock_ms);
        let _ = write!(out, r#","level":"{level}""#);

        // Room the message needs at the end: `,"msg":"` + at least 8 characters + `"}`.
        const MSG_ROOM: usize = 8 + 8 + 2;
        let mut field = String::new();
        // Optional fields in the order real loggers emit them, each added while it fits.
        let region = rng.pick(REGIONS);
        let host = rng.range(1, 48);
        let candidates: [&Field; 7] = [
            &|_, f| {
                let _ = write!(f, r#","service":"{service}""#);
            },
            &|_, f| {
                let _ = write!(f, r#","host":"{service}-{host:02}.{region}""#);
            },
            &|rng, f| {
                let _ = write!(
                    f,
                    r#","seq":{},"thread":"worker-{}""#,
                    self.seq,
                    rng.range(0, 32)
                );
            },
            &|rng, f| {
                f.push_str(r#","request_id":""#);
                push_uuid(f, rng);
                f.push('"');
            },
            &|rng, f| {
                f.push_str(r#","trace_id":""#);
                push_hex(f, rng.next_u64());
                push_hex(f, rng.next_u64());
                f.push_str(r#"","span_id":""#);
                push_hex(f, rng.next_u64());
                f.push('"');
            },
            &|rng, f| push_http(f, rng),
            &|rng, f| push_user(f, rng),
        ];
        for add in candidates {
            field.clear();
            add(rng, &mut field);
            if out.len() + field.len() + MSG_ROOM <= size {
                out.push_str(&field);
            }
        }

        // Large events: an error's stack trace, or a list of items, filling all but a few
        // hundred bytes (which the message takes).
        let budget = size.saturating_sub(out.len() + MSG_ROOM + 200);
        if budget > 300 {
            let error = level == "ERROR" || rng.chance(0.2);
            if error {
                let _ = write!(
                    out,
                    r#","error":{{"type":"{}","stack":["#,
                    rng.pick(EXCEPTIONS)
                );
            } else {
                out.push_str(r#","items":["#);
            }
            let close = if error { "]}" } else { "]" };
            let limit = out.len() + budget - close.len();
            let mut first = true;
            loop {
                field.clear();
                if !first {
                    field.push(',');
                }
                if error {
                    push_frame(&mut field, rng);
                } else {
                    push_item(&mut field, rng);
                }
                if out.len() + field.len() > limit {
                    break;
                }
                out.push_str(&field);
                first = false;
            }
            out.push_str(close);
        }

        // The message fills the event to exactly `size` bytes.
        out.push_str(r#","msg":""#);
        let text_len = size
            .checked_sub(out.len() + 2)
            .expect("event size too small for its fixed fields");
        let text_start = out.len();
        out.push_str(rng.pick(TEMPLATES));
        while out.len() - text_start < text_len {
            out.push(' ');
            if rng.chance(0.08) {
                let _ = write!(out, "{}", rng.range(0, 100_000));
            } else {
                out.push_str(WORDS[rng.skewed(WORDS.len())]);
            }
        }
        out.truncate(text_start + text_len);
        out.push_str("\"}");
        debug_assert_eq!(out.len(), size);
    }
}

fn push_timestamp(out: &mut String, ms: u64) {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    let _ = write!(
        out,
        r#""ts":"{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z""#,
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        ms % 1000
    );
}

/// Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn push_hex(out: &mut String, v: u64) {
    let _ = write!(out, "{v:016x}");
}

fn push_uuid(out: &mut String, rng: &mut SplitMix64) {
    let a = rng.next_u64();
    let b = rng.next_u64();
    let _ = write!(
        out,
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        (b >> 48) & 0x3fff | 0x8000,
        b & 0xffff_ffff_ffff
    );
}

fn push_http(out: &mut String, rng: &mut SplitMix64) {
    let method = rng.pick(METHODS);
    let resource = rng.pick(RESOURCES);
    let status = rng.pick(&[
        200, 200, 200, 200, 201, 204, 304, 400, 401, 404, 409, 429, 500, 503,
    ]);
    let _ = write!(
        out,
        r#","http":{{"method":"{method}","path":"/api/v{}/{resource}/{}","status":{status},"duration_ms":{}.{:03},"bytes_out":{},"user_agent":"{}"}}"#,
        rng.range(1, 4),
        rng.range(1000, 999_999),
        rng.skewed(2000),
        rng.range(0, 1000),
        rng.range(0, 65_536),
        rng.pick(USER_AGENTS),
    );
}

fn push_user(out: &mut String, rng: &mut SplitMix64) {
    let _ = write!(
        out,
        r#","user":{{"id":"u_{}","tenant":"{}","roles":["{}","{}"],"authenticated":{}}}"#,
        rng.range(100_000, 9_999_999),
        rng.pick(TENANTS),
        rng.pick(ROLES),
        rng.pick(ROLES),
        rng.chance(0.9),
    );
}

fn push_frame(out: &mut String, rng: &mut SplitMix64) {
    let class = rng.pick(CLASSES);
    let file = class.rsplit('.').next().unwrap_or(class);
    let file = file.split('$').next().unwrap_or(file);
    let _ = write!(
        out,
        r#""at {class}.{}({file}.java:{})""#,
        rng.pick(METHOD_NAMES),
        rng.range(20, 900)
    );
}

fn push_item(out: &mut String, rng: &mut SplitMix64) {
    let _ = write!(
        out,
        r#"{{"sku":"SKU-{:05}","name":"{} {}","qty":{},"price_cents":{},"warehouse":"{}-{}","tags":["{}","{}"]}}"#,
        rng.skewed(40_000),
        WORDS[rng.skewed(WORDS.len())],
        WORDS[rng.skewed(WORDS.len())],
        rng.range(1, 6),
        rng.range(99, 49_999),
        rng.pick(REGIONS),
        rng.range(1, 9),
        WORDS[rng.skewed(WORDS.len())],
        WORDS[rng.skewed(WORDS.len())],
    );
}

// ---------------------------------------------------------------------------------------------
// Zero-rich binary events

/// Appends one binary event of exactly `size` bytes (`size >= 32`): a fixed header of
/// little-endian fields with small values, then segments of small integers, zero padding,
/// random bytes and small floats, like a telemetry or struct-dump record.
pub fn binary_event(rng: &mut SplitMix64, size: usize, seq: u64, out: &mut Vec<u8>) {
    let start = out.len();
    let end = start + size;
    // Header, 32 bytes.
    out.extend_from_slice(&0xBEEFu16.to_le_bytes());
    out.push(1); // version
    out.push(rng.range(0, 4) as u8); // flags
    out.extend_from_slice(&(1_714_521_600_000_000_000u64 + seq * 1_000_003).to_le_bytes());
    out.extend_from_slice(&(seq as u32).to_le_bytes());
    out.extend_from_slice(&(rng.range(0, 64) as u16).to_le_bytes()); // source
    out.extend_from_slice(&(rng.range(0, 16) as u16).to_le_bytes()); // kind
    out.extend_from_slice(&(size as u32).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes()); // reserved
    out.extend_from_slice(&(rng.range(0, 1 << 20) as u32).to_le_bytes()); // checksum-ish
    debug_assert_eq!(out.len() - start, 32);

    while out.len() < end {
        match rng.range(0, 100) {
            // Small unsigned integers, little-endian u32.
            0..=39 => {
                for _ in 0..rng.range(1, 16) {
                    let v: u32 = match rng.range(0, 10) {
                        0..=5 => rng.range(0, 256) as u32,
                        6..=8 => rng.range(0, 65_536) as u32,
                        _ => rng.next_u64() as u32,
                    };
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
            // Zero padding.
            40..=54 => out.resize(out.len() + rng.range(1, 40), 0),
            // Opaque bytes (hashes, compressed fragments).
            55..=79 => {
                for _ in 0..rng.range(1, 5) {
                    out.extend_from_slice(&rng.next_u64().to_le_bytes());
                }
            }
            // Small floats as f64 (a few non-zero high bytes, zero low bytes).
            80..=91 => {
                for _ in 0..rng.range(1, 6) {
                    let v = rng.range(0, 1000) as f64 / 4.0;
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
            // Short ASCII strings with a zero terminator.
            _ => {
                for _ in 0..rng.range(1, 4) {
                    out.extend_from_slice(WORDS[rng.skewed(WORDS.len())].as_bytes());
                    out.push(0);
                }
            }
        }
    }
    out.truncate(end);
}
