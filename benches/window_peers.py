#!/usr/bin/env python3
"""An hour of a month-long log, the way users get it today against `cobsfile cat --since`
(issue 34, item 5): the events of `benches/window.py` as NDJSON compressed with `zstd -3` and
filtered with `zstdcat | jq 'select(...)'`, and as a systemd journal file (written by
`systemd-journal-remote` from the journal export format, each event's time its
`__REALTIME_TIMESTAMP`) read with `journalctl --file --since --until`, beside the same events
packed with `cobsfile pack --time-field ts --zstd 3`. Peers that are not installed are left
out (journald's: `apt-get install systemd-journal-remote`; it rotates its output as journald rotates
its files, and `journalctl -D` reads them all).

    COBSFILE_WINDOW_MB=1000 python3 benches/window_peers.py [path/to/cobsfile]

Times are the best of COBSFILE_WINDOW_RUNS runs (default 3), output counted, files in the
page cache; the window is the same hour in the middle of the month.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import window  # noqa: E402  (the events, the binary, the runs)

JOURNAL_REMOTE = next(
    (p for p in ["/lib/systemd/systemd-journal-remote", "/usr/lib/systemd/systemd-journal-remote"]
     if os.path.exists(p)),
    None,
)


def timed(shell):
    """Best wall time of `shell` over the runs, and the lines it printed."""
    best, lines = None, None
    for _ in range(window.RUNS):
        t = time.perf_counter()
        out = subprocess.run(shell, shell=True, capture_output=True, check=True).stdout
        took = time.perf_counter() - t
        best = took if best is None else min(best, took)
        lines = int(out.strip() or 0)
    return best, lines


def journal(src, path):
    """Writes the events of `src` into a journal file at `path`."""
    import json

    feed = subprocess.Popen(
        [JOURNAL_REMOTE, "-o", path, "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with open(src) as lines:
        batch = []
        for line in lines:
            ts = json.loads(line)["ts"]
            batch.append(
                "__REALTIME_TIMESTAMP=%d\nMESSAGE=%s\n\n" % (int(ts * 1_000_000), line.rstrip("\n"))
            )
            if len(batch) == 10_000:
                feed.stdin.write("".join(batch).encode())
                batch = []
        feed.stdin.write("".join(batch).encode())
    feed.stdin.close()
    if feed.wait() != 0:
        raise SystemExit("systemd-journal-remote failed")


def main():
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        src = os.path.join(tmp, "events.jsonl")
        n = window.events(src)
        since = window.START + 15 * 86_400 + 12 * 3_600
        until = since + 3_600
        print(f"{n:,} events over {window.DAYS} days, {os.path.getsize(src) / 1e6:.0f} MB of JSON lines")
        print(f"window: one hour, @{since}..@{until}; best of {window.RUNS}")
        print()
        print("| what | file | 1 h window | events |")
        print("|---|---|---|---|")
        cobs = os.path.join(tmp, "events.cobs")
        subprocess.run(
            [window.BIN, "pack", "--time-field", "ts", "--zstd", "3", "-f", "-o", cobs, src],
            check=True,
        )
        took, lines = timed(f"{window.BIN} cat --since @{since} --until @{until} {cobs} | wc -l")
        print(f"| `cobsfile cat --since --until` (zstd 3) | {os.path.getsize(cobs) / 1e6:.0f} MB "
              f"| {took * 1000:.1f} ms | {lines:,} |")
        if shutil.which("zstd") and shutil.which("jq"):
            zst = src + ".zst"
            subprocess.run(["zstd", "-q", "-3", "-f", src, "-o", zst], check=True)
            took, lines = timed(
                f"zstdcat {zst} | jq -c 'select(.ts >= {since} and .ts < {until})' | wc -l"
            )
            print(f"| `zstdcat \\| jq 'select(...)'` | {os.path.getsize(zst) / 1e6:.0f} MB "
                  f"| {took * 1000:.1f} ms | {lines:,} |")
        if JOURNAL_REMOTE and shutil.which("journalctl"):
            # systemd-journal-remote rotates its output as journald does: a directory of files.
            jdir = os.path.join(tmp, "journal")
            os.mkdir(jdir)
            journal(src, os.path.join(jdir, "events.journal"))
            size = sum(os.path.getsize(os.path.join(jdir, f)) for f in os.listdir(jdir))
            took, lines = timed(
                f"journalctl -D {jdir} --since @{since} --until @{until} -o cat | wc -l"
            )
            print(f"| `journalctl -D --since --until` ({len(os.listdir(jdir))} files) "
                  f"| {size / 1e6:.0f} MB | {took * 1000:.1f} ms | {lines:,} |")


if __name__ == "__main__":
    main()
