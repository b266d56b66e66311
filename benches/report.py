#!/usr/bin/env python3
"""Markdown tables from the last `cargo bench --bench throughput` run.

Usage: python3 benches/report.py [CRITERION_DIR]

CRITERION_DIR defaults to $CARGO_TARGET_DIR/criterion, else target/criterion. Throughput is
the records' total bytes divided by the median time per iteration (10^9 bytes per GB/s,
10^6 per MB/s). Ratios compare cobsfile with the faster of its peers on the same corpus.
"""

import json
import os
import sys
from pathlib import Path

CORPORA = ["small-json", "large-json", "zero-rich"]


def load(root):
    results = {}
    for bench in root.glob("**/new/benchmark.json"):
        meta = json.loads(bench.read_text())
        est = json.loads((bench.parent / "estimates.json").read_text())
        nbytes = meta["throughput"]["Bytes"]
        median_ns = est["median"]["point_estimate"]
        results[meta["full_id"]] = nbytes / median_ns  # bytes per ns = GB/s
    return results


def fmt(gbps):
    if gbps is None:
        return "–"
    if gbps >= 1:
        return f"{gbps:.2f} GB/s"
    return f"{gbps * 1000:.0f} MB/s"


def ratio(a, b, digits=2):
    if a is None or b is None:
        return "–"
    return f"{a / b:.{digits}f}×"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def main():
    if len(sys.argv) > 1:
        root = Path(sys.argv[1])
    else:
        root = Path(os.environ.get("CARGO_TARGET_DIR", "target")) / "criterion"
    r = load(root)
    g = r.get

    print("### cobs (256 KiB chunks)\n")
    rows = []
    for c in CORPORA:
        enc, dec = g(f"cobs/encode/{c}"), g(f"cobs/decode/{c}")
        cenc, cdec = g(f"cobs/encode-cobs-crate/{c}"), g(f"cobs/decode-cobs-crate/{c}")
        rows.append([c, fmt(enc), fmt(dec), fmt(cenc), fmt(cdec), ratio(enc, cenc), ratio(dec, cdec)])
    print(table(["corpus", "encode", "decode", "cobs crate encode", "cobs crate decode",
                 "encode vs crate", "decode vs crate"], rows))

    print("\n### write\n")
    rows = []
    for c in CORPORA:
        ours = g(f"write/cobsfile/{c}")
        peers = {p: g(f"write/{p}/{c}") for p in ["avro", "avro-value", "mcap"]}
        best = max((v, p) for p, v in peers.items() if v is not None) if any(peers.values()) else (None, "")
        rows.append([c, fmt(ours)] + [fmt(peers[p]) for p in peers] + [best[1], ratio(ours, best[0])])
    print(table(["corpus", "cobsfile", "avro (serde)", "avro (Value)", "mcap", "faster peer",
                 "cobsfile / faster peer"], rows))

    print("\n### read\n")
    rows = []
    for c in CORPORA:
        ours, stream = g(f"read/cobsfile/{c}"), g(f"read/cobsfile-stream/{c}")
        avro, mcap, raw = g(f"read/avro/{c}"), g(f"read/mcap/{c}"), g(f"read/mcap-raw/{c}")
        peers = [(v, p) for p, v in [("avro", avro), ("mcap", mcap)] if v is not None]
        best = max(peers) if peers else (None, "")
        rows.append([c, fmt(ours), fmt(stream), fmt(avro), fmt(mcap), fmt(raw), best[1],
                     ratio(ours, best[0]), ratio(ours, raw)])
    print(table(["corpus", "cobsfile (slice)", "cobsfile (stream)", "avro", "mcap MessageStream",
                 "mcap RawMessageStream", "faster peer", "cobsfile / faster peer",
                 "cobsfile / mcap raw"], rows))

    print("\n### block_target (cobsfile, slice reader)\n")
    sizes = ["64KiB", "128KiB", "256KiB", "512KiB", "1024KiB"]
    rows = []
    for s in sizes:
        row = [s]
        for c in ["small-json", "large-json"]:
            for op in ["write", "read"]:
                v, base = g(f"block_target/{op}/{c}/{s}"), g(f"block_target/{op}/{c}/256KiB")
                row.append(f"{fmt(v)} ({ratio(v, base)})" if v else "–")
        rows.append(row)
    print(table(["block size", "write small-json", "read small-json", "write large-json",
                 "read large-json"], rows))


if __name__ == "__main__":
    main()
