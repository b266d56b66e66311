#!/usr/bin/env python3
"""The pipe table: the large-JSON corpus sent through a real OS pipe between two processes,

    cobsfile pack [--zstd LEVEL] --framing len32 < large-json.len32 \\
        | cobsfile cat --framing len32 - > /dev/null

at several zstd levels, as in Atomic::Pipe's table (a 100 MB stream of JSON objects of
187..10000 bytes).

Usage: python3 benches/pipe_table.py [--runs N] [--levels none,-3,...] [--workdir DIR]
                                     [--corpus large-json|small-json|zero-rich] [--threads N]
                                     [--json FILE] [--no-build]

Steps, from the repository that holds this script:
1. `cargo build --release` (the `cobsfile` binary, in $CARGO_TARGET_DIR or target/);
2. the corpus, unless WORKDIR/CORPUS.len32 exists (CORPUS is large-json unless --corpus says
   otherwise): `COBSFILE_BENCH_LEN32=WORKDIR/large-json.len32 cargo bench --bench zstd`
   (benches/corpus.rs, 100 MB unless COBSFILE_BENCH_MB says otherwise; the bench binary writes
   the file and exits; delete the file after changing COBSFILE_BENCH_MB);
3. per level, one checked run, untimed:
   `pack ... < corpus | tee WORKDIR/wire.cobs | cat --framing len32 - | cmp - corpus`
   (the output must equal the input byte for byte; wire bytes = the size of what tee saw),
   then N timed runs (default 3) of the two-process pipeline, output to /dev/null.

Columns: raw MB/s = record bytes (without the 4-byte prefixes) / wall time of the whole
pipeline, best of N; wire MB = bytes through the pipe; ratio = record bytes / wire bytes;
saved = 1 - wire / record bytes. MB = 10^6 bytes. The load average is printed before and after
each level: rerun if the machine was busy.
"""

import argparse
import json
import os
import shlex
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LEVELS = ["none", "-3", "-1", "1", "3", "5", "9", "18", "22"]

# Atomic::Pipe's published figures (their machine): level -> (MB/s, wire MB, ratio).
ATOMIC_PIPE = {
    "none": (0.29, None, None),
    "-3": (287.85, 35.61, 2.81),
    "-1": (273.56, 33.92, 2.95),
    "1": (237.04, 30.56, 3.27),
    "3": (207.61, 30.25, 3.31),
    "5": (113.02, 30.01, 3.33),
    "9": (39.35, 29.93, 3.34),
    "18": (7.81, 28.14, 3.55),
    "22": (7.85, 28.14, 3.55),
}


def loadavg():
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def target_dir():
    return Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))


def record_bytes(path):
    """Records and record bytes of a len32 stream (checks that it is well formed)."""
    records = total = 0
    with open(path, "rb") as f:
        while True:
            prefix = f.read(4)
            if not prefix:
                return records, total
            if len(prefix) < 4:
                sys.exit(f"{path}: cut inside a length prefix")
            (n,) = struct.unpack("<I", prefix)
            f.seek(n, os.SEEK_CUR)
            records += 1
            total += n
            if f.tell() > os.path.getsize(path):
                sys.exit(f"{path}: cut inside a record")


PACK_THREADS = None  # `pack --threads N` when set (--threads)


def pack_args(binary, level):
    args = [str(binary), "pack", "--framing", "len32"]
    if level != "none":
        args += ["--zstd", level]
    if PACK_THREADS is not None:
        args += ["--threads", str(PACK_THREADS)]
    return args + ["-"]


def checked_run(binary, pack_argv, corpus, workdir, label):
    """One run of `pack_argv | cat` whose output is compared with the input; returns the wire
    bytes."""
    wire = workdir / "wire.cobs"
    pack = shlex.join(pack_argv)
    cat = shlex.join([str(binary), "cat", "--framing", "len32", "-"])
    command = (
        f"{pack} < {shlex.quote(str(corpus))} | tee {shlex.quote(str(wire))} | {cat}"
        f" | cmp - {shlex.quote(str(corpus))}"
    )
    result = subprocess.run(["bash", "-o", "pipefail", "-c", command])
    if result.returncode != 0:
        sys.exit(f"{label}: the output differs from the input (or a step failed):\n{command}")
    size = wire.stat().st_size
    wire.unlink()
    return size


