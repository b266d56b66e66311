#!/usr/bin/env python3
"""Real-world JSON lines for the block-size benchmark (`examples/block_size.rs`).

botocore.jsonl: the AWS API models that botocore (pinned below, from PyPI) ships, one JSON
record per operation and per shape: {"service", "version", "kind", "name", "def"}, compact.
Real data written by people over years: long-range repeats (shared shapes, documentation
phrases) and no generator's regularity.

crates.jsonl (when this machine has a cargo registry cache): the crates.io index entries cargo
has fetched, one JSON record per crate version, as cargo stores them.

    python3 benches/realworld.py OUT_DIR      # writes OUT_DIR/botocore.jsonl (and crates.jsonl)
    cargo run --release --example block_size -- OUT_DIR/*.jsonl
"""

import gzip
import io
import json
import os
import subprocess
import sys
import tempfile
import zipfile

BOTOCORE = "botocore==1.44.8"


def botocore(out_path: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, BOTOCORE],
            check=True,
        )
        (wheel,) = [f for f in os.listdir(tmp) if f.endswith(".whl")]
        with zipfile.ZipFile(os.path.join(tmp, wheel)) as z, open(out_path, "w") as out:
            for name in sorted(z.namelist()):
                if not name.endswith("/service-2.json.gz"):
                    continue
                _, _, service, version, _ = name.split("/")
                model = json.load(io.TextIOWrapper(gzip.GzipFile(fileobj=z.open(name))))
                for kind in ("operations", "shapes"):
                    for key, definition in model.get(kind, {}).items():
                        record = {"service": service, "version": version,
                                  "kind": kind[:-1], "name": key, "def": definition}
                        out.write(json.dumps(record, separators=(",", ":")) + "\n")


def crates(out_path: str) -> bool:
    home = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
    index = os.path.join(home, "registry", "index")
    lines = []
    for top, _, files in sorted(os.walk(index)):
        if os.sep + ".cache" not in top:
            continue
        for f in sorted(files):
            with open(os.path.join(top, f), "rb") as src:
                lines += [p for p in src.read().split(b"\0") if p.startswith(b'{"name"')]
    if lines:
        with open(out_path, "wb") as out:
            out.write(b"\n".join(lines) + b"\n")
    return bool(lines)


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    botocore(os.path.join(out, "botocore.jsonl"))
    print(os.path.join(out, "botocore.jsonl"))
    if crates(os.path.join(out, "crates.jsonl")):
        print(os.path.join(out, "crates.jsonl"))
