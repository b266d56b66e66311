"""Shared fixtures: the `cobsfile` command-line binary (an independent path to the same files),
sample events, and file damage."""

from __future__ import annotations

import json
import os
import pathlib
import random
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cli() -> str:
    """The `cobsfile` binary: $COBSFILE_BIN, else the workspace's debug build (built if
    missing)."""
    binary = os.environ.get("COBSFILE_BIN")
    if binary:
        return binary
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    path = target / "debug" / "cobsfile"
    if not path.exists():
        subprocess.run(
            ["cargo", "build", "--locked", "--bin", "cobsfile"], cwd=REPO, check=True
        )
    return str(path)


def run(cli: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([cli, *args], capture_output=True)
    if check and result.returncode != 0:
        raise AssertionError(
            f"cobsfile {' '.join(args)} exited {result.returncode}: {result.stderr.decode()}"
        )
    return result


@pytest.fixture(scope="session")
def events() -> list[dict]:
    """The repository's sample events (JSON objects)."""
    with open(REPO / "samples" / "events.jsonl", "rb") as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="session")
def events_schema() -> dict:
    with open(REPO / "samples" / "events.avsc") as f:
        return json.load(f)


def flip(data: bytes, at: int, mask: int = 0x40) -> bytes:
    b = bytearray(data)
    b[at] ^= mask
    return bytes(b)


def records(n: int, seed: int = 0) -> list[bytes]:
    rng = random.Random(seed)
    return [
        bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64))) for _ in range(n)
    ]


def is_subsequence(part: list, whole: list) -> bool:
    it = iter(whole)
    return all(any(x == y for y in it) for x in part)


def which(name: str) -> bool:
    return shutil.which(name) is not None
