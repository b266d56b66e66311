"""`records(decode="json")` gives what `json.loads` gives for every record: the same objects
(types, float signs, NaN, big integers, key order) for JSON, and the same exception for
anything else, with iteration going on after a record that is not JSON."""

from __future__ import annotations

import io
import json
import math

import pytest
from hypothesis import given, settings, strategies as st

import cobsfile


def outcome(parse, record: bytes):
    """What `parse(record)` gives: ("value", a comparable form) or ("error", type, message)."""
    try:
        value = parse(record)
    except Exception as e:  # noqa: BLE001 - every exception is compared
        return ("error", type(e), str(e))
    return ("value", exact(value))


def exact(value):
    """A form of `value` that equal only when types, float bits and key order agree."""
    if isinstance(value, bool) or value is None:
        return (type(value).__name__, value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else value.hex())
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, list):
        return ("list", [exact(v) for v in value])
    if isinstance(value, dict):
        return ("dict", [(k, exact(v)) for k, v in value.items()])
    raise AssertionError(f"json gave a {type(value)}")


def through_reader(written: list[bytes]) -> list:
    """Each record's outcome through `records(decode="json")`, iterating past errors."""
    out = io.BytesIO()
    with cobsfile.Writer(out, block_size=64) as w:
        w.write_many(written)
    got = []
    with cobsfile.open(out.getvalue()) as r:
        records = r.records(decode="json")
        for _ in written:
            got.append(outcome(lambda _: next(records), b""))
        with pytest.raises(StopIteration):
            next(records)
    return got


def assert_as_json_loads(written: list[bytes]) -> None:
    assert through_reader(written) == [outcome(json.loads, r) for r in written]


EDGES = [
    b"null", b"true", b"false", b"0", b"-0", b"-0.0", b"0.0", b"1E5", b"1e5", b"1.5e-3",
    b"12345678901234567890123456789012345678901234567890", b"-98765432109876543210",
    b"1e400", b"-1e400", b"1.7976931348623157e308", b"5e-324", b"2.4703282292062327e-324",
    b"0.1", b"0.30000000000000004", b"123456789.123456789e-5",
    b"NaN", b"Infinity", b"-Infinity", b"[NaN, -Infinity]", b"nan", b"inf",
    b'"\\ud800"', b'"\\udc00\\ud800"', b'"\\ud83d\\ude00"', b'"\\u00e9\\n\\t\\/\\b\\f"',
    b'"\xc3\xa9"', b'"\xff"', b'"\xed\xa0\x80"', b'"\x01"', b'"\x7f"',
    b"\xef\xbb\xbf{}", '{"a": 1}'.encode("utf-16"), '{"a": 1}'.encode("utf-16-le"),
    '[1]'.encode("utf-32"), b"[" * 300 + b"]" * 300, b"[" * 5000 + b"]" * 5000,
    b'{"a": 1, "b": 2, "a": 3}', b'{"b": 1, "a": 2}', b" \t\n{}\r\n", b"\x0c{}",
    b"{}\x0c", b"01", b"1.", b".5", b"+1", b"- 1", b"tru", b"", b" ", b"{}{}", b"[1,]",
    b'{"a":1,}', b"'a'", b'{"a" 1}', b"[1 2]", b"\x00", b"1\x00", b'{"k": "v\x00"}',
    b'"unterminated', b"[", b"{", b'{"a":', b'"\\x41"', b'"\\u12"', b'"\\uZZZZ"',
]


def test_edge_cases_as_json_loads():
    assert_as_json_loads(EDGES)


def test_each_edge_case_alone():
    # A record jiter refuses is handed to json.loads: the fallback must not depend on what
    # came before it in the batch.
    for record in EDGES:
        assert_as_json_loads([record])


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(json_values, st.booleans(), st.booleans()), max_size=30))
def test_json_values_as_json_loads(values):
    written = [
        json.dumps(v, ensure_ascii=ascii, indent=2 if indent else None).encode()
        for v, ascii, indent in values
    ]
    assert_as_json_loads(written)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.binary(max_size=40),
            st.builds(
                lambda v, at, b: (lambda s: s[:at] + bytes([b]) + s[at + 1 :])(
                    json.dumps(v).encode()
                ),
                json_values,
                st.integers(min_value=0, max_value=60),
                st.integers(min_value=0, max_value=255),
            ),
        ),
        max_size=30,
    )
)
def test_any_bytes_as_json_loads(written):
    assert_as_json_loads(written)


def test_keys_shared_across_records_stay_right(events):
    written = [json.dumps(e).encode() for e in events] * 3
    out = io.BytesIO()
    with cobsfile.Writer(out, compression="zstd") as w:
        w.write_many(written)
    with cobsfile.open(out.getvalue()) as r:
        assert list(r.records(decode="json")) == events * 3


def test_damage_policy_applies_to_json_records(tmp_path):
    path = tmp_path / "f.cobs"
    with cobsfile.Writer(path, block_size=50) as w:
        w.write_many([json.dumps({"n": i}).encode() for i in range(100)])
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))
    with cobsfile.open(path, on_damage="raise") as r:
        with pytest.raises(cobsfile.DamagedError):
            list(r.records(decode="json"))
    with cobsfile.open(path) as r:
        got = list(r.records(decode="json"))
        assert 0 < len(got) < 100 and r.damage
        assert all(isinstance(g, dict) and set(g) == {"n"} for g in got)
