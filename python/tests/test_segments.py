"""Log directories (spec 11.4): an appender rolls segments and removes old ones, and
`cobsfile.open(dir)` reads the directory as one log, as the command line does."""

from __future__ import annotations

import json
import subprocess

import pyarrow
import pytest

import cobsfile


def _events(n, start=0):
    return [json.dumps({"n": i, "msg": "event %d" % i}).encode() for i in range(start, start + n)]


def test_an_appender_rolls_segments_and_open_reads_them_as_one_log(tmp_path, cli):
    log = tmp_path / "log"
    events = _events(3000)
    with cobsfile.Appender(log, durability="flush", segment_size=16 * 1024) as a:
        for i, e in enumerate(events):
            a.append(e, time=i * 1_000_000_000)
    paths = cobsfile.segments(log)
    assert len(paths) > 4
    assert [p.name for p in paths] == ["%020d.cobs" % (i + 1) for i in range(len(paths))]
    with cobsfile.open(log) as r:
        assert isinstance(r, cobsfile.LogReader)
        assert list(r) == events
        assert r.damage == []
        reports = r.verify()
        assert [p for p, _ in reports] == [str(p) for p in paths]
        assert all(rep.clean for _, rep in reports)
        assert [rep.ending for _, rep in reports] == ["finished"] * (len(paths) - 1) + ["open"]
    # A time window, read by each finished segment's time index.
    with cobsfile.open(log, since=1000 * 1_000_000_000, until=1009 * 1_000_000_000) as r:
        assert list(r) == events[1000:1010]
    # Tables, and the command line, agree.
    table = cobsfile.read_table(log)
    assert table.num_rows == 3000 and table.column("n").to_pylist() == list(range(3000))
    out = subprocess.run([cli, "cat", str(log)], capture_output=True, check=True).stdout
    assert out.splitlines() == events
    # Reopened, the log goes on in its newest segment (it is a log directory already).
    with cobsfile.Appender(log, durability="flush") as a:
        a.append(b"after")
    assert list(cobsfile.open(log))[-1] == b"after"
    assert cobsfile.segments(log) == paths


def test_retention_keeps_the_newest_segments(tmp_path):
    log = tmp_path / "log"
    events = _events(4000)
    with cobsfile.Appender(log, durability="flush", segment_size=8192, retain_count=3) as a:
        a.append_many(events)
    assert len(cobsfile.segments(log)) == 3
    got = list(cobsfile.open(log))
    assert 100 < len(got) < len(events) and events[-len(got):] == got


def test_segment_mistakes_are_clear(tmp_path):
    file = tmp_path / "file.cobs"
    file.write_bytes(b"")
    with pytest.raises(ValueError, match="not a log directory"):
        cobsfile.Appender(file, retain_count=2)
    for bad in [dict(segment_size=0), dict(segment_age=0), dict(retain_age=-1), dict(retain_count=0)]:
        with pytest.raises(ValueError):
            cobsfile.Appender(tmp_path / "log", **bad)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("x")
    with pytest.raises(IsADirectoryError, match="not a log directory"):
        cobsfile.open(other)
    assert cobsfile.segments(other) == []


def test_follow_reads_a_directory_across_rolls(tmp_path):
    import threading

    log = tmp_path / "log"
    with cobsfile.Appender(log, durability="flush", segment_size=2048) as a:
        a.append(b"first")
    events = _events(1500)

    def write():
        with cobsfile.Appender(log, durability="flush", segment_size=2048) as a:
            for e in events:
                a.append(e)

    follower = cobsfile.follow(log, timeout=10)
    writer = threading.Thread(target=write)
    writer.start()
    got = []
    for record in follower:
        got.append(record)
        if len(got) == 1 + len(events):
            break
    writer.join()
    assert got == [b"first"] + events
    assert len(cobsfile.segments(log)) > 10
