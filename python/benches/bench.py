#!/usr/bin/env python3
"""Python-side throughput of cobsfile against fastavro, plain NDJSON and pyarrow's JSON reader,
on the same JSON log events (about 100 MB of NDJSON), in one run.

What it measures, each case the best of N passes over every record (wall time):

1. Raw iteration:  `for r in cobsfile.open(path): pass` (records as bytes) on an uncompressed
   and a zstd-3 cobsfile of the JSON lines; `for r in fastavro.reader(f): pass` on Avro object
   container files of the same events (codecs "null" and "zstandard"; fastavro only yields
   dicts); `for line in open(ndjson, "rb"): pass`.
2. Decoding to dicts:  `reader.records(decode=True)` on a cobsfile written with an Avro
   schema (typed records); `reader.records(decode="json")` (json.loads per record) on the
   uncompressed JSON cobsfile; fastavro's dicts (the numbers of 1, not measured again).
3. Arrow:  `cobsfile.read_table(path)` on the JSON cobsfile (schema inferred from the JSON)
   and on the typed cobsfile, against `pyarrow.json.read_json(ndjson)` (its default, several
   threads; single-threaded too, for reference).

Goals checked (printed as met or not, never asserted): cobsfile's raw iteration at least 3x
fastavro's records/s (each codec against its like); typed decoding within reach of fastavro
(here: at least 0.8x its records/s, `WITHIN_REACH`); `read_table` faster than pyarrow's JSON
reader.

How to run, from the repository's root, in a virtualenv with cobsfile (a release build),
fastavro, pyarrow and zstandard (for fastavro's "zstandard" codec) installed:

    COBSFILE_PY_MB=100 python python/benches/bench.py

Environment:
    COBSFILE_PY_MB     NDJSON size in MB (10^6 bytes) to generate, default 100
    COBSFILE_PY_RUNS   timed passes per case (the best is reported), default 3
    COBSFILE_PY_DIR    where the files go: created if missing, and its files reused when
                       their sizes match what this script wrote there last (manifest.json);
                       default a new temporary directory, deleted at the end

The events are generated from a fixed seed (random.Random), in the style of
samples/events.jsonl: ts (RFC 3339 string), level, service, host, request_id (16 hex digits),
latency_ms (float), msg (words). Before timing, one untimed pass per case checks the record
count and the first record. Stdout is a Markdown report (for BENCHMARKS.md); progress goes to
stderr. Exit status 1 if a check failed.
"""

from __future__ import annotations

import datetime
import gc
import json
import os
import platform
import random
import shlex
import shutil
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import fastavro
import pyarrow
import pyarrow.json

import cobsfile

try:
    import zstandard
except ImportError:
    zstandard = None

SEED = 20251130
ZSTD_LEVEL = 3
RAW_GOAL = 3.0  # cobsfile raw iteration / fastavro, records/s
WITHIN_REACH = 0.8  # cobsfile typed decoding / fastavro, records/s

LEVELS = ("info", "info", "info", "debug", "warn", "error")
SERVICES = ("auth", "billing", "checkout", "gateway", "search")
WORDS = (
    "accepted", "cache", "created", "depth", "miss", "order", "payment", "queue",
    "rebalanced", "refreshed", "request", "retry", "served", "session", "timeout", "token",
    "upstream", "user",
)
START = 1764460800  # 2025-11-30T00:00:00Z

SCHEMA = {
    "type": "record",
    "name": "Event",
    "fields": [
        {"name": "ts", "type": "string"},
        {"name": "level", "type": "string"},
        {"name": "service", "type": "string"},
        {"name": "host", "type": "string"},
        {"name": "request_id", "type": "string"},
        {"name": "latency_ms", "type": "double"},
        {"name": "msg", "type": "string"},
    ],
}

