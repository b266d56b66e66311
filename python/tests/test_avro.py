"""Typed records (Avro schemas) and Arrow, against independent peers: fastavro reads what
`cobsfile export` writes and writes what `cobsfile import` reads; pyarrow's own JSON reader
reads the same JSON records `to_arrow()` converts."""

from __future__ import annotations

import datetime
import decimal
import io
import json
import uuid

import pytest

import cobsfile
from conftest import run

fastavro = pytest.importorskip("fastavro")

RICH = {
    "type": "record",
    "name": "Rich",
    "namespace": "test",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "score", "type": ["null", "double"], "default": None},
        {"name": "level", "type": {"type": "enum", "name": "Level", "symbols": ["low", "high"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "counts", "type": {"type": "map", "values": "int"}},
        {"name": "blob", "type": "bytes"},
        {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 4}},
        {
            "name": "inner",
            "type": {
                "type": "record",
                "name": "Inner",
                "fields": [{"name": "ok", "type": "boolean"}, {"name": "f", "type": "float"}],
            },
        },
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "key", "type": {"type": "string", "logicalType": "uuid"}},
        {
            "name": "price",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
        },
        {"name": "again", "type": ["null", "Inner"], "default": None},
    ],
}


def rich(i: int) -> dict:
    utc = datetime.timezone.utc
    return {
        "id": i,
        "name": f"item {i}",
        "score": None if i % 3 == 0 else i / 4,
        "level": "high" if i % 2 else "low",
        "tags": [f"t{j}" for j in range(i % 4)],
        "counts": {f"k{j}": j for j in range(i % 3)},
        "blob": bytes([i % 256, 0, 255]),
        "hash": bytes([i % 256, 1, 2, 3]),
        "inner": {"ok": i % 2 == 0, "f": 0.5},
        "day": datetime.date(2024, 1, 1) + datetime.timedelta(days=i),
        "at": datetime.datetime(2025, 11, 30, 12, 0, 0, (i % 1000) * 1000, tzinfo=utc),
        "at_us": datetime.datetime(2025, 11, 30, 12, 0, 0, i % 1000000, tzinfo=utc),
        "key": uuid.UUID(int=i),
        "price": decimal.Decimal(i) / 100,
        "again": None if i % 2 else {"ok": True, "f": 1.5},
    }


def fastavro_records(path) -> list:
    with open(path, "rb") as f:
        return list(fastavro.reader(f))


def test_typed_round_trip(tmp_path):
    values = [rich(i) for i in range(200)]
    path = tmp_path / "rich.cobs"
    with cobsfile.Writer(path, schema=RICH, compression="zstd") as w:
        w.write_many(values)
    r = cobsfile.open(path)
    assert list(r.records(decode=True)) == values
    announced = json.loads(r.avro_schemas()[0])
    assert (announced["namespace"], announced["name"]) == ("test", "Rich")
    assert b"avro.schema" in b"".join(k.encode() for k in r.metadata)


def test_export_read_by_fastavro(tmp_path, cli):
    values = [rich(i) for i in range(300)]
    path = tmp_path / "rich.cobs"
    with cobsfile.Writer(path, schema=json.dumps(RICH)) as w:
        for v in values:
            w.write(v)
    run(cli, "export", str(path), "-o", str(tmp_path / "rich.avro"))
    from_fastavro = fastavro_records(tmp_path / "rich.avro")
    assert from_fastavro == values
    assert list(cobsfile.open(path).records(decode=True)) == from_fastavro


@pytest.mark.parametrize("codec", ["null", "deflate", "zstandard"])
def test_fastavro_file_imported(tmp_path, cli, codec, events, events_schema):
    parsed = fastavro.parse_schema(events_schema)
    avro = tmp_path / "events.avro"
    with open(avro, "wb") as f:
        fastavro.writer(f, parsed, events, codec=codec, metadata={"origin": "fastavro"})
    out = tmp_path / "events.cobs"
    run(cli, "import", "-o", str(out), str(avro))
    got = list(cobsfile.open(out).records(decode=True))
    assert got == fastavro_records(avro) == events


def test_reader_schema_resolution(tmp_path):
    path = tmp_path / "rich.cobs"
    with cobsfile.Writer(path, schema=RICH) as w:
        w.write_many(rich(i) for i in range(10))
    narrow = {
        "type": "record",
        "name": "Rich",
        "namespace": "test",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "added", "type": "string", "default": "n/a"},
        ],
    }
    got = list(cobsfile.open(path).records(decode=True, reader_schema=narrow))
    assert got == [{"id": i, "added": "n/a"} for i in range(10)]


