"""Hostile input: whatever the bytes, every entry point returns records or raises an exception
of the package (or an OSError) naming what went wrong; nothing crashes, hangs or panics."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import cobsfile

SCHEMA = {
    "type": "record",
    "name": "H",
    "fields": [
        {"name": "s", "type": "string"},
        {"name": "a", "type": {"type": "array", "items": "long"}},
        {"name": "u", "type": ["null", "double", {"type": "map", "values": "bytes"}]},
        {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}


def typed_file() -> bytes:
    out = io.BytesIO()
    with cobsfile.Writer(out, schema=SCHEMA, block_size=300) as w:
        for i in range(200):
            w.write({"s": "x" * (i % 17), "a": list(range(i % 5)), "u": {"k": b"v"} if i % 2 else 1.5, "t": i})
    return out.getvalue()


TYPED = typed_file()


def every_entry_point(data: bytes) -> None:
    try:
        reader = cobsfile.open(data)
    except cobsfile.NotACobsfileError:
        return
    list(reader)
    reader.metadata
    reader.blocks()
    reader.avro_schemas()
    cobsfile.verify(data)
    try:
        list(cobsfile.open(data).records(decode=True))
    except cobsfile.RecordError:
        pass
    try:
        cobsfile.open(data).to_arrow()
    except cobsfile.Error:
        pass


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000))
def test_arbitrary_bytes(data):
    every_entry_point(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(TYPED) - 1), st.integers(1, 255)), max_size=6))
def test_damaged_typed_file(flips):
    data = bytearray(TYPED)
    for at, mask in flips:
        data[at] ^= mask
    every_entry_point(bytes(data))


def test_lying_record_inside_an_intact_block():
    """A typed record whose bytes claim a string of 2^62 bytes, written as a record by a
    writer that does not check: reading it is a RecordError naming its block, nothing more."""
    out = io.BytesIO()
    with cobsfile.Writer(out, schema=SCHEMA) as w:
        w.write({"s": "ok", "a": [], "u": None, "t": 0})
    good = out.getvalue()
    records = list(cobsfile.open(good))
    prefix = records[0][:10]
    out = io.BytesIO()
    with cobsfile.Writer(out, metadata=dict(cobsfile.open(good).metadata)) as w:
        w.write(records[0])
        w.write(prefix + b"\xfe\xff\xff\xff\xff\xff\xff\xff\x7f")
        w.write(records[0])
    it = cobsfile.open(out.getvalue()).records(decode=True)
    assert next(it) == {"s": "ok", "a": [], "u": None, "t": next(iter([_epoch()]))}
    with pytest.raises(cobsfile.RecordError) as e:
        next(it)
    assert e.value.offset is not None
    assert next(it)["s"] == "ok"  # reading goes on after it


def _epoch():
    import datetime

    return datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def test_timestamp_python_cannot_hold():
    """A timestamp far past year 9999 is valid Avro but no Python datetime: a RecordError
    naming the record, not a crash or a bare OverflowError."""
    out = io.BytesIO()
    with cobsfile.Writer(out, schema=SCHEMA) as w:
        w.write({"s": "far", "a": [], "u": None, "t": 2**62})
        w.write({"s": "near", "a": [], "u": None, "t": 1})
    it = cobsfile.open(out.getvalue()).records(decode=True)
    with pytest.raises(cobsfile.RecordError, match="record"):
        next(it)
    assert next(it)["s"] == "near"


def test_not_regular_files(tmp_path):
    # Python's own error for a directory, naming it (issue: it was the package's base Error).
    with pytest.raises(IsADirectoryError, match=str(tmp_path)):
        cobsfile.open(tmp_path)
    with pytest.raises(OSError):
        cobsfile.Appender(tmp_path)
    with pytest.raises(OSError):
        cobsfile.Writer(tmp_path)


def test_a_failing_file_object():
    class Full(io.RawIOBase):
        def writable(self):
            return True

        def write(self, b):
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        w = cobsfile.Writer(Full(), block_size=10)
        for i in range(100):
            w.write(b"record %d" % i)
    json.dumps({})  # the interpreter is fine


LIST = {
    "type": "record",
    "name": "Node",
    "fields": [{"name": "v", "type": "long"}, {"name": "next", "type": ["null", "Node"]}],
}


def test_a_value_that_holds_itself_is_refused(tmp_path):
    # A self-referential dict with a recursive schema recursed until the interpreter died
    # (SIGSEGV); it is refused at the reader's depth limit, and nothing is written.
    node = {"v": 1}
    node["next"] = node
    with cobsfile.Writer(tmp_path / "loop.cobs", schema=LIST) as w:
        with pytest.raises(ValueError, match="nested deeper than 128 levels"):
            w.write(node)
        # Deep but finite values within the limit are written and read back.
        deep = None
        for i in range(60):
            deep = {"v": i, "next": deep}
        w.write(deep)
    assert list(cobsfile.open(tmp_path / "loop.cobs").records(decode=True)) == [deep]


def test_nested_unions_cannot_multiply_the_work(tmp_path):
    # Each level's union has two record branches that fail only at the bottom: trying both at
    # every level would take 2^depth steps.
    schema = {
        "type": "record",
        "name": "A",
        "fields": [{"name": "x", "type": ["A", {"type": "record", "name": "B",
                                                 "fields": [{"name": "x", "type": ["A", "B"]}]}]}],
    }
    value = "bottom"
    for _ in range(100):
        value = {"x": value}
    w = cobsfile.Writer(tmp_path / "u.cobs", schema=schema)
    with pytest.raises((ValueError, TypeError)):
        w.write(value)
    w.close()
