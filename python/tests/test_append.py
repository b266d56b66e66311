"""Appending: durability modes, reopening, several processes at once, a writer killed mid-append,
typed appends, and following a growing log."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import cobsfile

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.parametrize("durability", ["none", "flush", "fsync", "group:5ms"])
def test_append_and_reopen(tmp_path, durability):
    path = tmp_path / "log.cobs"
    with cobsfile.Appender(path, durability=durability) as log:
        assert log.opened["created"]
        seqs = [log.append(b"first %d" % i) for i in range(100)]
        log.wait_durable(seqs[-1]) if durability.startswith("group") else log.sync()
        assert log.durable >= seqs[-1]
    with cobsfile.Appender(path, durability=durability, compression="zstd") as log:
        assert not log.opened["created"] and log.opened["torn"] is None
        log.append_many(b"second %d" % i for i in range(100))
    got = list(cobsfile.open(path))
    assert got == [b"first %d" % i for i in range(100)] + [b"second %d" % i for i in range(100)]
    report = cobsfile.verify(path)
    assert report.clean and report.ending == "open"


def test_appender_mistakes(tmp_path):
    with pytest.raises(ValueError, match="durability"):
        cobsfile.Appender(tmp_path / "a", durability="sometimes")
    with pytest.raises(ValueError, match="durability"):
        cobsfile.Appender(tmp_path / "a", durability="group:0ms")
    log = cobsfile.Appender(tmp_path / "b")
    with pytest.raises(TypeError):
        log.append("text")
    log.close()
    with pytest.raises(ValueError, match="closed"):
        log.append(b"late")
    text = tmp_path / "notes.txt"
    text.write_bytes(b"not a cobsfile\n" * 10)
    with pytest.raises(cobsfile.Error):
        cobsfile.Appender(text)
    assert text.read_bytes() == b"not a cobsfile\n" * 10


WRITER = textwrap.dedent(
    """
    import sys, cobsfile
    path, name, n, durability = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    with cobsfile.Appender(path, durability=durability) as log:
        for i in range(n):
            log.append(b"%s %06d" % (name.encode(), i))
    """
)


def test_several_processes_append_to_one_log(tmp_path):
    path = tmp_path / "shared.cobs"
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"p{k}", "400", "flush"])
        for k in range(4)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    got = list(cobsfile.open(path))
    assert len(got) == 1600 and len(set(got)) == 1600
    for k in range(4):
        mine = [r for r in got if r.startswith(b"p%d " % k)]
        assert mine == [b"p%d %06d" % (k, i) for i in range(400)]  # each writer's order kept
    assert cobsfile.verify(path).clean


def test_killed_writer_then_reopen(tmp_path):
    path = tmp_path / "killed.cobs"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), "k", "100000000", "none"],
    )
    deadline = time.time() + 60
    while time.time() < deadline and (not path.exists() or path.stat().st_size < 300_000):
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = list(cobsfile.open(path))
    written = [b"k %06d" % i for i in range(len(before))]
    assert before == written  # a prefix, every record whole
    with cobsfile.Appender(path) as log:
        log.append(b"after the crash")
    after = list(cobsfile.open(path))
    assert after == before + [b"after the crash"]


def test_typed_append(tmp_path, events, events_schema):
    path = tmp_path / "typed.cobs"
    for half in (events[:50], events[50:100]):
        with cobsfile.Appender(path, schema=events_schema, durability="flush") as log:
            for e in half:
                log.append(e)
    assert list(cobsfile.open(path).records(decode=True)) == events[:100]
    with pytest.raises(ValueError, match="symbol"):
        cobsfile.Appender(path, schema=events_schema).append({**events[0], "level": "loud"})


def test_follow(tmp_path):
    path = tmp_path / "followed.cobs"
    cobsfile.Appender(path).close()
    expected = [b"event %d" % i for i in range(300)]

    def produce():
        with cobsfile.Appender(path, durability="flush") as log:
            for i, r in enumerate(expected):
                log.append(r)
                if i % 50 == 0:
                    time.sleep(0.02)

    t = threading.Thread(target=produce)
    t.start()
    got = []
    follower = cobsfile.follow(path, timeout=3.0)
    for record in follower:
        got.append(record)
        if len(got) == len(expected):
            break
    t.join()
    assert got == expected
    # Nothing more comes: iteration ends after the timeout.
    start = time.time()
    assert list(cobsfile.follow(path, from_end=True, timeout=0.3)) == []
    assert time.time() - start < 5


def test_follow_through_truncation(tmp_path):
    path = tmp_path / "rotated.cobs"
    with cobsfile.Appender(path, durability="flush") as log:
        log.append_many([b"old 1", b"old 2"])
    follower = cobsfile.follow(path, timeout=5.0)
    assert [next(follower), next(follower)] == [b"old 1", b"old 2"]
    os.truncate(path, 0)
    with cobsfile.Appender(path, durability="flush") as log:
        log.append(b"new 1")
    assert next(follower) == b"new 1"
    assert follower.truncations == 1


def test_follow_through_copytruncate(tmp_path):
    # logrotate's copytruncate: what was appended after the follower last looked is only in
    # the copy; it is read from there before the log starts again.
    path = tmp_path / "app.cobs"
    log = cobsfile.Appender(path, durability="flush")
    log.append_many([b"old 1", b"old 2"])
    follower = cobsfile.follow(path, timeout=5.0)
    assert [next(follower), next(follower)] == [b"old 1", b"old 2"]
    log.append_many([b"old 3", b"old 4"])
    shutil.copyfile(path, tmp_path / "app.cobs.1")
    os.truncate(path, 0)
    log.append(b"new 1")
    log.close()
    assert [next(follower) for _ in range(3)] == [b"old 3", b"old 4", b"new 1"]
    assert follower.truncations == 1


def test_gil_released_while_verifying(tmp_path):
    """While one thread verifies a file, the interpreter runs other threads: the library's
    work is done with the GIL released. The main thread must run in the middle of the call."""
    path = tmp_path / "big.cobs"
    with cobsfile.Writer(path, compression=("zstd", 1)) as w:
        w.write_many(b"%d some record text %d" % (i % 7, i) for i in range(300_000))
    span = []
    done = threading.Event()

    def work():
        t0 = time.perf_counter()
        report = cobsfile.verify(path)
        span.extend([t0, time.perf_counter(), report.records])
        done.set()

    t = threading.Thread(target=work)
    t.start()
    seen = []
    while not done.is_set():
        seen.append(time.perf_counter())
        time.sleep(0.0005)
    t.join()
    t0, t1, records = span
    assert records == 300_000
    quarter = (t1 - t0) / 4
    assert any(t0 + quarter < s < t1 - quarter for s in seen), (t1 - t0, len(seen))
