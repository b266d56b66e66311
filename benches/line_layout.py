#!/usr/bin/env python3
"""What a data block's record layout costs zstd on line-oriented logs (issue 36, item 5).

For each file given (one record a line), prints the bytes zstd makes of it whole, what
`cobsfile pack --zstd LEVEL` writes, and what zstd makes of the same records cut into blocks
as the writer cuts them (`--block-target`, 2 MiB as `pack --zstd` cuts them by default;
`BLOCK` sets another) in four layouts:

- interleaved: the data block payload of spec 8.3, a count, then each record's varint length
  and bytes (what a file holds today);
- lengths first / lengths last: the count and all lengths apart from the records' bytes;
- lines: each record followed by a newline, as in the file itself (possible when no record
  holds a newline).

The blocks' framing (COBS, CRC, sync bytes), header, index and end blocks are left out of
the layouts' sizes, so "cobsfile pack" against "interleaved" shows their cost. Needs the
`zstandard` module and, for the pack column, a built `cobsfile` binary (`COBSFILE_BIN`, else
target/release/cobsfile, else target/debug/cobsfile).

    python3 benches/line_layout.py /var/log/dpkg.log samples/events.jsonl
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tempfile

import zstandard

LEVEL = int(os.environ.get("LEVEL", "3"))
BLOCK = int(os.environ.get("BLOCK", str(2 * 1024 * 1024)))
ROOT = pathlib.Path(__file__).resolve().parents[1]


def varint(n: int) -> bytes:
    """A non-negative varint as spec 3 writes it (zig-zag, then LEB128)."""
    z = n << 1
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def blocks(records: list[bytes]) -> list[list[bytes]]:
    """The records cut as a writer cuts them: a block closes once its payload reaches BLOCK."""
    out, current, size = [], [], 0
    for r in records:
        current.append(r)
        size += len(varint(len(r))) + len(r)
        if size >= BLOCK:
            out.append(current)
            current, size = [], 0
    if current:
        out.append(current)
    return out


LAYOUTS = {
    "interleaved": lambda b: varint(len(b)) + b"".join(varint(len(r)) + r for r in b),
    "lengths first": lambda b: varint(len(b)) + b"".join(varint(len(r)) for r in b) + b"".join(b),
    "lengths last": lambda b: b"".join(b) + b"".join(varint(len(r)) for r in b) + varint(len(b)),
    "lines": lambda b: b"".join(r + b"\n" for r in b),
}


def cobsfile_bin() -> str | None:
    if os.environ.get("COBSFILE_BIN"):
        return os.environ["COBSFILE_BIN"]
    for profile in ("release", "debug"):
        path = ROOT / "target" / profile / "cobsfile"
        if path.exists():
            return str(path)
    return None


def packed(path: str) -> int | None:
    binary = cobsfile_bin()
    if binary is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "f.cobs")
        subprocess.run(
            [binary, "pack", path, "-o", out, "--zstd", str(LEVEL), "--block-target", str(BLOCK)],
            check=True,
        )
        return os.path.getsize(out)


def main() -> None:
    compress = zstandard.ZstdCompressor(level=LEVEL).compress
    print(f"zstd level {LEVEL}, blocks of {BLOCK} bytes; sizes in bytes (x: / zstd of the file whole)\n")
    print("| file | lines | bytes | zstd whole | cobsfile pack | " + " | ".join(LAYOUTS) + " |")
    print("|---|---:|---:|---:|---:|" + "---:|" * len(LAYOUTS))
    for path in sys.argv[1:]:
        data = pathlib.Path(path).read_bytes()
        records = data.split(b"\n")
        if records and records[-1] == b"":
            records.pop()
        whole = len(compress(data))
        cells = [f"{whole:,}"]
        pack = packed(path)
        cells.append("-" if pack is None else f"{pack:,} ({pack / whole:.3f}x)")
        cut = blocks(records)
        for layout in LAYOUTS.values():
            size = sum(len(compress(layout(b))) for b in cut)
            cells.append(f"{size:,} ({size / whole:.3f}x)")
        name = os.path.basename(path)
        print(f"| `{name}` | {len(records):,} | {len(data):,} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
