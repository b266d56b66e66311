"""Damage: flipped bytes, cuts and zero runs cost the blocks they touch and nothing else, are
reported with their byte offsets, and never yield a corrupted record. The Rust command line
reads the same damaged files as an independent path: both must agree record for record."""

from __future__ import annotations

import io
import json
import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import cobsfile
from conftest import flip, is_subsequence, records, run


def written_file(recs, compression=None, block_size=200) -> bytes:
    out = io.BytesIO()
    with cobsfile.Writer(out, compression=compression, block_size=block_size) as w:
        w.write_many(recs)
    return out.getvalue()


def cli_records(cli, path) -> list[bytes]:
    out = run(cli, "cat", "--framing", "len32", str(path), check=False).stdout
    got, at = [], 0
    while at < len(out):
        (n,) = struct.unpack_from("<I", out, at)
        got.append(out[at + 4 : at + 4 + n])
        at += 4 + n
    return got


@st.composite
def damaged(draw):
    recs = draw(st.lists(st.binary(min_size=0, max_size=120), min_size=1, max_size=150))
    compression = draw(st.sampled_from([None, "zstd"]))
    block_size = draw(st.integers(min_value=1, max_value=2000))
    data = bytearray(written_file(recs, compression, block_size))
    kind = draw(st.sampled_from(["flip", "cut", "zeros", "flips"]))
    if kind == "flip":
        at = draw(st.integers(0, len(data) - 1))
        data[at] ^= draw(st.integers(1, 255))
    elif kind == "flips":
        for _ in range(draw(st.integers(2, 8))):
            at = draw(st.integers(0, len(data) - 1))
            data[at] ^= draw(st.integers(1, 255))
    elif kind == "cut":
        data = data[: draw(st.integers(0, len(data)))]
    else:
        at = draw(st.integers(0, len(data) - 1))
        n = draw(st.integers(1, 300))
        data[at : at + n] = bytes(len(data[at : at + n]))
    return recs, bytes(data)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damaged())
def test_damage_never_returns_a_corrupted_record(cli, tmp_path, case):
    written, data = case
    path = tmp_path / "damaged.cobs"
    path.write_bytes(data)
    try:
        reader = cobsfile.open(path)
    except cobsfile.NotACobsfileError:
        # Nothing intact at all: the command line finds no record either.
        assert cli_records(cli, path) == []
        return
    got = list(reader)
    # Every record returned was written, in the order written.
    assert is_subsequence(got, written)
    # The Rust command line, reading the same bytes, returns exactly the same records.
    assert got == cli_records(cli, path)
    # Decoding on worker threads gives the same records and the same damage.
    threaded = cobsfile.open(path, threads=2)
    assert list(threaded) == got
    assert [(d.start, d.end) for d in threaded.damage] == [(d.start, d.end) for d in reader.damage]
    # A full verification reports the damage the reader skipped, at the same offsets.
    report = cobsfile.verify(path)
    assert [(d.start, d.end) for d in report.damaged] == [(d.start, d.end) for d in reader.damage]
    assert report.records == len(got)
    for d in reader.damage:
        assert 0 <= d.start <= d.end <= len(data) and d.cause
    # Arrow's raw rows are the same records.
    pytest.importorskip("pyarrow")
    table = cobsfile.open(path).to_arrow(records="raw")
    assert table.column("record").to_pylist() == got


