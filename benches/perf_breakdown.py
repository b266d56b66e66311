#!/usr/bin/env python3
"""Function-level time breakdown of one benchmark from a `perf record --call-graph dwarf` run.

    perf record -e cpu-clock --call-graph dwarf,16384 -F 999 -o write.data -- \\
        target/release/deps/throughput-<hash> --bench --profile-time 10 '^write/cobsfile/zero-rich$'
    perf script -i write.data | python3 benches/perf_breakdown.py write_cobsfile_default

Only samples whose stack holds a frame matching ROOT (a regex, e.g. the bench helper
`write_cobsfile_default` or `read_cobsfile_slice`) count, so corpus generation and setup are
left out. Each sample goes to the rule matching the frame nearest its leaf (inlined frames
count, so copies are charged to the function that asked for them); `+ memcpy` and `+ memchr`
mark samples spent inside libc's memcpy/memmove/memset or the memchr crate on its behalf.
"""

import re
import sys
from collections import Counter

# (label, regex on the frame's symbol), tried on each frame from the leaf up.
RULES = [
    ("cobs::Encoder (COBS encode)", r"cobsfile::cobs::Encoder"),
    ("cobs::decode (COBS decode)", r"cobsfile::cobs::decode"),
    ("crc32fast (CRC-32)", r"crc32fast::"),
    ("block::put_bytes: length varint (varint::write)", r"cobsfile::varint::write"),
    ("block::put_bytes: record into block buffer", r"cobsfile::block::put_bytes"),
    ("Writer::write_out (block into the output Vec)", r"cobsfile::writer::Writer<W>::write_out"),
    ("block::encode (other)", r"cobsfile::block::encode"),
    ("Writer::write_record (own code)", r"cobsfile::writer::Writer<W>::write_record"),
    ("frame::scan (sync-byte search, header)", r"cobsfile::frame::"),
    ("block::check_strings (record bounds check)", r"cobsfile::block::check_strings"),
    ("block::decode (other)", r"cobsfile::block::decode"),
    ("source refill (stream reader)", r"cobsfile::source::"),
    ("Reader::next_record / next_string (record iteration)",
     r"cobsfile::block::next_string|cobsfile::reader::Reader<S>::next_in_cursor|"
     r"cobsfile::reader::Reader<S>::next_record"),
    ("Reader (other)", r"cobsfile::reader::"),
]
# Other frames of `cobsfile::varint` match no rule: varint reads are charged to their caller.

# Leaf helpers charged to the rule of their caller, with a suffix.
HELPERS = [(" + memcpy", re.compile(r"__(memmove|memcpy|memset)\w*")), (" + memchr", re.compile(r"memchr::"))]
FRAME = re.compile(r"^\s*[0-9a-f]+\s+(.*?)(\+0x[0-9a-f]+)?\s+\((.*)\)\s*$")


def samples(lines):
    stack = []
    for line in lines:
        if not line.strip():
            if stack:
                yield stack
            stack = []
        elif line[0].isspace():
            m = FRAME.match(line)
            if m:
                stack.append(m.group(1))
    if stack:
        yield stack


def main():
    root = re.compile(sys.argv[1] if len(sys.argv) > 1 else ".")
    rules = [(label, re.compile(rx)) for label, rx in RULES]
    counts = Counter()
    total = 0
    for stack in samples(sys.stdin):
        if not any(root.search(f) for f in stack):
            continue
        total += 1
        label, suffix = "other (in the bench loop)", ""
        for frame in stack:
            helper = next((sfx for sfx, rx in HELPERS if rx.search(frame)), None)
            if helper:
                suffix = suffix or helper
                continue
            hit = next((lbl for lbl, rx in rules if rx.search(frame)), None)
            if hit:
                label = hit
                break
        label += suffix
        counts[label] += 1
    if not total:
        sys.exit("no samples under the root frame")
    print(f"{total} samples under /{root.pattern}/\n")
    print("| share | where |")
    print("|---:|---|")
    for label, n in counts.most_common():
        print(f"| {100 * n / total:5.1f}% | {label} |")


if __name__ == "__main__":
    main()
