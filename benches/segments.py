#!/usr/bin/env python3
"""Log directories (spec 11.4): what rolling and finishing segments cost an appender, and what
reading an hour of a month-long directory costs against reading all of it.

1. Appending: `pack --append LOG --time-field ts` into one log file, against `pack --append
   DIR --time-field ts --segment-size SIZE` (a roll every SIZE, each segment left finished in
   place by the appender's background thread: read whole, then an index, a time index and an
   end block appended), best of RUNS, the directory emptied between runs.
2. Finishing alone: the time `cobsfile verify` takes over the finished segments (a finish reads
   a segment as a verify does, then writes a few KiB).
3. Reading: `cat DIR` against `cat --since/--until DIR` for one hour (each finished segment's
   time index plans its read; segments whose times miss the hour read only their index), and
   `sql` over the directory with and without `WHERE ts BETWEEN`.

    COBSFILE_SEGMENTS_MB=500 python3 benches/segments.py [path/to/cobsfile]

The binary defaults to target/release/cobsfile (`cargo build --release -p cobsfile-cli`).
"""

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

MB = int(os.environ.get("COBSFILE_SEGMENTS_MB", "500"))
RUNS = int(os.environ.get("COBSFILE_SEGMENTS_RUNS", "3"))
SEGMENT = os.environ.get("COBSFILE_SEGMENT_SIZE", "16M")
DAYS = 30
START = 1_764_547_200  # 2025-12-01T00:00:00Z
HERE = os.path.dirname(os.path.abspath(__file__))
BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "target", "release", "cobsfile")


def events(path):
    """JSON events over DAYS days, a little out of order, about MB megabytes."""
    rng = random.Random(11)
    services = ["api", "auth", "billing", "search", "worker"]
    line_len = 150
    n = MB * 1_000_000 // line_len
    step = DAYS * 86_400 / n
    with open(path, "w") as out:
        for i in range(n):
            t = START + i * step + rng.uniform(-2, 2)
            out.write(
                json.dumps(
                    {
                        "ts": round(t, 6),
                        "service": rng.choice(services),
                        "latency_ms": rng.randint(1, 900),
                        "path": "/v1/items/%d" % rng.randint(1, 10**6),
                        "msg": "request served " + "x" * rng.randint(0, 30),
                    }
                )
                + "\n"
            )
    return n


def timed(cmd, before=None):
    times = []
    for _ in range(RUNS):
        if before:
            before()
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t)
    return min(times)


def rfc3339(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def size(path):
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    return os.path.getsize(path)


def main():
    with tempfile.TemporaryDirectory(prefix="cobsfile-segments-") as tmp:
        source = os.path.join(tmp, "events.jsonl")
        records = events(source)
        log = os.path.join(tmp, "log.cobs")
        directory = os.path.join(tmp, "log")

        def clear():
            for path in (log, directory):
                if os.path.isdir(path):
                    shutil.rmtree(path)
                elif os.path.exists(path):
                    os.remove(path)

        pack = [BIN, "pack", "--time-field", "ts", "--append"]
        one = timed(pack + [log, source], clear)
        segmented = timed(pack + [directory, "--segment-size", SEGMENT, source], clear)
        subprocess.run(pack + [log, source], check=True)
        segments = sorted(os.listdir(directory))
        verify = timed([BIN, "verify", directory])
        print(f"# {MB} MB of JSON, {records:,} records over {DAYS} days; segments of {SEGMENT}: "
              f"{len(segments)}, {size(directory):,} bytes (one file: {size(log):,})")
        print(f"| append, one log file | {one:.2f} s | |")
        print(f"| append, log directory (rolls, finishing) | {segmented:.2f} s | "
              f"{segmented / one:.2f}x |")
        print(f"| verify of the directory (what finishing reads) | {verify:.2f} s | |")

        since = START + 15 * 86_400
        window = ["--since", rfc3339(since), "--until", rfc3339(since + 3600)]
        file_full = timed([BIN, "cat", log])
        file_hour = timed([BIN, "cat", *window, log])
        print(f"| `cat LOG`, one open log file | {file_full:.3f} s | |")
        print(f"| `cat --since/--until LOG`, one hour (no index: every frame checked) | "
              f"{file_hour:.3f} s | 1/{file_full / file_hour:.0f} |")
        full = timed([BIN, "cat", directory])
        hour = timed([BIN, "cat", *window, directory])
        got = subprocess.run([BIN, "cat", *window, directory], capture_output=True, check=True)
        lines = got.stdout.count(b"\n")
        print(f"| `cat DIR` | {full:.3f} s | |")
        print(f"| `cat --since/--until DIR`, one hour ({lines:,} records) | "
              f"{hour:.3f} s | 1/{full / hour:.0f} |")
        query = "SELECT count(*) AS n, avg(latency_ms) AS latency FROM log"
        between = f" WHERE ts BETWEEN '{rfc3339(since)}' AND '{rfc3339(since + 3600)}'"
        sql_full = timed([BIN, "sql", query, directory])
        sql_hour = timed([BIN, "sql", query + between, directory])
        print(f"| `sql` over DIR, every row | {sql_full:.3f} s | |")
        print(f"| `sql` over DIR, `WHERE ts BETWEEN` one hour | {sql_hour:.3f} s | "
              f"1/{sql_full / sql_hour:.0f} |")


if __name__ == "__main__":
    main()
