#!/usr/bin/env python3
"""Source coverage the kept corpus reaches in the library (src/), per file and per target.

For each target, `cargo fuzz coverage` builds it with LLVM source-based coverage and runs
every input of fuzz/corpus/<target> and fuzz/regressions/<target> once (no fuzzing). The
profiles are merged, and `llvm-cov` reports lines, regions and functions of src/ reached
by all targets together, then each target's own totals (of the whole library: a coverage
build keeps every function of it). The command-line tool (cli/src/) is not part of the
library and does not appear; its tests are cli/tests/cli.rs.

Needs llvm-cov and llvm-profdata of the toolchain's LLVM: `rustup component add llvm-tools`.

usage (from fuzz/):
    python3 coverage.py [TARGET ...]            run, then print the tables (markdown)
    python3 coverage.py --report [TARGET ...]   print the tables from the last run
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "src") + os.sep


def host():
    out = subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True).stdout
    return next(l.split()[1] for l in out.splitlines() if l.startswith("host:"))


HOST = host()
SYSROOT = subprocess.run(
    ["rustc", "--print", "sysroot"], capture_output=True, text=True, check=True
).stdout.strip()
TOOLS = os.path.join(SYSROOT, "lib", "rustlib", HOST, "bin")
BIN = os.path.join(HERE, "target", HOST, "coverage", HOST, "release")


def targets():
    names = sorted(os.listdir(os.path.join(HERE, "fuzz_targets")))
    return [n[:-3] for n in names if n.endswith(".rs")]


def run(target):
    dirs = [d for d in (f"corpus/{target}", f"regressions/{target}") if os.path.isdir(d)]
    env = dict(os.environ, RUSTC_BOOTSTRAP="1")
    done = subprocess.run(
        ["cargo", "fuzz", "coverage", target, *dirs],
        cwd=HERE,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"{target}: cargo fuzz coverage failed:\n{done.stdout[-3000:]}")


def profile(target):
    return os.path.join(HERE, "coverage", target, "coverage.profdata")


def summary(binaries, profdata):
    """{src file: {'lines': (covered, count), 'regions': ..., 'functions': ...}}"""
    objects = [binaries[0]] + [a for b in binaries[1:] for a in ("-object", b)]
    out = subprocess.run(
        [os.path.join(TOOLS, "llvm-cov"), "export", "-summary-only", *objects,
         f"-instr-profile={profdata}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    files = {}
    for f in json.loads(out)["data"][0]["files"]:
        name = os.path.normpath(f["filename"])
        if not name.startswith(SRC):
            continue
        s = f["summary"]
        files[name[len(SRC):]] = {
            k: (s[k]["covered"], s[k]["count"]) for k in ("lines", "regions", "functions")
        }
    return files


def cell(pair):
    covered, count = pair
    return f"{covered} / {count} ({100.0 * covered / count:.1f} %)" if count else "-"


def total(files, key):
    return (sum(f[key][0] for f in files.values()), sum(f[key][1] for f in files.values()))


def main(argv):
    report_only = argv[:1] == ["--report"]
    names = (argv[1:] if report_only else argv) or targets()
    os.chdir(HERE)
    if not report_only:
        for t in names:
            run(t)
    merged = os.path.join(HERE, "coverage", "all.profdata")
    subprocess.run(
        [os.path.join(TOOLS, "llvm-profdata"), "merge", "-sparse",
         *[profile(t) for t in names], "-o", merged],
        check=True,
    )
    binaries = [os.path.join(BIN, t) for t in names]
    files = summary(binaries, merged)

    print("| source file | lines | regions | functions |")
    print("|---|---:|---:|---:|")
    for name in sorted(files):
        f = files[name]
        print(f"| `src/{name}` | {cell(f['lines'])} | {cell(f['regions'])} | {cell(f['functions'])} |")
    print(f"| all targets together | {cell(total(files, 'lines'))} | "
          f"{cell(total(files, 'regions'))} | {cell(total(files, 'functions'))} |")
    print()
    print("| target | lines of src/ reached | regions reached |")
    print("|---|---:|---:|")
    for t, b in zip(names, binaries):
        own = summary([b], profile(t))
        print(f"| `{t}` | {total(own, 'lines')[0]} | {total(own, 'regions')[0]} |")


if __name__ == "__main__":
    main(sys.argv[1:])
