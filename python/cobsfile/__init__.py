"""Read, write, append, follow, verify and recover cobsfiles.

A cobsfile is a sequence of blocks, each opened and closed by a zero byte, with a CRC over a
COBS-encoded body (so no other zero byte appears) and optional zstd. After any damage a reader
resynchronizes at the next zero byte: every block the damage did not touch comes back, and
nothing that fails its checksum is ever returned.

    import cobsfile

    with cobsfile.Writer("events.cobs", compression=("zstd", 3)) as w:
        w.write_many(line.encode() for line in lines)

    with cobsfile.open("events.cobs") as r:
        for record in r:                      # bytes, in file order
            ...
        print(r.damage)                       # what was skipped, if anything

    table = cobsfile.read_table("events.cobs", columns=["service"])   # pyarrow.Table

The work is done by the Rust library with the GIL released; errors are exceptions derived from
`cobsfile.Error`, with the byte `offset` they concern.
"""

from __future__ import annotations

import json as _json
import os
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence, Union

from . import _cobsfile
from ._cobsfile import (
    FORMAT_VERSION,
    __version__,
    BlockInfo,
    DamagedError,
    Damage,
    Error,
    Held,
    NotACobsfileError,
    RecordError,
    Recovery,
    Report,
    Seals,
    recover,
    segments,
    verify,
)

__all__ = [
    "FORMAT_VERSION",
    "__version__",
    "Appender",
    "BlockInfo",
    "Damage",
    "DamageWarning",
    "DamagedError",
    "Error",
    "Follower",
    "LogReader",
    "Held",
    "NotACobsfileError",
    "Reader",
    "RecordError",
    "Recovery",
    "Report",
    "Seals",
    "Writer",
    "follow",
    "open",
    "read_table",
    "recover",
    "segments",
    "verify",
]

class DamageWarning(UserWarning):
    """A result (a table from `to_arrow` or `read_table`) lacks rows that damage cost: the
    ranges are in its schema's metadata, under `b"cobsfile.damage"` (JSON)."""


Source = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, Any]
Schema = Union[str, Mapping[str, Any], Sequence[Any]]
OnDamage = Union[str, Callable[[Damage], Any]]
# An event time: int nanoseconds since the epoch, an aware datetime, or an RFC 3339 string.
Time = Union[None, int, "datetime.datetime", str]


def _schema_json(schema: Optional[Schema]) -> Optional[str]:
    if schema is None or isinstance(schema, str):
        return schema
    return _json.dumps(schema)