def test_typed_write_mistakes(tmp_path):
    w = cobsfile.Writer(tmp_path / "t.cobs", schema=RICH)
    good = rich(1)
    with pytest.raises(TypeError, match="name"):
        w.write({**good, "name": 5})
    with pytest.raises(ValueError, match="missing field"):
        w.write({k: v for k, v in good.items() if k != "id"})
    with pytest.raises(ValueError, match="symbol"):
        w.write({**good, "level": "medium"})
    with pytest.raises(ValueError, match="needs 4 bytes"):
        w.write({**good, "hash": b"12345"})
    with pytest.raises(ValueError, match="out of range"):
        w.write({**good, "id": 2**70})
    w.write(good)
    w.close()
    # Nothing was written for the refused values.
    assert list(cobsfile.open(tmp_path / "t.cobs").records(decode=True)) == [good]
    with pytest.raises(cobsfile.RecordError, match="schema"):
        cobsfile.Writer(tmp_path / "u.cobs", schema='{"type": "nonsense"}')
    with pytest.raises(cobsfile.RecordError, match="no Avro schema"):
        list(cobsfile.open(write_plain(tmp_path)).records(decode=True))


def write_plain(tmp_path):
    path = tmp_path / "plain.cobs"
    with cobsfile.Writer(path) as w:
        w.write(b"{}")
    return path


