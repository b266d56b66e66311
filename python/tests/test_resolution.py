"""Avro schema resolution against fastavro's, rule by rule: a value written with one schema
and read with another comes back as fastavro returns it, or fails where fastavro fails.
(The Rust suite, tests/resolution.rs, checks the values and the field paths the errors name.)

One rule is cobsfile's own and not compared: two different logical types on one underlying
type (a timestamp-millis read as timestamp-micros) fail rather than read as another instant."""

from __future__ import annotations

import io

import pytest

import cobsfile

fastavro = pytest.importorskip("fastavro")


def record(field_type, default=None, has_default=False, name="R", aliases=None, field="x"):
    f = {"name": field, "type": field_type}
    if has_default:
        f["default"] = default
    schema = {"type": "record", "name": name, "fields": [f]}
    if aliases:
        schema["aliases"] = aliases
    return schema


def with_fastavro(writer, value, reader):
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(writer), [value])
    out.seek(0)
    return list(fastavro.reader(out, reader_schema=fastavro.parse_schema(reader)))


def with_cobsfile(tmp_path, writer, value, reader):
    path = tmp_path / "r.cobs"
    with cobsfile.Writer(path, schema=writer, overwrite=True) as w:
        w.write(value)
    return list(cobsfile.open(path).records(decode=True, reader_schema=reader))


ENUM = {"type": "enum", "name": "C", "symbols": ["RED", "GREEN", "BLUE"]}
FIXED = {"type": "fixed", "name": "F", "size": 4}
INNER = {"type": "record", "name": "In", "fields": [{"name": "a", "type": "long"}]}

CASES = {
    # Narrowings and casts: refused by both.
    "long as int": (record("long"), {"x": 4294967301}, record("int")),
    "long in a union as int": (
        record(["null", "long"]),
        {"x": 2**40},
        record(["null", "int"]),
    ),
    "double as float": (record("double"), {"x": 1e300}, record("float")),
    "map as record": (
        record({"type": "map", "values": "long"}),
        {"x": {"a": 1}},
        record(INNER),
    ),
    "record renamed without an alias": (record("long"), {"x": 1}, record("long", name="S")),
    "string as enum": (record("string"), {"x": "RED"}, record(ENUM)),
    "fixed as string": (record(FIXED), {"x": b"abcd"}, record("string")),
    "fixed of another size": (record(FIXED), {"x": b"abcd"}, record({**FIXED, "size": 5})),
    "boolean as int": (record("boolean"), {"x": True}, record("int")),
    "enum symbol unknown, no default": (
        record(ENUM),
        {"x": "GREEN"},
        record({**ENUM, "symbols": ["RED"]}),
    ),
    "new field without a default": (
        record("long"),
        {"x": 1},
        {"type": "record", "name": "R", "fields": [{"name": "y", "type": "long"}]},
    ),
    # What the specification allows: read by both alike.
    "int as long": (record("int"), {"x": -7}, record("long")),
    "int as double": (record("int"), {"x": 3}, record("double")),
    "long as double": (record("long"), {"x": 2**40}, record("double")),
    "float as double": (record("float"), {"x": 1.5}, record("double")),
    "string as bytes": (record("string"), {"x": "hé"}, record("bytes")),
    "bytes as string": (record("bytes"), {"x": b"ok"}, record("string")),
    "union as its branch": (record(["null", "int"]), {"x": 9}, record("long")),
    "plain into a union": (record("int"), {"x": 9}, record(["null", "string", "long"])),
    "record renamed with an alias": (
        record("long"),
        {"x": 1},
        record("long", name="S", aliases=["R"]),
    ),
    "field renamed with an alias": (
        record("long"),
        {"x": 1},
        {"type": "record", "name": "R", "fields": [{"name": "y", "aliases": ["x"], "type": "long"}]},
    ),
    "bytes default": (
        record("long"),
        {"x": 1},
        {
            "type": "record",
            "name": "R",
            "fields": [
                {"name": "x", "type": "long"},
                {"name": "b", "type": "bytes", "default": "\u00ff\u00fe"},
            ],
        },
    ),
    "record default": (
        record("long"),
        {"x": 1},
        {
            "type": "record",
            "name": "R",
            "fields": [
                {"name": "x", "type": "long"},
                {"name": "r", "type": INNER, "default": {"a": 5}},
            ],
        },
    ),
    "enum symbol reordered": (
        record(ENUM),
        {"x": "GREEN"},
        record({**ENUM, "symbols": ["BLUE", "GREEN", "RED"]}),
    ),
    "enum default": (
        record(ENUM),
        {"x": "GREEN"},
        record({**ENUM, "symbols": ["RED", "OTHER"], "default": "OTHER"}),
    ),
    "array items widened": (
        record({"type": "array", "items": "int"}),
        {"x": [1, 2]},
        record({"type": "array", "items": "long"}),
    ),
    "map values narrowed": (
        record({"type": "map", "values": "long"}),
        {"x": {"a": 1}},
        record({"type": "map", "values": "int"}),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_resolution_agrees_with_fastavro(tmp_path, case):
    writer, value, reader = CASES[case]
    try:
        expected = with_fastavro(writer, value, reader)
    except Exception as e:  # fastavro's own error types differ by rule
        expected = e
    if isinstance(expected, Exception):
        with pytest.raises(cobsfile.RecordError, match="cannot resolve"):
            with_cobsfile(tmp_path, writer, value, reader)
    else:
        if case == "bytes default":
            # fastavro returns a bytes field's default as the JSON string; Avro's
            # specification makes its characters U+0000 to U+00FF the bytes.
            expected = [{**r, "b": r["b"].encode("latin-1")} for r in expected]
        assert with_cobsfile(tmp_path, writer, value, reader) == expected


def test_logical_types_are_not_reinterpreted(tmp_path):
    millis = {"type": "long", "logicalType": "timestamp-millis"}
    micros = {"type": "long", "logicalType": "timestamp-micros"}
    import datetime

    at = datetime.datetime(2023, 5, 1, tzinfo=datetime.timezone.utc)
    with pytest.raises(cobsfile.RecordError, match="timestamp-millis does not resolve"):
        with_cobsfile(tmp_path, record(millis), {"x": at}, record(micros))
    assert with_cobsfile(tmp_path, record(millis), {"x": at}, record(millis)) == [{"x": at}]