def test_one_flip_loses_one_block(tmp_path):
    written = records(1000)
    data = written_file(written, block_size=500)
    blocks = [b for b in cobsfile.open(data).blocks() if b.type == "data"]
    victim = blocks[len(blocks) // 2]
    damaged = flip(data, victim.offset + victim.size // 2)
    r = cobsfile.open(damaged)
    got = list(r)
    assert len(got) == len(written) - victim.records
    assert len(r.damage) == 1
    d = r.damage[0]
    assert d.start <= victim.offset + victim.size // 2 < d.end
    assert d.kind == "damaged" and d.size == d.end - d.start


def test_on_damage_raise_and_callable(tmp_path):
    written = records(300)
    data = written_file(written, block_size=100)
    middle = [b for b in cobsfile.open(data).blocks() if b.type == "data"][3]
    damaged = flip(data, middle.offset + 5)

    r = cobsfile.open(damaged, on_damage="raise")
    with pytest.raises(cobsfile.DamagedError) as e:
        list(r)
    err = e.value
    assert isinstance(err, cobsfile.Error)
    assert err.offset == err.start and err.start <= middle.offset + 5 < err.end
    assert "damaged" in str(err) and err.cause
    # Reading can go on after the exception.
    rest = list(r)
    assert rest and is_subsequence(rest, written)

    seen = []
    got = list(cobsfile.open(damaged, on_damage=seen.append))
    assert len(seen) == 1 and isinstance(seen[0], cobsfile.Damage)
    assert len(got) == len(written) - middle.records

    def stop(damage):
        raise KeyError("stop here")

    with pytest.raises(KeyError):
        list(cobsfile.open(damaged, on_damage=stop))


def test_blocks_show_damage(tmp_path):
    data = written_file(records(300), block_size=100)
    third = [b for b in cobsfile.open(data).blocks() if b.type == "data"][2]
    blocks = cobsfile.open(flip(data, third.offset + 3)).blocks()
    bad = [b for b in blocks if b.status != "intact"]
    assert len(bad) == 1 and bad[0].type is None and bad[0].cause


def test_truncated_file(tmp_path):
    written = records(500)
    data = written_file(written, block_size=300)
    cut = data[: len(data) * 2 // 3]
    got = list(cobsfile.open(cut))
    assert got == written[: len(got)] and 0 < len(got) < len(written)
    assert cobsfile.verify(cut).ending == "unfinished"


def test_recover(tmp_path):
    written = records(600)
    data = written_file(written, compression="zstd", block_size=300)
    src = tmp_path / "damaged.cobs"
    src.write_bytes(flip(data, len(data) // 2))
    dst = tmp_path / "recovered.cobs"
    recovery = cobsfile.recover(src, dst)
    assert not recovery.lossless and len(recovery.report.damaged) == 1
    assert recovery.written == dst.stat().st_size
    assert cobsfile.verify(dst).clean
    assert list(cobsfile.open(dst)) == list(cobsfile.open(src))
    # A recovery never replaces a file by mistake, least of all its source.
    with pytest.raises(FileExistsError):
        cobsfile.recover(src, dst)
    with pytest.raises(ValueError, match="source"):
        cobsfile.recover(src, src, overwrite=True)
    assert cobsfile.recover(src, dst, overwrite=True).report.records == recovery.report.records
    assert [p.name for p in tmp_path.iterdir() if "partial" in p.name] == []


def test_file_truncated_under_a_mapped_reader(tmp_path):
    """A path is mapped: when another program cuts the file while it is read, the lost pages
    read as damage (the library's SIGBUS handling), not a crash, and no record is corrupted."""
    written = records(20000, seed=7)
    path = tmp_path / "shrinking.cobs"
    with cobsfile.Writer(path, block_size=4096) as w:
        w.write_many(written)
    reader = cobsfile.open(path)
    first = next(reader)
    size = path.stat().st_size
    os.truncate(path, size // 3)
    rest = list(reader)
    got = [first] + rest
    assert is_subsequence(got, written)
    assert len(got) < len(written)
    assert reader.damage or got == written[: len(got)]


@pytest.mark.parametrize("threads", [2, 3])
def test_to_arrow_in_ranges_equals_one_read(tmp_path, threads):
    """A file of several MiB read in byte ranges at once (to_arrow's threads) gives the rows
    of one sequential read, in file order, damaged or not."""
    pytest.importorskip("pyarrow")
    written = records(120000, seed=3)
    data = bytearray(written_file(written, block_size=3000))
    assert len(data) > 3 << 20  # three ranges of 1 MiB or more
    path = tmp_path / "big.cobs"
    path.write_bytes(bytes(data))
    for at in (len(data) // 5, len(data) // 2, len(data) * 4 // 5):
        data[at] ^= 0x21
    damaged = tmp_path / "damaged.cobs"
    damaged.write_bytes(bytes(data))
    for p in (path, damaged):
        one = list(cobsfile.open(p))
        table = cobsfile.read_table(p, records="raw", threads=threads)
        assert table.column("record").to_pylist() == one
    assert len(one) < len(written)


def read_raising(reader):
    """Every record of `reader` (opened with on_damage="raise"), and for each DamagedError,
    how many records came before it and the range it names."""
    got, raised = [], []
    while True:
        try:
            for record in reader:
                got.append(record)
            return got, raised
        except cobsfile.DamagedError as e:
            raised.append((len(got), e.start, e.end, e.cause))


@pytest.mark.parametrize("threads", [2, 3])
def test_iteration_on_threads_equals_one_read(tmp_path, threads):
    """Iterating a file of several MiB with blocks decoded on several threads gives the
    records of one sequential read, in file order, with the same damage at the same place
    among them: skipped and listed, raised between the same two records (a zero run across
    1 MiB, where a range read would cut, included), or handed to a callable."""
    written = records(120000, seed=5)
    data = bytearray(written_file(written, compression="zstd", block_size=3000))
    assert len(data) > 3 << 20  # three ranges of 1 MiB or more
    for at in (len(data) // 5, len(data) // 2, len(data) * 4 // 5):
        data[at] ^= 0x21
    data[(1 << 20) - 300 : (1 << 20) + 300] = bytes(600)
    path = tmp_path / "damaged.cobs"
    path.write_bytes(bytes(data))
    one = cobsfile.open(path)
    got = list(one)
    assert len(one.damage) == 4 and is_subsequence(got, written)
    many = cobsfile.open(path, threads=threads)
    assert list(many) == got
    assert [d.to_dict() for d in many.damage] == [d.to_dict() for d in one.damage]
    raised = read_raising(cobsfile.open(path, on_damage="raise"))
    assert read_raising(cobsfile.open(path, on_damage="raise", threads=threads)) == raised
    assert raised[0] == got and len(raised[1]) == 4
    seen = []
    assert list(cobsfile.open(path, threads=threads, on_damage=seen.append)) == got
    assert [d.to_dict() for d in seen] == [d.to_dict() for d in one.damage]
    # A reader dropped mid-file lets its threads go; one opened for its metadata reads it.
    reader = cobsfile.open(path, threads=threads)
    assert next(reader) == got[0]
    del reader
    assert cobsfile.open(path, threads=threads).metadata == one.metadata


def damaged_json_file(tmp_path):
    recs = [b'{"n": %d}' % i for i in range(300)]
    data = bytearray(written_file(recs, block_size=200))
    data[len(data) // 2] ^= 0x40
    path = tmp_path / "damaged.cobs"
    path.write_bytes(bytes(data))
    return path


def test_a_table_says_which_rows_damage_cost(tmp_path):
    # read_table dropped the damaged rows without a warning or a trace in the result.
    path = damaged_json_file(tmp_path)
    with pytest.warns(cobsfile.DamageWarning, match="damaged range"):
        table = cobsfile.read_table(path)
    assert 0 < table.num_rows < 300
    listed = json.loads(table.schema.metadata[b"cobsfile.damage"])
    assert len(listed) == 1 and listed[0]["end"] > listed[0]["start"]
    # A clean file's table carries no such entry, and no warning.
    clean = tmp_path / "clean.cobs"
    clean.write_bytes(written_file([b'{"n": 1}']))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = cobsfile.read_table(clean)
    assert b"cobsfile.damage" not in (table.schema.metadata or {})


def test_raise_is_the_same_error_for_tables_as_for_iteration(tmp_path):
    # to_arrow raised the base Error where iteration raised DamagedError.
    path = damaged_json_file(tmp_path)
    with pytest.raises(cobsfile.DamagedError) as table_error:
        cobsfile.read_table(path, on_damage="raise")
    with pytest.raises(cobsfile.DamagedError) as iteration_error:
        list(cobsfile.open(path, on_damage="raise"))
    assert (table_error.value.start, table_error.value.end) == (
        iteration_error.value.start,
        iteration_error.value.end,
    )


def test_exceptions_are_named_as_users_import_them(tmp_path):
    for cls in (cobsfile.Error, cobsfile.DamagedError, cobsfile.NotACobsfileError, cobsfile.RecordError):
        assert cls.__module__ == "cobsfile", cls
        assert "_cobsfile" not in repr(cls)
    # A directory is Python's own IsADirectoryError, as open() raises it.
    with pytest.raises(IsADirectoryError, match="is a directory"):
        cobsfile.open(tmp_path)


def test_a_damaged_range_has_one_shape_everywhere(cli, tmp_path):
    """`verify --json`, `ls --json`, `cobsfile.verify`, a reader's damage and its exception
    give a damaged range the same fields with the same values."""
    data = written_file(records(300), block_size=100)
    middle = [b for b in cobsfile.open(data).blocks() if b.type == "data"][3]
    path = tmp_path / "damaged.cobs"
    path.write_bytes(flip(data, middle.offset + 5))
    keys = ["start", "end", "status", "cause", "message", "held"]

    verify = json.loads(run(cli, "verify", "--json", str(path), check=False).stdout)
    (range_,) = verify["damaged"]
    assert range_["status"] == "damaged" and range_["held"]["data_blocks"] == 1
    rows = [json.loads(line) for line in run(cli, "ls", "--json", str(path), check=False).stdout.splitlines()]
    (row,) = [r for r in rows if r["status"] != "intact"]
    assert {k: row[k] for k in keys} == {k: range_[k] for k in keys}

    (reported,) = cobsfile.verify(str(path)).damaged
    assert {k: reported.to_dict()[k] for k in keys} == {k: range_[k] for k in keys}
    assert reported.held.records == range_["held"]["records"]

    # A reader going through the file cannot know what the range held; all else agrees.
    r = cobsfile.open(str(path))
    list(r)
    (met,) = r.damage
    assert {k: met.to_dict()[k] for k in keys if k != "held"} == {
        k: range_[k] for k in keys if k != "held"
    }
    with pytest.raises(cobsfile.DamagedError) as e:
        list(cobsfile.open(str(path), on_damage="raise"))
    assert (e.value.start, e.value.end, e.value.status, e.value.cause, e.value.message) == (
        range_["start"], range_["end"], range_["status"], range_["cause"], range_["message"]
    )
    (block,) = [b for b in cobsfile.open(str(path)).blocks() if b.status != "intact"]
    assert (block.offset, block.cause, block.message) == (
        range_["start"], range_["cause"], range_["message"]
    )
