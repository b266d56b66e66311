#!/usr/bin/env python3
"""Reading an hour of a month-long log (issue 34's goal): `cat --since/--until` against a
full `cat`, and `sql` with `WHERE ts BETWEEN` against the same query over every row, on a log
packed with `pack --time-field`, uncompressed and zstd 3.

For each file it reports the time of a full read and of a one-hour window (best of RUNS,
output to /dev/null, file in the page cache), and the bytes the window read brought in from
disk: the file's pages are dropped from the page cache (posix_fadvise DONTNEED), the window
read runs, and mincore() counts the pages of the file then resident (the kernel's readahead
around each page fault is included, so this over-counts what the reader touched: it is
measured with the device's read-ahead and, where /sys/block/DEV/queue/read_ahead_kb can be
written (as root), with 128 KiB, a common default; the setting is put back after).

    COBSFILE_WINDOW_MB=1000 python3 benches/window.py [path/to/cobsfile]

The binary defaults to target/release/cobsfile (`cargo build --release -p cobsfile-cli`).
"""

import ctypes
import ctypes.util
import json
import mmap
import os
import random
import subprocess
import sys
import tempfile
import time

MB = int(os.environ.get("COBSFILE_WINDOW_MB", "1000"))
RUNS = int(os.environ.get("COBSFILE_WINDOW_RUNS", "3"))
DAYS = 30
START = 1_764_547_200  # 2025-12-01T00:00:00Z
HERE = os.path.dirname(os.path.abspath(__file__))
BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "target", "release", "cobsfile")

libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]


def events(path):
    """JSON events over DAYS days, a little out of order, about MB megabytes."""
    rng = random.Random(34)
    services = ["api", "auth", "billing", "search", "worker"]
    levels = ["info"] * 8 + ["warn", "error"]
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
                        "level": rng.choice(levels),
                        "latency_ms": rng.randint(1, 900),
                        "path": "/v1/items/%d" % rng.randint(1, 10**6),
                        "msg": "request served " + "x" * rng.randint(0, 30),
                    }
                )
                + "\n"
            )
    return n


def rfc3339(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def best(cmd):
    times = []
    for _ in range(RUNS):
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t)
    return min(times)


def resident_after(path, cmd):
    """Bytes of `path` in the page cache after running `cmd` on a cold cache for it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
        size = os.fstat(fd).st_size
        # A private mapping (writable, so ctypes can take its address; nothing is written).
        with mmap.mmap(fd, size, access=mmap.ACCESS_COPY) as m:
            page = mmap.PAGESIZE
            pages = (size + page - 1) // page
            vec = (ctypes.c_ubyte * pages)()
            buf = (ctypes.c_char * size).from_buffer(m)
            addr = ctypes.addressof(buf)
            if libc.mincore(ctypes.c_void_p(addr), size, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore")
            del buf
            return sum(1 for b in vec if b & 1) * page
    finally:
        os.close(fd)


def read_ahead_file(path):
    """The read_ahead_kb file of the block device holding `path`, if it can be found."""
    dev = os.stat(path).st_dev
    sys_dev = "/sys/dev/block/%d:%d" % (os.major(dev), os.minor(dev))
    for candidate in (sys_dev + "/queue/read_ahead_kb", sys_dev + "/../queue/read_ahead_kb"):
        if os.path.exists(candidate):
            return candidate
    return None


def resident_with_read_ahead(path, cmd, kb):
    """`resident_after` with the device's read-ahead set to `kb` KiB, or None if it cannot be
    set."""
    knob = read_ahead_file(path)
    if knob is None:
        return None
    before = open(knob).read().strip()
    try:
        with open(knob, "w") as f:
            f.write(str(kb))
    except OSError:
        return None
    try:
        return resident_after(path, cmd)
    finally:
        with open(knob, "w") as f:
            f.write(before)


def row(label, path, full_cmd, window_cmd, returned):
    """A table row: `full_cmd` and `window_cmd` timed, and the bytes of `path` that
    `window_cmd` reads on a cold cache; `returned` says what the window returned."""
    size = os.path.getsize(path)
    full = best(full_cmd)
    part = best(window_cmd)
    read = resident_after(path, window_cmd)
    small = resident_with_read_ahead(path, window_cmd, 128)
    small = "-" if small is None else f"{small / 1e6:.2f} MB ({100 * small / size:.2f}%)"
    return (
        f"| {label} | {size / 1e6:.0f} MB | {full:.3f} s | {part * 1000:.1f} ms ({returned}) "
        f"| 1/{full / part:.0f} | {read / 1e6:.2f} MB ({100 * read / size:.2f}%) | {small} |"
    )


def main():
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        src = os.path.join(tmp, "events.jsonl")
        n = events(src)
        # An hour in the middle of the month.
        since = START + 15 * 86_400 + 12 * 3_600
        until = since + 3_600
        window = ["--since", "@%d" % since, "--until", "@%d" % until]
        print(f"{n:,} events over {DAYS} days, {os.path.getsize(src) / 1e6:.0f} MB of JSON lines")
        print(f"window: one hour, @{since}..@{until}")
        print()
        knob = read_ahead_file(src)
        device = open(knob).read().strip() if knob else "?"
        print(
            f"| file | size | full read | 1 h window | ratio | bytes read, read-ahead {device} KiB "
            f"| bytes read, read-ahead 128 KiB |"
        )
        print("|---|---|---|---|---|---|---|")
        rows = []
        for name, extra in [("uncompressed", []), ("zstd 3", ["--zstd", "3"])]:
            path = os.path.join(tmp, "events.cobs")
            subprocess.run(
                [BIN, "pack", "--time-field", "ts", "-f", "-o", path, *extra, src], check=True
            )
            size = os.path.getsize(path)
            records = subprocess.run(
                [BIN, "cat", *window, path], capture_output=True, check=True
            ).stdout.count(b"\n")
            rows.append(
                row(
                    f"{name}, `cat`",
                    path,
                    [BIN, "cat", path],
                    [BIN, "cat", *window, path],
                    f"{records:,} records",
                )
            )
            # The same hour in SQL: the time column is `ts`, the field the times came from.
            query = "SELECT count(*) AS n, avg(latency_ms) AS latency FROM events"
            between = f" WHERE ts BETWEEN '{rfc3339(since)}' AND '{rfc3339(until)}'"
            answer = subprocess.run(
                [BIN, "sql", "--format", "csv", query + between, path],
                capture_output=True,
                check=True,
            ).stdout.decode().splitlines()[1].split(",")[0]
            rows.append(
                row(
                    f"{name}, `sql`",
                    path,
                    [BIN, "sql", query, path],
                    [BIN, "sql", query + between, path],
                    f"{int(answer):,} rows",
                )
            )
        for line in rows:
            print(line)


if __name__ == "__main__":
    main()
