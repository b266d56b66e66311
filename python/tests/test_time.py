"""Event times: written with `time=`, read back with `records(times=True)`, and read by time
window with `open(since=, until=)` on every path (iteration, threads, to_arrow), exactly the
records whose times lie in the window."""

from __future__ import annotations

import datetime

import pytest

import cobsfile

UTC = datetime.timezone.utc
START = 1_764_547_200 * 10**9  # 2025-12-01T00:00:00Z


def events(n=5000):
    # A second apart, a little out of order; every 97th without a time.
    for i in range(n):
        t = None if i % 97 == 3 else START + (i + (i * 7919) % 5 - 2) * 10**9
        yield b'{"n": %d}' % i, t


def write(path, compression=None, block_size=4096):
    with cobsfile.Writer(path, compression=compression, block_size=block_size) as w:
        for record, t in events():
            w.write(record, time=t)


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_times_round_trip(tmp_path, compression):
    path = tmp_path / "t.cobs"
    write(path, compression)
    with cobsfile.open(path) as r:
        got = list(r.records(times=True))
    assert got == [(t, record) for record, t in events()]


@pytest.mark.parametrize("threads", [1, 2])
def test_a_window_reads_exactly_its_records(tmp_path, threads):
    path = tmp_path / "t.cobs"
    write(path, "zstd")
    since, until = START + 1000 * 10**9, START + 1600 * 10**9
    want = [record for record, t in events() if t is not None and since <= t <= until]
    assert len(want) > 500
    forms = [
        (since, until),
        (
            datetime.datetime.fromtimestamp(since // 10**9, UTC),
            datetime.datetime.fromtimestamp(until // 10**9, UTC),
        ),
        ("2025-12-01T00:16:40Z", "2025-12-01T01:26:40+01:00"),
    ]
    for s, u in forms:
        with cobsfile.open(path, since=s, until=u, threads=threads) as r:
            assert list(r) == want
        with cobsfile.open(path, since=s, until=u, threads=threads) as r:
            table = r.to_arrow(records="json")
            assert [f'{{"n": {n}}}'.encode() for n in table.column("n").to_pylist()] == want
    with cobsfile.open(path, until=START - 10 * 10**9) as r:
        assert list(r) == []


def test_arrow_tables_have_a_time_column(tmp_path):
    pa = pytest.importorskip("pyarrow")
    path = tmp_path / "t.cobs"
    write(path)
    with cobsfile.open(path) as r:
        table = r.to_arrow(records="json")
    # The times as `cobsfile sql` shows them: a timestamp column, null where a record has none.
    assert table.schema.field("time").type == pa.timestamp("ns", tz="UTC")
    assert table.column("time").cast(pa.int64()).to_pylist() == [t for _, t in events()]
    assert table.column_names == ["n", "time"]


def test_appended_times(tmp_path):
    path = tmp_path / "log.cobs"
    with cobsfile.Appender(path, durability="flush") as log:
        log.append(b"a", time=datetime.datetime(2025, 12, 1, tzinfo=UTC))
        log.append(b"b")
        log.append(b"c", time=5)
    with cobsfile.open(path) as r:
        assert list(r.records(times=True)) == [(START, b"a"), (None, b"b"), (5, b"c")]


def test_time_mistakes(tmp_path):
    path = tmp_path / "t.cobs"
    with cobsfile.Writer(path) as w:
        with pytest.raises(ValueError, match="time zone"):
            w.write(b"x", time=datetime.datetime(2025, 12, 1))
        with pytest.raises(TypeError, match="nanoseconds"):
            w.write(b"x", time=1.5)
        with pytest.raises(ValueError, match="1677"):
            w.write(b"x", time=2**63)
        w.write(b"x", time=1)
    with pytest.raises(ValueError, match="RFC 3339"):
        cobsfile.open(path, since="yesterday")
    with pytest.raises(ValueError, match="time zone"):
        cobsfile.open(path, since="2025-12-01T00:00:00")
    with cobsfile.open(path) as r, pytest.raises(ValueError, match="raw"):
        r.records("json", times=True)


def test_follow_a_window(tmp_path):
    path = tmp_path / "log.cobs"
    with cobsfile.Appender(path, durability="flush") as log:
        for t in (10, 20, 30, 5):
            log.append(b"t%d" % t, time=t)
        log.append(b"untimed")
    got = list(cobsfile.follow(path, timeout=0.2, since=15, until=30))
    assert got == [b"t20", b"t30"]