NDJSON = "events.ndjson"
JSON_COBS = "events.json.cobs"
JSON_ZSTD_COBS = f"events.json.zstd{ZSTD_LEVEL}.cobs"
TYPED_COBS = "events.avro.cobs"
AVRO_NULL = "events.null.avro"
AVRO_ZSTD = "events.zstandard.avro"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def event_lines(target_bytes: int, seed: int = SEED) -> Iterable[bytes]:
    """NDJSON lines (with their newline) of generated events, until `target_bytes`."""
    rng = random.Random(seed)
    encode = json.JSONEncoder(separators=(",", ":")).encode
    t, total = START, 0
    while total < target_bytes:
        t += rng.randrange(3)
        event = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t)),
            "level": rng.choice(LEVELS),
            "service": rng.choice(SERVICES),
            "host": f"web-{rng.randint(1, 12):02d}",
            "request_id": f"{rng.getrandbits(64):016x}",
            "latency_ms": round(rng.expovariate(1 / 40), 2),
            "msg": " ".join(rng.choices(WORDS, k=rng.randint(3, 14))),
        }
        line = (encode(event) + "\n").encode()
        total += len(line)
        yield line


def ndjson_records(path: Path) -> Iterable[bytes]:
    with open(path, "rb") as f:
        for line in f:
            yield line.rstrip(b"\n")


def ndjson_dicts(path: Path) -> Iterable[dict]:
    loads = json.loads
    with open(path, "rb") as f:
        for line in f:
            yield loads(line)


class Files:
    """The benchmark's files in one directory, rebuilt only when missing or of another size
    than manifest.json says this script wrote."""

    def __init__(self, directory: Path, target_bytes: int):
        self.dir = directory
        self.manifest_path = directory / "manifest.json"
        key = {
            "script": 1,
            "seed": SEED,
            "target_bytes": target_bytes,
            "zstd_level": ZSTD_LEVEL,
            "cobsfile_format": cobsfile.FORMAT_VERSION,
        }
        try:
            self.manifest = json.loads(self.manifest_path.read_text())
        except (OSError, ValueError):
            self.manifest = {}
        if self.manifest.get("key") != key:
            self.manifest = {"key": key, "files": {}}
        self.target_bytes = target_bytes

    def path(self, name: str) -> Path:
        return self.dir / name

    def ensure(self, name: str, build: Callable[[Path], None]) -> bool:
        """Builds `name` unless it is there with the size recorded; True if built."""
        path = self.path(name)
        if path.exists() and self.manifest["files"].get(name) == path.stat().st_size:
            log(f"reusing {path}")
            return False
        tmp = self.path(name + ".tmp")
        start = time.perf_counter()
        build(tmp)
        os.replace(tmp, path)
        self.manifest["files"][name] = path.stat().st_size
        self.manifest_path.write_text(json.dumps(self.manifest, indent=1) + "\n")
        took = time.perf_counter() - start
        log(f"wrote {path} ({path.stat().st_size / 1e6:,.1f} MB) in {took:.1f} s")
        return True

    def build_all(self) -> None:
        if self.ensure(NDJSON, self._ndjson):
            # Everything else is made from the NDJSON: make it again.
            self.manifest["files"] = {NDJSON: self.manifest["files"][NDJSON]}
        ndjson = self.path(NDJSON)

        def cobs(compression: Any, typed: bool) -> Callable[[Path], None]:
            def build(tmp: Path) -> None:
                schema = SCHEMA if typed else None
                records = ndjson_dicts(ndjson) if typed else ndjson_records(ndjson)
                with cobsfile.Writer(
                    str(tmp), compression=compression, schema=schema, overwrite=True
                ) as w:
                    w.write_many(records)

            return build

        def avro(codec: str) -> Callable[[Path], None]:
            def build(tmp: Path) -> None:
                with open(tmp, "wb") as f:
                    schema = fastavro.parse_schema(SCHEMA)
                    fastavro.writer(f, schema, ndjson_dicts(ndjson), codec=codec)

            return build

        self.ensure(JSON_COBS, cobs(None, typed=False))
        self.ensure(JSON_ZSTD_COBS, cobs(("zstd", ZSTD_LEVEL), typed=False))
        self.ensure(TYPED_COBS, cobs(None, typed=True))
        self.ensure(AVRO_NULL, avro("null"))
        if zstandard is not None:
            self.ensure(AVRO_ZSTD, avro("zstandard"))

    def _ndjson(self, tmp: Path) -> None:
        records = 0
        with open(tmp, "wb") as f:
            for line in event_lines(self.target_bytes):
                f.write(line)
                records += 1
        self.manifest["records"] = records


