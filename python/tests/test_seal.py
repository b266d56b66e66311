"""Sealed files from Python: a Writer or an Appender given a private key seals what it writes;
`verify(keys=...)` says what the seals prove, as `cobsfile verify --key` does, and finds a
block taken out, framing and all, that a plain verify cannot see."""

from __future__ import annotations

import json
import os

import pytest

import cobsfile
from conftest import run


@pytest.fixture
def key(cli, tmp_path):
    path = tmp_path / "archive"
    run(cli, "key", "generate", "-o", str(path))
    return path


def test_a_sealed_file_verifies_and_a_block_cut_out_is_removed(cli, key, tmp_path):
    path = tmp_path / "sealed.cobs"
    with cobsfile.Writer(path, block_size=200, seal=key, seal_every=1000) as w:
        for i in range(2000):
            w.write(f"event {i:05}".encode())
    public = f"{key}.pub"
    report = cobsfile.verify(path, keys=[public])
    assert report.clean
    seals = report.seals
    assert seals.authentic and seals.authentic_records == 2000
    assert seals.tampered == [] and seals.unsealed_records == 0
    assert seals.extends(seals.last_seal)
    assert cobsfile.verify(path).seals is None

    # The CLI agrees, and names the same last seal.
    out = run(cli, "verify", "--json", "--key", public, str(path)).stdout
    assert json.loads(out)["seals"]["chains"][0]["last_seal"] == seals.last_seal

    # A data block cut out, framing and all: a plain verify is clean, the seals tell.
    data = bytes(path.read_bytes())
    with cobsfile.open(path) as r:
        blocks = [b for b in r.blocks() if b.type == "data"]
    victim = blocks[len(blocks) // 2]
    cut = data[: victim.offset + 1] + data[victim.offset + victim.size + 1 :]
    assert cobsfile.verify(cut).clean
    report = cobsfile.verify(cut, keys=[public])
    kinds = [t[2] for t in report.seals.tampered]
    assert kinds == ["removed"]
    assert not report.seals
    assert not report.seals.extends(seals.last_seal)


def test_an_appender_seals_at_close_and_key_mistakes_are_clear(cli, key, tmp_path):
    log = tmp_path / "log.cobs"
    for session in range(2):
        with cobsfile.Appender(log, seal=key) as a:
            for i in range(100):
                a.append(f"s{session} {i}".encode())
    seals = cobsfile.verify(log, keys=[f"{key}.pub"]).seals
    assert seals.authentic and seals.authentic_records == 200 and len(seals.chains) == 2

    with pytest.raises(cobsfile.Error, match="public"):
        cobsfile.verify(log, keys=[key])  # the private key where the public one is wanted
    with pytest.raises(cobsfile.Error, match="no such file"):
        cobsfile.verify(log, keys=[tmp_path / "missing.pub"])
    with pytest.raises(ValueError, match="seal_every"):
        cobsfile.Writer(tmp_path / "x.cobs", seal_every=10)
    os.chmod(key, 0o644)
    with pytest.raises(cobsfile.Error, match="chmod"):
        cobsfile.Writer(tmp_path / "y.cobs", seal=key)
    assert not (tmp_path / "y.cobs").exists()
    with pytest.raises(ValueError, match="seal hash"):
        seals.extends("abc")


def test_a_log_directory_seals_each_segment(key, tmp_path):
    log = tmp_path / "log"
    with cobsfile.Appender(log, seal=key, segment_size=8000) as a:
        for i in range(2000):
            a.append(f"event {i:05}".encode())
    segments = cobsfile.segments(log)
    assert len(segments) > 2
    total = 0
    for path in segments:
        seals = cobsfile.verify(path, keys=[f"{key}.pub"]).seals
        assert seals.authentic, (path, seals.tampered)
        total += seals.authentic_records
    assert total == 2000


def test_a_window_verifies_alone_as_the_cli_verifies_it(cli, key, tmp_path):
    path = tmp_path / "timed.cobs"
    t0 = 1_767_225_600 * 10**9
    with cobsfile.Writer(path, block_size=4000, seal=key, seal_every=16000) as w:
        for i in range(20000):
            w.write(f"event {i:05}".encode(), time=t0 + i * 10**9)
    public = f"{key}.pub"
    since, until = t0 + 10000 * 10**9, t0 + 10099 * 10**9
    report = cobsfile.verify(path, keys=[public], since=since, until=until)
    seals = report.seals
    start, end = seals.span
    size = path.stat().st_size
    assert 0 < start < end < size and end - start < size // 4
    assert seals.authentic and seals.tampered == [] and seals.authentic_records >= 100
    assert cobsfile.verify(path, keys=[public]).seals.span is None
    # The CLI's window says the same.
    out = run(
        cli, "verify", "--json", "--key", public, "--since", f"@{since // 10**9}",
        "--until", f"@{until // 10**9}", str(path),
    ).stdout
    got = json.loads(out)["seals"]
    assert (got["span"]["start"], got["span"]["end"]) == seals.span
    assert got["authentic"]["records"] == seals.authentic_records
    with pytest.raises(ValueError, match="keys"):
        cobsfile.verify(path, since=since)