def timed_run(binary, pack_argv, corpus, label):
    """Wall time of `pack_argv | cat` through an OS pipe, output discarded."""
    with open(corpus, "rb") as source, open(os.devnull, "wb") as sink:
        start = time.perf_counter()
        pack = subprocess.Popen(pack_argv, stdin=source, stdout=subprocess.PIPE)
        cat = subprocess.Popen(
            [str(binary), "cat", "--framing", "len32", "-"], stdin=pack.stdout, stdout=sink
        )
        pack.stdout.close()  # cat holds the only read end: pack sees EPIPE if cat dies
        cat_rc = cat.wait()
        pack_rc = pack.wait()
        elapsed = time.perf_counter() - start
    if pack_rc or cat_rc:
        sys.exit(f"{label}: pack exited {pack_rc}, cat exited {cat_rc}")
    return elapsed


def prepare(workdir, corpus_name, build):
    """Builds the release binary (when `build`) and the corpus (unless it exists); returns the
    binary, the corpus, its records and record bytes."""
    workdir.mkdir(parents=True, exist_ok=True)
    if build:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    binary = target_dir() / "release" / "cobsfile"
    corpus = workdir / f"{corpus_name}.len32"
    if not corpus.exists():
        env = dict(os.environ, COBSFILE_BENCH_LEN32=str(corpus), COBSFILE_BENCH_LEN32_CORPUS=corpus_name)
        subprocess.run(["cargo", "bench", "--quiet", "--bench", "zstd"], cwd=ROOT, env=env, check=True)
    records, raw = record_bytes(corpus)
    print(f"corpus {corpus}: {records} records, {raw} record bytes ({raw / 1e6:.2f} MB), "
          f"{corpus.stat().st_size} bytes with prefixes", file=sys.stderr)
    print(f"binary {binary}; nproc {os.cpu_count()}; load average {loadavg()}", file=sys.stderr)
    return binary, corpus, records, raw


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="timed runs per level (best kept)")
    parser.add_argument("--levels", default=",".join(LEVELS), help="comma-separated; none = no zstd")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/cobsfile-pipe"))
    parser.add_argument("--corpus", default="large-json", choices=["large-json", "small-json", "zero-rich"])
    parser.add_argument("--threads", type=int, help="pass --threads N to pack (default: not passed, one thread)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--no-build", action="store_true", help="use the binary as built")
    args = parser.parse_args()
    global PACK_THREADS
    PACK_THREADS = args.threads
    levels = [l.strip() for l in args.levels.split(",") if l.strip()]
    binary, corpus, records, raw = prepare(args.workdir, args.corpus, not args.no_build)

    results = []
    for level in levels:
        before = loadavg()
        pack, label = pack_args(binary, level), f"level {level}"
        wire = checked_run(binary, pack, corpus, args.workdir, label)
        times = [timed_run(binary, pack, corpus, label) for _ in range(args.runs)]
        best = min(times)
        row = {
            "level": level,
            "seconds": times,
            "mb_per_s": raw / best / 1e6,
            "wire_bytes": wire,
            "ratio": raw / wire,
            "saved": 1 - wire / raw,
            "load_before": before,
            "load_after": loadavg(),
        }
        results.append(row)
        print(f"level {level:>4}: {row['mb_per_s']:8.2f} MB/s (runs {', '.join(f'{t:.3f}' for t in times)} s), "
              f"wire {wire / 1e6:.2f} MB, ratio {row['ratio']:.2f}x, output checked; "
              f"load {before} -> {row['load_after']}", file=sys.stderr)

    print("| level | raw MB/s | wire MB | ratio | saved | Atomic::Pipe MB/s | Atomic::Pipe wire MB | Atomic::Pipe ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in results:
        theirs = ATOMIC_PIPE.get(row["level"], (None, None, None))
        name = "uncompressed" if row["level"] == "none" else f"zstd {row['level']}"
        cells = [
            name,
            f"{row['mb_per_s']:.2f}",
            f"{row['wire_bytes'] / 1e6:.2f}",
            f"{row['ratio']:.2f}×",
            f"{100 * row['saved']:.1f} %",
            "–" if theirs[0] is None else f"{theirs[0]:.2f}",
            "–" if theirs[1] is None else f"{theirs[1]:.2f}",
            "–" if theirs[2] is None else f"{theirs[2]:.2f}×",
        ]
        print("| " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(json.dumps({"record_bytes": raw, "records": records, "rows": results}, indent=1))


if __name__ == "__main__":
    main()