class Case:
    """One measured way of reading the events: `run` is timed, `check` (untimed) returns
    (records, first record) for the checks."""

    def __init__(
        self,
        name: str,
        file: str,
        run: Callable[[], Any],
        check: Callable[[], tuple],
        peer: Optional["Case"] = None,
        alone: str = "(peer)",
    ):
        self.name, self.file, self.run, self.check, self.peer = name, file, run, check, peer
        self.alone = alone  # the "vs peer" column without a peer
        self.best: Optional[float] = None


def iteration(open_: Callable[[], Any], items: Callable[[Any], Iterable]) -> tuple:
    """`run` and `check` of a case that iterates `items(source)` over `with open_() as source`;
    the timed loop does nothing per item but the iterator's own work."""

    def run() -> None:
        with open_() as source:
            for _ in items(source):
                pass

    def check() -> tuple:
        count, first = 0, None
        with open_() as source:
            for item in items(source):
                if count == 0:
                    first = item
                count += 1
        return count, first

    return run, check


def table(read: Callable[[], pyarrow.Table]) -> tuple:
    def check() -> tuple:
        t = read()
        first = t.slice(0, 1).to_pylist()[0] if t.num_rows else None
        return t.num_rows, first, t.schema

    return read, check


def plain(value: Any) -> Any:
    """A value of an Arrow row as JSON gives it (a timestamp column as its RFC 3339 text)."""
    if isinstance(value, datetime.datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")
    return value


def best_of(fn: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "?"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def command() -> str:
    env = [
        f"{k}={shlex.quote(v)}"
        for k, v in sorted(os.environ.items())
        if k.startswith("COBSFILE_PY_")
    ]
    argv = getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv]
    return " ".join(env + [shlex.join(argv)])


def main() -> int:
    target_mb = float(os.environ.get("COBSFILE_PY_MB", "100"))
    runs = int(os.environ.get("COBSFILE_PY_RUNS", "3"))
    given_dir = os.environ.get("COBSFILE_PY_DIR")
    if given_dir:
        directory = Path(given_dir)
    else:
        directory = Path(tempfile.mkdtemp(prefix="cobsfile-py-bench-"))
    directory.mkdir(parents=True, exist_ok=True)
    if zstandard is None:
        log(
            "fastavro's 'zstandard' codec needs the zstandard package (pip install zstandard):"
            " the fastavro zstandard case is skipped"
        )
    try:
        return bench(directory, int(target_mb * 1e6), runs)
    finally:
        if not given_dir:
            shutil.rmtree(directory, ignore_errors=True)
            log(f"deleted {directory} (set COBSFILE_PY_DIR to keep the files for reruns)")


def bench(directory: Path, target_bytes: int, runs: int) -> int:
    load_before = loadavg()
    files = Files(directory, target_bytes)
    files.build_all()
    p = {name: str(files.path(name)) for name in files.manifest["files"]}
    n = files.manifest["records"]
    ndjson_bytes = files.manifest["files"][NDJSON]
    with open(p[NDJSON], "rb") as f:
        first_line = f.readline().rstrip(b"\n")
    first_event = json.loads(first_line)

    def binary(path: str) -> Callable[[], Any]:
        return lambda: open(path, "rb")

    def cobs(path: str) -> Callable[[], Any]:
        return lambda: cobsfile.open(path)

    def avro_case(codec: str, name: str) -> Optional[Case]:
        if name not in p:
            return None
        run, check = iteration(binary(p[name]), fastavro.reader)
        return Case(f"fastavro, codec {codec!r} (dicts)", name, run, check)

    fa_null = avro_case("null", AVRO_NULL)
    fa_zstd = avro_case("zstandard", AVRO_ZSTD)
    raw = [
        Case("cobsfile, uncompressed (bytes)", JSON_COBS,
             *iteration(cobs(p[JSON_COBS]), iter), fa_null),
        Case(f"cobsfile, zstd-{ZSTD_LEVEL} (bytes)", JSON_ZSTD_COBS,
             *iteration(cobs(p[JSON_ZSTD_COBS]), iter), fa_zstd,
             alone="(fastavro zstandard not measured)"),
        fa_null,
        fa_zstd,
        Case("NDJSON lines, `open(path, 'rb')` (bytes)", NDJSON,
             *iteration(binary(p[NDJSON]), iter), fa_null),
    ]
    decoded = [
        Case("cobsfile typed, `records(decode=True)`", TYPED_COBS,
             *iteration(cobs(p[TYPED_COBS]), lambda r: r.records(decode=True)), fa_null),
        Case('cobsfile JSON, `records(decode="json")`', JSON_COBS,
             *iteration(cobs(p[JSON_COBS]), lambda r: r.records(decode="json")), fa_null),
        fa_null,
    ]
    pa_default = Case("`pyarrow.json.read_json`", NDJSON,
                      *table(lambda: pyarrow.json.read_json(p[NDJSON])))
    single = pyarrow.json.ReadOptions(use_threads=False)
    as_text = pyarrow.json.ParseOptions(
        explicit_schema=pyarrow.schema([("ts", pyarrow.string())]),
        unexpected_field_behavior="infer",
    )
    pa_single = Case("`pyarrow.json.read_json`, use_threads=False", NDJSON,
                     *table(lambda: pyarrow.json.read_json(p[NDJSON], read_options=single)))
    arrow = [
        Case("`cobsfile.read_table`, JSON records", JSON_COBS,
             *table(lambda: cobsfile.read_table(p[JSON_COBS])), pa_default),
        Case("`cobsfile.read_table`, typed records", TYPED_COBS,
             *table(lambda: cobsfile.read_table(p[TYPED_COBS])), pa_default),
        pa_default,
        Case("`cobsfile.read_table(threads=1)`, JSON records", JSON_COBS,
             *table(lambda: cobsfile.read_table(p[JSON_COBS], threads=1)), pa_single),
        Case("`cobsfile.read_table(threads=1)`, typed records", TYPED_COBS,
             *table(lambda: cobsfile.read_table(p[TYPED_COBS], threads=1)), pa_single),
        pa_single,
        Case("`pyarrow.json.read_json`, `ts` read as a string (reference)", NDJSON,
             *table(lambda: pyarrow.json.read_json(p[NDJSON], parse_options=as_text)),
             alone="(reference: cobsfile's JSON tables keep RFC 3339 text as text)"),
    ]
    sections = [
        ("1. Raw iteration", [c for c in raw if c is not None]),
        ("2. Decoding to dicts", [c for c in decoded if c is not None]),
        ("3. Arrow tables", arrow),
    ]

    problems: list[str] = []
    schemas: list[tuple[str, Any]] = []
    for _, cases in sections:
        for case in cases:
            if case.best is not None:
                continue  # fastavro's dicts: measured once, shown twice
            log(f"checking: {case.name}")
            try:
                count, first, *schema = case.check()
            except Exception as e:  # reported, not fatal: the other cases still run
                problems.append(f"{case.name}: {type(e).__name__}: {e}")
                case.best = float("nan")
                continue
            if schema:
                schemas.append((case.name, schema[0]))
                first = {k: plain(v) for k, v in first.items()} if first else first
            expected = first_line if isinstance(first, bytes) else first_event
            if isinstance(first, bytes) and case.file == NDJSON:
                first = first.rstrip(b"\n")
            if count != n:
                problems.append(f"{case.name}: {count:,} records, expected {n:,}")
            if first != expected:
                problems.append(f"{case.name}: first record {first!r}, expected {expected!r}")
            log(f"timing: {case.name} ({runs} run(s))")
            case.best = best_of(case.run, runs)
    load_after = loadavg()

    out = []
    w = out.append
    mb = ndjson_bytes / 1e6
    w(f"### Python: cobsfile against fastavro and pyarrow ({mb:,.0f} MB of JSON events)")
    w("")
    w(f"Command: `{command()}`")
    w("")
    w("| | |")
    w("|---|---|")
    python = f"{platform.python_implementation()} {platform.python_version()}"
    w(f"| Python | {python} (`{sys.executable}`) |")
    zstd_version = version("zstandard") if zstandard is not None else "not installed"
    w(
        f"| Packages | cobsfile {version('cobsfile')} (`{Path(cobsfile.__file__).parent}`), "
        f"fastavro {fastavro.__version__}, pyarrow {pyarrow.__version__}, "
        f"zstandard {zstd_version} |"
    )
    w(f"| Machine | {cpu_model()}, {os.cpu_count()} CPUs, "
      f"{platform.system()} {platform.release()}; "
      f"load average {load_before} before, {load_after} after |")
    w(f"| Data | {n:,} events, {ndjson_bytes:,} bytes of NDJSON, seed {SEED} |")
    w(f"| Method | best of {runs} run(s) per case, wall time; MB/s = NDJSON bytes (10^6) / time; "
      "vs peer = the peer's time / this case's time (above 1: faster than the peer) |")
    w("")
    w("| file | what | MB | of NDJSON |")
    w("|---|---|---:|---:|")
    what = {
        NDJSON: "one JSON event per line",
        JSON_COBS: "JSON records, uncompressed",
        JSON_ZSTD_COBS: f"JSON records, zstd level {ZSTD_LEVEL}",
        TYPED_COBS: "typed records (Avro schema `Event`), uncompressed",
        AVRO_NULL: "Avro OCF (fastavro), codec null",
        AVRO_ZSTD: "Avro OCF (fastavro), codec zstandard",
    }
    for name, size in files.manifest["files"].items():
        w(f"| `{name}` | {what[name]} | {size / 1e6:,.1f} | {size / ndjson_bytes:.2f} |")
    for title, cases in sections:
        w("")
        w(f"#### {title}")
        w("")
        w("| case | file | ms | MB/s | records/s | vs peer |")
        w("|---|---|---:|---:|---:|---|")
        for c in cases:
            vs = f"{c.peer.best / c.best:.2f}x {c.peer.name}" if c.peer is not None else c.alone
            w(f"| {c.name} | `{c.file}` | {c.best * 1e3:,.1f} | {mb / c.best:,.1f} "
              f"| {n / c.best:,.0f} | {vs} |")

    def ratio(case: Case) -> Optional[float]:
        if case.peer is None or case.peer.best is None or case.best is None:
            return None
        return case.peer.best / case.best

    def goal(text: str, pairs: list[tuple[Case, float]]) -> None:
        got = [(c, ratio(c)) for c, _ in pairs]
        met = all(r is not None and r >= need for (_, r), (_, need) in zip(got, pairs))
        detail = "; ".join(
            f"{c.name}: {r:.2f}x" if r is not None else f"{c.name}: not measured" for c, r in got
        )
        w(f"- {'met' if met else 'NOT met'}: {text} ({detail})")

    w("")
    w("#### Goals")
    w("")
    goal(f"raw iteration at least {RAW_GOAL:g}x fastavro's records/s, each codec against its like",
         [(raw[0], RAW_GOAL), (raw[1], RAW_GOAL)])
    goal(f"typed decoding within reach of fastavro (at least {WITHIN_REACH:g}x its records/s)",
         [(decoded[0], WITHIN_REACH)])
    goal("Arrow conversion faster than `pyarrow.json.read_json` (its default threads)",
         [(arrow[0], 1.0), (arrow[1], 1.0)])
    w("")
    w("#### Arrow schemas")
    w("")
    for name, schema in schemas:
        fields = ", ".join(f"{f.name}: {f.type}" for f in schema)
        w(f"- {name}: {fields}")
    if problems:
        w("")
        w("#### Problems")
        w("")
        for problem in problems:
            w(f"- {problem}")
    print("\n".join(out))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
