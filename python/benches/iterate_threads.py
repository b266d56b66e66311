#!/usr/bin/env python3
"""Records per second of `for r in cobsfile.open(path, threads=N): pass`, N = 1, 2, on an
uncompressed and a zstd-3 cobsfile of generated JSON log lines, best of COBSFILE_PY_RUNS
passes (default 5), the two thread counts alternated pass by pass.

    COBSFILE_PY_MB=200 python python/benches/iterate_threads.py     # a release build installed

COBSFILE_PY_MB: megabytes (10^6) of records to write (default 200); the files go to a new
temporary directory, deleted at the end. Stdout: a Markdown table.
"""

import os
import random
import tempfile
import time

import cobsfile

MB = int(os.environ.get("COBSFILE_PY_MB", "200"))
RUNS = int(os.environ.get("COBSFILE_PY_RUNS", "5"))


def lines(total: int):
    rng = random.Random(7)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    made = 0
    i = 0
    while made < total:
        line = (
            '{"ts":"2026-12-05T%02d:%02d:%02dZ","level":"%s","service":"svc-%d","latency_ms":%.3f,'
            '"msg":"%s"}'
            % (i // 3600 % 24, i // 60 % 60, i % 60, rng.choice(["info", "warn", "error"]),
               rng.randrange(40), rng.random() * 500, " ".join(rng.choices(words, k=8)))
        ).encode()
        made += len(line)
        i += 1
        yield line


def main():
    with tempfile.TemporaryDirectory() as d:
        paths = {}
        for name, compression in (("none", None), ("zstd-3", ("zstd", 3))):
            p = os.path.join(d, name + ".cobs")
            with cobsfile.Writer(p, compression=compression) as w:
                w.write_many(lines(MB * 1_000_000))
            paths[name] = p
        print("| file | records | threads 1 (rec/s) | threads 2 (rec/s) | 2 / 1 |")
        print("|---|---:|---:|---:|---:|")
        for name, p in paths.items():
            count = sum(1 for _ in cobsfile.open(p))
            best = {1: float("inf"), 2: float("inf")}
            for _ in range(RUNS):
                for threads in (1, 2):
                    start = time.perf_counter()
                    for _ in cobsfile.open(p, threads=threads):
                        pass
                    best[threads] = min(best[threads], time.perf_counter() - start)
            r1, r2 = count / best[1], count / best[2]
            print(f"| {name} | {count:,} | {r1:,.0f} | {r2:,.0f} | {r2 / r1:.2f} |", flush=True)


if __name__ == "__main__":
    main()