def test_typed_damage_is_skipped(tmp_path):
    values = [rich(i) for i in range(400)]
    out = io.BytesIO()
    with cobsfile.Writer(out, schema=RICH, block_size=2000) as w:
        w.write_many(values)
    data = bytearray(out.getvalue())
    data[len(data) // 2] ^= 0x10
    r = cobsfile.open(bytes(data))
    it = r.records(decode=True)
    got = list(it)
    assert 0 < len(got) < len(values) and len(it.damage) == 1
    assert all(v in values for v in got)


def test_to_arrow_json_equals_pyarrow_json(tmp_path, events):
    pa = pytest.importorskip("pyarrow")
    pajson = pytest.importorskip("pyarrow.json")
    lines = [json.dumps(e).encode() for e in events]
    path = tmp_path / "events.cobs"
    with cobsfile.Writer(path, compression="zstd") as w:
        w.write_many(lines)
    ndjson = tmp_path / "events.jsonl"
    ndjson.write_bytes(b"\n".join(lines) + b"\n")
    # pyarrow would read the RFC 3339 strings as timestamps: ask it for strings, as JSON is.
    options = pajson.ParseOptions(
        explicit_schema=pa.schema([("ts", pa.string())]), unexpected_field_behavior="infer"
    )
    expected = pajson.read_json(ndjson, parse_options=options)
    table = cobsfile.read_table(path)
    assert table.num_rows == len(events)
    assert table.column_names == expected.column_names  # the order keys appear in
    for name in expected.column_names:
        assert table.column(name).to_pylist() == expected.column(name).to_pylist(), name
    projected = cobsfile.read_table(path, columns=["service", "latency_ms"])
    assert projected.column_names == ["service", "latency_ms"]
    with pytest.raises(cobsfile.Error, match="no column"):
        cobsfile.read_table(path, columns=["nope"])


def test_to_arrow_typed_equals_fastavro(tmp_path, events, events_schema):
    pytest.importorskip("pyarrow")
    path = tmp_path / "events.cobs"
    with cobsfile.Writer(path, schema=events_schema) as w:
        w.write_many(events)
    table = cobsfile.read_table(path)
    assert table.to_pylist() == events
    assert [r for r in cobsfile.open(path).records(decode=True)] == events



@pytest.mark.parametrize("threads", [2, 3])
def test_typed_table_in_ranges_equals_one_read(tmp_path, events, events_schema, threads):
    """Typed records read in byte ranges on several threads (each range's rows checked and
    made into batches on its thread) give the rows of one sequential read, in file order,
    damaged or not."""
    pytest.importorskip("pyarrow")
    written = (events * (60000 // len(events) + 1))[:60000]
    path = tmp_path / "typed.cobs"
    with cobsfile.Writer(path, schema=events_schema, block_size=3000) as w:
        w.write_many(written)
    data = bytearray(path.read_bytes())
    assert len(data) > 3 << 20, len(data)
    for at in (len(data) // 5, len(data) // 2, len(data) * 4 // 5):
        data[at] ^= 0x21
    damaged = tmp_path / "damaged.cobs"
    damaged.write_bytes(bytes(data))
    for p in (path, damaged):
        one = cobsfile.read_table(p, threads=1)
        many = cobsfile.read_table(p, threads=threads)
        assert many.to_pylist() == one.to_pylist()
        assert one.to_pylist() == list(cobsfile.open(p).records(decode=True))
    assert len(one) < len(written)


MORE = {
    "type": "record",
    "name": "More",
    "fields": [
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tu", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "lm", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "lu", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {
            "name": "money",
            "type": {
                "type": "fixed",
                "name": "Money",
                "size": 8,
                "logicalType": "decimal",
                "precision": 18,
                "scale": 4,
            },
        },
        {"name": "text", "type": "string"},
        {"name": "nested", "type": {"type": "map", "values": {"type": "array", "items": ["null", "long", "string"]}}},
        {"name": "f", "type": "float"},
    ],
}


def more(i: int) -> dict:
    return {
        "tm": datetime.time(i % 24, i % 60, i % 60, (i % 1000) * 1000),
        "tu": datetime.time(23, 59, 59, i % 1000000),
        "lm": datetime.datetime(1969, 12, 31, 23, 0, 0, (i % 1000) * 1000),
        "lu": datetime.datetime(2038, 1, 19, 3, 14, 7, i % 1000000),
        "money": decimal.Decimal(-i * 12345) / 10000,
        "text": f"é{i}\u2603\U0001f600",
        "nested": {f"k{j}": [None, -i * j, f"s{j}"][: j + 1] for j in range(i % 4)},
        "f": float(i) / 8,
    }


def test_typed_objects_are_fastavros(tmp_path, cli):
    """Objects built straight from datums, for the logical types and nestings `rich` does not
    have, equal fastavro's for the same file."""
    parsed = fastavro.parse_schema(MORE)
    values = [more(i) for i in range(100)]
    with open(tmp_path / "more.avro", "wb") as f:
        fastavro.writer(f, parsed, values)
    run(cli, "import", str(tmp_path / "more.avro"), "-o", str(tmp_path / "more.cobs"))
    expected = fastavro_records(tmp_path / "more.avro")
    assert list(cobsfile.open(tmp_path / "more.cobs").records(decode=True)) == expected


SHAPES = {
    "type": "record",
    "name": "Shapes",
    "fields": [
        {
            "name": "one",
            "type": [
                "null",
                {"type": "record", "name": "A", "fields": [{"name": "x", "type": "long"}, {"name": "y", "type": "string"}]},
                {"type": "record", "name": "B", "fields": [{"name": "y", "type": "long"}, {"name": "x", "type": "string"}, {"name": "z", "type": "boolean"}]},
            ],
        },
        {"name": "many", "type": {"type": "array", "items": ["A", "B"]}},
        {"name": "last", "type": "string"},
    ],
}


def shapes(i: int) -> dict:
    a = lambda j: {"x": j, "y": f"a{j}"}  # noqa: E731
    b = lambda j: {"y": j, "x": f"b{j}", "z": j % 2 == 0}  # noqa: E731
    # Walks that differ from one datum to the next: no record, either record first, and
    # arrays of mixed records, one of them longer than the names kept in walk order.
    count = 2100 if i == 7 else i % 5
    return {
        "one": [None, a(i), b(i)][i % 3],
        "many": [a(j) if (i + j) % 3 else b(j) for j in range(count)],
        "last": f"end {i}",
    }


def test_typed_objects_of_changing_shapes_are_fastavros(tmp_path, cli):
    """Field names are made once and found again by the order of the walk before: records
    whose fields come in a different order or number each time still get the right keys."""
    parsed = fastavro.parse_schema(SHAPES)
    values = [shapes(i) for i in range(40)]
    with open(tmp_path / "shapes.avro", "wb") as f:
        fastavro.writer(f, parsed, values)
    run(cli, "import", str(tmp_path / "shapes.avro"), "-o", str(tmp_path / "shapes.cobs"))
    expected = fastavro_records(tmp_path / "shapes.avro")
    got = list(cobsfile.open(tmp_path / "shapes.cobs").records(decode=True))
    assert got == expected
    assert [list(g["one"] or {}) for g in got] == [list(e["one"] or {}) for e in expected]