class Reader(_cobsfile.Reader):
    """A cobsfile opened for reading; see `cobsfile.open`.

    Iterating yields each record of every intact data block as `bytes`, in file order.
    `metadata` is the file's metadata (dict of str to bytes, in file order), `blocks()` lists
    its blocks and damaged ranges, `damage` the damaged ranges skipped so far.
    """

    def records(
        self,
        decode: Union[bool, str] = False,
        *,
        reader_schema: Optional[Schema] = None,
        times: bool = False,
    ) -> Iterator[Any]:
        """The records: `bytes` (decode=False); JSON values, one per record (decode="json");
        or, for typed records (an Avro schema in the file), Python objects as fastavro gives
        them, dicts for records (decode=True or "avro"), resolved to `reader_schema` if given.

        times=True: `(time, record)` pairs of raw records, `time` their event time in
        nanoseconds since the epoch (None for a record written without one).
        """
        if times:
            if decode not in (False, None):
                raise ValueError("times=True gives raw records: decode them yourself")
            return iter(self._next_timed, None)
        if decode is False or decode is None:
            return iter(self)
        if decode == "json":
            return self._json_records()
        if decode is True or decode == "avro":
            return self._avro_records(_schema_json(reader_schema))
        raise ValueError(f"decode must be False, True, 'avro' or 'json', not {decode!r}")

    def to_arrow(
        self,
        columns: Optional[Sequence[str]] = None,
        *,
        records: str = "auto",
        reader_schema: Optional[Schema] = None,
        batch_size: int = 65536,
        threads: Optional[int] = None,
    ):
        """The file's rows as a `pyarrow.Table` (pyarrow 15 or later), as `cobsfile sql`
        sees them: typed records by their Avro schema, JSON objects by a sampled schema,
        anything else raw (`record`, `file`, `block_offset`, `ordinal`). `records` chooses:
        "auto", "avro", "json" or "raw". Damage is handled as `on_damage` says.

        threads: byte ranges of the file read at once (as a query's partitions read them),
        rows kept in file order; by default one per core, as pyarrow's readers do. Ranges
        under 1 MiB are not worth a thread: small files are read on one.
        """
        import pyarrow

        before = len(self.damage)
        stream = self._arrow_stream(
            list(columns) if columns is not None else None,
            records,
            _schema_json(reader_schema),
            batch_size,
            threads if threads is not None else (os.cpu_count() or 1),
        )
        table = pyarrow.table(stream)
        damage = self.damage[before:]
        if not damage:
            return table
        # Rows lost to damage are never silent: the table says so in its metadata, and (with
        # on_damage="skip") a warning says so as it is made.
        listed = [dict(d.to_dict(), kind=d.kind) for d in damage]
        metadata = dict(table.schema.metadata or {})
        metadata[b"cobsfile.damage"] = _json.dumps(listed).encode()
        table = table.replace_schema_metadata(metadata)
        if self._on_damage_is_skip:
            import warnings

            warnings.warn(
                f"{self.name}: {len(damage)} damaged range(s) skipped; the table lacks their "
                f"rows (listed in table.schema.metadata[b'cobsfile.damage'])",
                DamageWarning,
                stacklevel=2,
            )
        return table

    def __enter__(self) -> "Reader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class LogReader:
    """A log directory opened for reading (spec 11.4): its segments in log order, each a
    `Reader` with the same options, held open (mapped) together so that retention removes
    none of them meanwhile; see `cobsfile.open`.

    Iterating, `records()` and `to_arrow()` give the records of every segment in turn;
    `damage` lists what was skipped, each range's offsets its segment's (`segments` pairs each
    path with its reader); `verify()` gives each segment's report.
    """

    def __init__(self, directory: Any, paths: Sequence[Any], options: Mapping[str, Any]):
        self.name = os.fspath(directory)
        self.segments = []
        try:
            for path in paths:
                try:
                    self.segments.append((os.fspath(path), Reader(path, **options)))
                except FileNotFoundError:
                    # Removed by retention between the listing and now: gone from the log.
                    continue
        except BaseException:
            self.close()
            raise

    def __iter__(self) -> Iterator[bytes]:
        for _, reader in self.segments:
            yield from reader

    def records(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        """`Reader.records` of each segment in turn."""
        for _, reader in self.segments:
            yield from reader.records(*args, **kwargs)

    def to_arrow(self, columns: Optional[Sequence[str]] = None, **kwargs: Any):
        """`Reader.to_arrow` of each segment, concatenated in log order."""
        import pyarrow

        tables = [reader.to_arrow(columns, **kwargs) for _, reader in self.segments]
        if not tables:
            raise NotACobsfileError(f"{self.name}: no segments left in it")
        return pyarrow.concat_tables(tables, promote_options="default")

    @property
    def damage(self) -> list:
        return [d for _, reader in self.segments for d in reader.damage]

    def verify(self) -> list:
        """`(path, Report)` of each segment, in log order."""
        return [(path, verify(path)) for path, _ in self.segments]

    def close(self) -> None:
        for _, reader in self.segments:
            reader.close()

    def __enter__(self) -> "LogReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _log_segments(source: Any) -> Optional[list]:
    """The segments of `source` if it is a log directory's path, else None."""
    if not isinstance(source, (str, os.PathLike)) or str(source).startswith(("s3://", "s3a://")):
        return None
    if not os.path.isdir(source):
        return None
    found = segments(source)
    if not found:
        raise IsADirectoryError(
            f"{os.fspath(source)}: is a directory, with no segments in it (files named "
            f"00000000000000000001.cobs and on): not a log directory"
        )
    return found


def open(
    source: Source,
    *,
    on_damage: OnDamage = "skip",
    dictionaries: Optional[Iterable[bytes]] = None,
    threads: int = 1,
    max_body_size: Optional[int] = None,
    since: Time = None,
    until: Time = None,
) -> Reader:
    """Opens a cobsfile for reading: a path (mapped, not read into memory), bytes, a binary
    file object (read whole), or an object in S3-compatible storage, "s3://bucket/key",
    read in place by byte ranges (configured by AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY, AWS_REGION and AWS_ALLOW_HTTP; a missing object is
    FileNotFoundError). Of an object, iteration and `records()` fetch as they go (the first
    records fetch little), `metadata` and the schemas come from the blocks its index lists,
    `to_arrow()` and `verify()` fetch its ranges on their threads, each about once, and
    `recover()` fetches it whole; an object that changes or vanishes under a reader is an
    `OSError` naming it.

    on_damage: "skip" (the default: go on, listed in `reader.damage`), "raise"
    (`DamagedError`), or a callable given each `Damage` (reading goes on unless it raises).
    dictionaries: zstd dictionaries the file's blocks may need (bytes each).
    threads: threads decoding blocks (the calling thread and threads - 1 workers). Raises
    `NotACobsfileError` for a non-empty input with no intact block.
    since, until: read only the records whose event time (written with `time=`) lies in
    `since ..= until`, either bound optional: an int of nanoseconds since the epoch, an aware
    `datetime`, or an RFC 3339 string. Blocks whose times all lie outside are passed over
    undecoded, records without a time are left out; iteration, `records()` and `to_arrow()`
    read the window alike.

    A log directory (spec 11.4: segments named 00000000000000000001.cobs and on, as
    `Appender(dir, segment_size=...)` and `cobsfile pack --append DIR --segment-size` keep
    them) opens as a `LogReader`: its segments in order, each read with these options.
    """
    options = dict(
        on_damage=on_damage,
        dictionaries=list(dictionaries) if dictionaries is not None else None,
        threads=threads,
        max_body_size=max_body_size,
        since=_time(since),
        until=_time(until),
    )
    paths = _log_segments(source)
    if paths is not None:
        return LogReader(source, paths, options)
    return Reader(source, **options)



def _time(value: Any) -> Any:
    """An RFC 3339 string as an aware datetime; anything else as it is."""
    if isinstance(value, str):
        import datetime

        try:
            parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"not an RFC 3339 time: {value!r}") from None
        if parsed.tzinfo is None:
            raise ValueError(f"{value!r} has no time zone (add Z or an offset)")
        return parsed
    return value


