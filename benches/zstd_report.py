#!/usr/bin/env python3
"""Markdown tables from the last `cargo bench --bench zstd` run.

Usage: python3 benches/zstd_report.py [CRITERION_DIR ...]

CRITERION_DIR defaults to $CRITERION_HOME, else $CARGO_TARGET_DIR/criterion, else
target/criterion. Throughput is the records' total bytes divided by criterion's median time
per pass (10^9 bytes per GB/s, 10^6 per MB/s). Given several directories (copies of the
criterion directory after each of several runs), each number is the median over the runs and
the largest spread (max/min - 1) of any throughput is printed. Compression ratios (record
bytes / output bytes) come from zstd-sizes.json, which the bench writes in the same directory.
"""

import json
import os
import sys
from pathlib import Path

from report import fmt, ratio, table  # the throughput report's formatting

CORPORA = ["small-json", "large-json", "zero-rich"]


def load(root):
    results = {}
    for bench in root.glob("zstd*/**/new/benchmark.json"):
        meta = json.loads(bench.read_text())
        est = json.loads((bench.parent / "estimates.json").read_text())
        results[meta["full_id"]] = meta["throughput"]["Bytes"] / est["median"]["point_estimate"]
    return results


def median(values):
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def load_runs(roots):
    """Median throughput per id over the runs, and (spread, id) of the widest spread."""
    runs = [load(root) for root in roots]
    ids = set().union(*runs)
    results, widest = {}, (0.0, "")
    for id in ids:
        values = [run[id] for run in runs if id in run]
        results[id] = median(values)
        widest = max(widest, (max(values) / min(values) - 1, id))
    return results, widest


