#!/usr/bin/env python3
"""Does a larger pipe buffer help? A corpus sent through a real OS pipe,

    cobsfile pack --pipe-buffer BYTES [--zstd LEVEL] [--atomic-pipe | --block-size N] \\
        --framing len32 < corpus.len32 | cobsfile cat --framing len32 - > /dev/null

for pipe buffer sizes 4 KiB .. 1 MiB (pack sets its stdout pipe with F_SETPIPE_SZ), for
uncompressed and zstd data and for several block sizes: 4 KiB atomic blocks (--atomic-pipe,
each block one write of at most PIPE_BUF bytes), 64 KiB and 256 KiB (the default).

Usage: python3 benches/pipe_size.py [--runs N] [--sizes 4096,...] [--codecs none,-1,3]
                                    [--blocks atomic,65536,262144] [--corpus small-json]
                                    [--workdir DIR] [--json FILE] [--no-build]

Steps (building and the corpus as in benches/pipe_table.py, whose helpers this uses):
1. per pipe size, a probe: `pack --pipe-buffer BYTES < /dev/null | python3 ...` reads the
   pipe's size back with F_GETPIPE_SZ after pack exits (the size the kernel actually set);
2. per codec and block size, per pipe size, one checked run, untimed:
   `pack ... < corpus | tee WORKDIR/wire.cobs | cat --framing len32 - | cmp - corpus`;
3. N rounds (default 5); in each, one timed pipeline per pipe size, sizes in turn, so that a
   change in the machine's load touches every size alike; plus `pack -o /dev/null` alone and
   `cat --framing len32 - < wire > /dev/null` alone (no pipe between them), for reference.

MB/s = record bytes (without the 4-byte prefixes) / wall time, best of N; MB = 10^6 bytes.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pipe_table import checked_run, loadavg, prepare, timed_run  # noqa: E402

SIZES = [4096, 16384, 65536, 262144, 1048576]
CODECS = ["none", "-1", "3"]
BLOCKS = ["atomic", "65536", "262144"]

PROBE = (
    "import fcntl, sys; sys.stdin.buffer.read(); "
    "print(fcntl.fcntl(0, getattr(fcntl, 'F_GETPIPE_SZ', 1032)))"
)


def pack_argv(binary, codec, block, pipe_size):
    argv = [str(binary), "pack", "--framing", "len32"]
    if pipe_size is not None:
        argv += ["--pipe-buffer", str(pipe_size)]
    if codec != "none":
        argv += ["--zstd", codec]
    argv += ["--atomic-pipe"] if block == "atomic" else ["--block-size", block]
    return argv + ["-"]


def probe(binary, size):
    """The pipe buffer size pack --pipe-buffer SIZE leaves on its stdout."""
    with open(os.devnull, "rb") as empty:
        pack = subprocess.Popen(pack_argv(binary, "none", "262144", size), stdin=empty, stdout=subprocess.PIPE)
        out = subprocess.run([sys.executable, "-c", PROBE], stdin=pack.stdout, capture_output=True, text=True, check=True)
        pack.stdout.close()
        if pack.wait():
            sys.exit(f"probe {size}: pack failed")
    return int(out.stdout)


def timed(argv, stdin_path, stdout_path=os.devnull):
    with open(stdin_path, "rb") as source, open(stdout_path, "wb") as sink:
        start = time.perf_counter()
        subprocess.run(argv, stdin=source, stdout=sink, check=True)
        return time.perf_counter() - start


def label(codec, block):
    name = "uncompressed" if codec == "none" else f"zstd {codec}"
    blocks = "4 KiB atomic" if block == "atomic" else f"{int(block) // 1024} KiB"
    return name, blocks


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="rounds of timed runs (best kept)")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="pipe buffer sizes in bytes")
    parser.add_argument("--codecs", default=",".join(CODECS), help="none or a zstd level")
    parser.add_argument("--blocks", default=",".join(BLOCKS), help="atomic or a --block-size")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/cobsfile-pipe"))
    parser.add_argument("--corpus", default="small-json", choices=["large-json", "small-json", "zero-rich"])
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--no-build", action="store_true", help="use the binary as built")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    codecs = [c.strip() for c in args.codecs.split(",")]
    blocks = [b.strip() for b in args.blocks.split(",")]

    binary, corpus, records, raw = prepare(args.workdir, args.corpus, not args.no_build)
    effective = {size: probe(binary, size) for size in sizes}
    print(f"pipe sizes set: {effective}", file=sys.stderr)
    wire = args.workdir / "pipe-size-wire.cobs"

    rows = []
    for codec in codecs:
        for block in blocks:
            name = " ".join(label(codec, block))
            before = loadavg()
            for size in sizes:
                checked_run(binary, pack_argv(binary, codec, block, size), corpus, args.workdir, f"{name}, pipe {size}")
            pack_alone = pack_argv(binary, codec, block, None)
            with open(corpus, "rb") as source:
                subprocess.run(pack_alone + ["-o", str(wire)], stdin=source, check=True)
            times = {size: [] for size in sizes}
            alone = {"pack": [], "cat": []}
            for _ in range(args.runs):
                for size in sizes:
                    times[size].append(timed_run(binary, pack_argv(binary, codec, block, size), corpus, name))
                alone["pack"].append(timed(pack_alone[:-1] + ["-o", os.devnull, "-"], corpus))
                alone["cat"].append(timed([str(binary), "cat", "--framing", "len32", "-"], wire))
            row = {
                "codec": codec,
                "block": block,
                "wire_bytes": wire.stat().st_size,
                "mb_per_s": {size: raw / min(t) / 1e6 for size, t in times.items()},
                "seconds": times,
                "pack_alone_mb_per_s": raw / min(alone["pack"]) / 1e6,
                "cat_alone_mb_per_s": raw / min(alone["cat"]) / 1e6,
                "load_before": before,
                "load_after": loadavg(),
            }
            rows.append(row)
            speeds = ", ".join(f"{size // 1024} KiB {mb:.0f}" for size, mb in row["mb_per_s"].items())
            print(f"{name}: {speeds} MB/s; pack alone {row['pack_alone_mb_per_s']:.0f}, "
                  f"cat alone {row['cat_alone_mb_per_s']:.0f}; outputs checked; "
                  f"load {before} -> {row['load_after']}", file=sys.stderr)
    wire.unlink()

    default = 65536 if 65536 in sizes else sizes[0]
    heads = [f"{effective[s] // 1024} KiB" for s in sizes]
    print(f"| data | blocks | wire MB | " + " | ".join(heads) + f" | best / {default // 1024} KiB | pack alone | cat alone |")
    print("|---|---|---:|" + "---:|" * len(sizes) + "---:|---:|---:|")
    for row in rows:
        speeds = row["mb_per_s"]
        cells = [
            *label(row["codec"], row["block"]),
            f"{row['wire_bytes'] / 1e6:.1f}",
            *(f"{speeds[s]:.0f}" for s in sizes),
            f"{max(speeds.values()) / speeds[default]:.2f}×",
            f"{row['pack_alone_mb_per_s']:.0f}",
            f"{row['cat_alone_mb_per_s']:.0f}",
        ]
        print("| " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(json.dumps({"record_bytes": raw, "records": records, "pipe_sizes": effective, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