def read_table(source: Source, columns: Optional[Sequence[str]] = None, **options: Any):
    """`cobsfile.open(source).to_arrow(columns)`: a `pyarrow.Table`. Options of `open`
    (on_damage, dictionaries, ...) and of `to_arrow` (records, reader_schema) are accepted."""
    names = ("records", "reader_schema", "batch_size", "threads")
    arrow = {k: options.pop(k) for k in names if k in options}
    with open(source, **options) as reader:
        return reader.to_arrow(columns, **arrow)


class Writer(_cobsfile.Writer):
    """Writes a new cobsfile to a path (which must not exist, unless overwrite=True) or a binary
    file object.

    compression: None, "zstd" or ("zstd", level). block_size: record bytes per block (default
    256 KiB, 2 MiB compressed: larger blocks compress better, and a damaged byte costs the
    block it lands in). lines=False: compressed records each after its length, for readers
    that predate records as lines (by default a compressed block whose records hold no
    newline stores them as lines, spec 8.3, which compress as the text they came from).
    metadata: a dict written as the first metadata block. dictionary: a zstd dictionary (bytes),
    embedded in the file. schema: an Avro schema (JSON text or dict): `write` then takes values
    of it (dicts for records). threads: worker threads compressing blocks.
    seal: a private key file (`cobsfile key generate -o NAME`): the file is sealed (spec
    8.10), a seal every seal_every bytes of blocks (default 1 MiB) and one at the end, so that
    `cobsfile.verify(path, keys=["NAME.pub"])` proves no sealed block was altered, removed,
    reordered or added.

    As a context manager, leaving the block finishes the file; leaving it by an exception
    leaves it unfinished (its records readable, `verify` says "unfinished").

    A path is written as `cobsfile pack -o` writes one: into a new file that takes the name,
    synced, only when the writer closes. A process killed while writing leaves what the name
    held before (nothing, or with overwrite=True the old file, whole), and a file may be
    rewritten from its own reader.
    """

    def __new__(cls, target: Any, *, schema: Optional[Schema] = None, **options: Any):
        return super().__new__(cls, target, schema=_schema_json(schema), **options)


class Appender(_cobsfile.Appender):
    """Appends records to a log file, creating it if missing. After a crash it cuts (or fences
    off) a torn last block first: `opened` says what it found. Several processes may append to
    one file at once.

    A log directory (spec 11.4) when any of these is given, or when the path is a directory
    that holds segments: segment_size (bytes) and segment_age (seconds) start a new segment
    once the one appended to is that long or old; retain_size (bytes), retain_age (seconds)
    and retain_count remove the oldest segments while the log is over them. A segment left
    behind is finished (index, end block) once no one appends to it; `cobsfile.open(dir)`
    reads the directory as one log.

    durability: "none" (blocks written when full or max_delay old), "flush" (each append
    written before it returns), "fsync" (written and synced), or "group:10ms" (group commit:
    synced at most every 10 ms; `wait_durable(seq)` waits for a record's commit).
    schema: an Avro schema (JSON text or dict): `append` then takes values of it.
    seal: a private key file: what this appender appends is sealed (spec 8.10), a seal every
    seal_every bytes (default 1 MiB), at `sync()` and at `close()`; in a log directory, each
    segment is sealed as a file of its own when the appender leaves it.
    """

    def __new__(cls, path: Any, *, schema: Optional[Schema] = None, **options: Any):
        return super().__new__(cls, path, schema=_schema_json(schema), **options)


Follower = _cobsfile.Follower


def follow(
    path: Union[str, "os.PathLike[str]"],
    *,
    from_end: bool = False,
    timeout: Optional[float] = None,
    on_damage: OnDamage = "skip",
    dictionaries: Optional[Iterable[bytes]] = None,
    max_body_size: Optional[int] = None,
    since: Time = None,
    until: Time = None,
) -> Follower:
    """The records of a growing log as appenders add them, like `tail -f`: from its start (or
    its end, from_end=True), through truncation and rotation. Iteration ends after `timeout`
    seconds without a record (never, if None); Ctrl-C interrupts a wait. since, until: only
    the records whose event time lies in the window, as `open` takes them."""
    return Follower(
        path,
        from_end=from_end,
        timeout=timeout,
        on_damage=on_damage,
        dictionaries=list(dictionaries) if dictionaries is not None else None,
        max_body_size=max_body_size,
        since=_time(since),
        until=_time(until),
    )