def main():
    if len(sys.argv) > 1:
        roots = [Path(a) for a in sys.argv[1:]]
    elif "CRITERION_HOME" in os.environ:
        roots = [Path(os.environ["CRITERION_HOME"])]
    else:
        roots = [Path(os.environ.get("CARGO_TARGET_DIR", "target")) / "criterion"]
    r, widest = load_runs(roots)
    g = r.get
    sizes = {"sizes": {}}
    loads = []
    for root in roots:
        sizes_file = root / "zstd-sizes.json"
        if sizes_file.exists():
            run = json.loads(sizes_file.read_text())
            sizes["sizes"].update(run.get("sizes", {}))
            if run.get("load"):
                loads.append(run["load"])

    def cr(id):
        """Compression ratio of a configuration, or None."""
        entry = sizes["sizes"].get(id)
        return entry[0] / entry[1] if entry else None

    def fr(x, digits=2):
        return "–" if x is None else f"{x:.{digits}f}×"

    for i, load_avg in enumerate(loads):
        print(f"Run {i + 1}: load average at the start {load_avg.get('start')}, at the end "
              f"{load_avg.get('end')}.")
    if len(roots) > 1:
        print(f"Medians of {len(roots)} runs; widest spread {100 * widest[0]:.1f} % ({widest[1]}).")
    print()

    print("### write, level 3\n")
    rows = []
    for c in CORPORA:
        ours, raw, payload, large = (g(f"zstd-write/{x}/{c}") for x in [
            "cobsfile", "raw-zstd", "raw-zstd-payload", "raw-zstd-payload-large-table"])
        avro, mcap = g(f"zstd-write/avro/{c}"), g(f"zstd-write/mcap/{c}")
        peers = [(v, p) for p, v in [("avro", avro), ("mcap", mcap)] if v is not None]
        best = max(peers) if peers else (None, "")
        rows.append([c, fmt(ours), fmt(raw), fmt(payload), fmt(large), fmt(avro), fmt(mcap),
                     ratio(ours, raw), ratio(ours, payload), ratio(payload, raw),
                     ratio(large, payload), ratio(ours, best[0])])
    print(table(["corpus", "cobsfile", "raw zstd", "raw zstd, cobsfile payload",
                 "same, large-input params", "avro", "mcap", "cobsfile / raw",
                 "cobsfile / raw payload", "raw payload / raw", "large-input params / payload",
                 "cobsfile / faster peer"], rows))

    print("\n### read, level 3\n")
    rows = []
    for c in CORPORA:
        ours, stream = g(f"zstd-read/cobsfile/{c}"), g(f"zstd-read/cobsfile-stream/{c}")
        raw, payload = g(f"zstd-read/raw-zstd/{c}"), g(f"zstd-read/raw-zstd-payload/{c}")
        large = g(f"zstd-read/raw-zstd-payload-large-table/{c}")
        avro, mcap = g(f"zstd-read/avro/{c}"), g(f"zstd-read/mcap/{c}")
        peers = [(v, p) for p, v in [("avro", avro), ("mcap", mcap)] if v is not None]
        best = max(peers) if peers else (None, "")
        rows.append([c, fmt(ours), fmt(stream), fmt(raw), fmt(payload), fmt(large), fmt(avro),
                     fmt(mcap), ratio(ours, raw), ratio(stream, raw), ratio(ours, payload),
                     ratio(large, payload), ratio(ours, best[0])])
    print(table(["corpus", "cobsfile (slice)", "cobsfile (stream)", "raw zstd",
                 "raw zstd, cobsfile payload", "same, large-input params", "avro", "mcap",
                 "cobsfile / raw", "stream / raw", "cobsfile / raw payload",
                 "large-input params / payload", "cobsfile / faster peer"], rows))

    print("\n### compression ratio (record bytes / output bytes), level 3\n")
    rows = []
    for c in CORPORA:
        w = lambda x: cr(f"zstd-write/{x}/{c}")
        ours, raw = w("cobsfile"), w("raw-zstd")
        rows.append([c, fr(raw, 3), fr(w("raw-zstd-payload"), 3), fr(w("raw-zstd-columnar"), 3),
                     fr(w("raw-zstd-large-table"), 3), fr(w("raw-zstd-payload-large-table"), 3),
                     fr(ours, 3),
                     "–" if ours is None or raw is None else f"{100 * (ours / raw - 1):+.2f} %",
                     fr(w("avro")), fr(w("avro-256KiB")), fr(w("mcap")), fr(w("mcap-256KiB")),
                     fr(w("cobsfile-512KiB")), fr(w("cobsfile-1MiB")), fr(w("cobsfile-dict"))])
    print(table(["corpus", "raw zstd", "raw, cobsfile payload", "raw, lengths apart",
                 "raw, large-input params", "raw payload, large-input params", "cobsfile",
                 "cobsfile vs raw", "avro (16 kB blocks)", "avro (256 KiB)", "mcap (1 MiB chunks)",
                 "mcap (256 KiB)", "cobsfile 512 KiB blocks", "cobsfile 1 MiB blocks",
                 "cobsfile + dictionary"], rows))

    print("\n### level sweep (cobsfile, large JSON, slice reader)\n")
    levels = sorted({k.rsplit("/L", 1)[1] for k in r if k.startswith("zstd-level/")}, key=int)
    base_w, base_r = g("zstd-level/write/large-json/L3"), g("zstd-level/read/large-json/L3")
    base_c = cr("zstd-level/write/large-json/L3")
    rows = []
    for lv in levels:
        wr, rd = g(f"zstd-level/write/large-json/L{lv}"), g(f"zstd-level/read/large-json/L{lv}")
        c = cr(f"zstd-level/write/large-json/L{lv}")
        rows.append([lv, fmt(wr), fmt(rd), fr(c), ratio(wr, base_w), ratio(rd, base_r),
                     "–" if c is None or base_c is None else f"{100 * (c / base_c - 1):+.1f} %"])
    print(table(["level", "write", "read", "ratio", "write vs 3", "read vs 3", "ratio vs 3"], rows))


if __name__ == "__main__":
    main()
