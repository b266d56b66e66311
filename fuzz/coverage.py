#!/usr/bin/env python3
"""Coverage the kept corpus reaches in the library's own source, per target and in all.

Runs each fuzz target once over its corpus and regressions (`-runs=0 -print_coverage=1`, no
fuzzing) and reads libFuzzer's COVERED_FUNC / UNCOVERED_FUNC lines: for every function the
target's binary holds, how many of its instrumented edges some input took. Only functions
defined under src/ count. A function inlined into its caller has no line of its own; its
edges count as the caller's.

usage (from fuzz/, after `RUSTC_BOOTSTRAP=1 cargo fuzz build`):
    python3 coverage.py [TARGET ...]          a table per source file, then per target
    python3 coverage.py --uncovered FILE.rs   the functions of src/FILE.rs no input enters
"""

import os
import re
import subprocess
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "src") + os.sep
BIN = os.path.join(HERE, "target", "x86_64-unknown-linux-gnu", "release")
LINE = re.compile(r"^(COVERED|UNCOVERED)_FUNC: hits: (\d+) edges: (\d+)/(\d+) (.*) (\S+):(\d+)$")


def targets():
    names = sorted(os.listdir(os.path.join(HERE, "fuzz_targets")))
    return [n[:-3] for n in names if n.endswith(".rs")]


def functions(target):
    """{(source file, line, name): (covered edges, edges)} for src/ functions in the binary."""
    dirs = [os.path.join(HERE, d, target) for d in ("corpus", "regressions")]
    dirs = [d for d in dirs if os.path.isdir(d)]
    out = subprocess.run(
        [os.path.join(BIN, target), *dirs, "-runs=0", "-print_coverage=1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        check=False,
    ).stdout
    found = {}
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        _, _, covered, total, name, path, lineno = m.groups()
        path = os.path.normpath(path)
        if not path.startswith(SRC):
            continue
        key = (path[len(SRC):], int(lineno), name)
        c, t = found.get(key, (0, 0))
        found[key] = (max(c, int(covered)), max(t, int(total)))
    if not found:
        sys.exit(f"{target}: no coverage lines (is the binary built? exit output:\n{out[-2000:]})")
    return found


def tally(funcs):
    """{file: [covered edges, edges, functions entered, functions]}"""
    per = defaultdict(lambda: [0, 0, 0, 0])
    for (path, _, _), (c, t) in funcs.items():
        p = per[path]
        p[0] += c
        p[1] += t
        p[2] += c > 0
        p[3] += 1
    return per


def pct(a, b):
    return f"{100.0 * a / b:.1f} %" if b else "-"


def main(argv):
    uncovered = None
    if argv[:1] == ["--uncovered"]:
        uncovered, argv = argv[1], argv[2:]
    names = argv or targets()
    union = {}
    rows = []
    for t in names:
        funcs = functions(t)
        for k, (c, tot) in funcs.items():
            uc, ut = union.get(k, (0, 0))
            union[k] = (max(uc, c), max(ut, tot))
        c = sum(v[0] for v in funcs.values())
        tot = sum(v[1] for v in funcs.values())
        entered = sum(v[0] > 0 for v in funcs.values())
        rows.append((t, c, tot, entered, len(funcs)))

    if uncovered:
        for (path, line, name), (c, _) in sorted(union.items()):
            if path == uncovered and c == 0:
                print(f"{path}:{line} {name}")
        return

    print("| source file | edges covered | functions entered |")
    print("|---|---:|---:|")
    per = tally(union)
    for path in sorted(per):
        c, t, e, n = per[path]
        print(f"| `src/{path}` | {c} / {t} ({pct(c, t)}) | {e} / {n} |")
    c = sum(v[0] for v in per.values())
    t = sum(v[1] for v in per.values())
    e = sum(v[2] for v in per.values())
    n = sum(v[3] for v in per.values())
    print(f"| all targets together | {c} / {t} ({pct(c, t)}) | {e} / {n} |")
    print()
    print("| target | edges covered in src/ | functions entered |")
    print("|---|---:|---:|")
    for t, c, tot, entered, n in rows:
        print(f"| `{t}` | {c} / {tot} ({pct(c, tot)}) | {entered} / {n} |")


if __name__ == "__main__":
    main(sys.argv[1:])
