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


class S3:
    """An S3-compatible server on loopback (moto's, started by tests/s3/server), and a bucket
    in it; `put` stores an object, `delete` removes one (moto reads the credential of a
    request's Authorization header without checking its signature)."""

    HEADERS = {
        "Authorization": "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/s3/aws4_request, "
        "SignedHeaders=host, Signature=0",
        "x-amz-date": "20260101T000000Z",
        "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
    }

    def __init__(self, port: int, bucket: str):
        self.port, self.bucket = port, bucket

    def _request(self, method: str, key: str, body: bytes = b"") -> int:
        import http.client

        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        c.request(method, f"/{self.bucket}/{key}", body=body, headers=self.HEADERS)
        r = c.getresponse()
        r.read()
        return r.status

    def counted(self, monkeypatch) -> Counted:
        """A counting proxy, made the endpoint the package uses."""
        proxy = Counted(self.port)
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint())
        return proxy

    def put(self, key: str, body: bytes) -> str:
        status = self._request("PUT", key, body)
        assert status == 200, status
        return f"s3://{self.bucket}/{key}"

    def delete(self, key: str) -> None:
        status = self._request("DELETE", key)
        assert status == 204, status


class Counted:
    """A proxy to the S3 server on another loopback port that counts the bytes the server
    sends through it (headers included): what a read costs in transfer."""

    def __init__(self, port: int):
        import socket
        import threading

        self.sent = 0
        self._lock = threading.Lock()
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        self.port = listener.getsockname()[1]

        def pipe(src, dst, count: bool):
            try:
                while True:
                    data = src.recv(1 << 16)
                    if not data:
                        break
                    dst.sendall(data)
                    if count:
                        with self._lock:
                            self.sent += len(data)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        def serve():
            while True:
                client, _ = listener.accept()
                server = socket.create_connection(("127.0.0.1", port))
                threading.Thread(target=pipe, args=(client, server, False), daemon=True).start()
                threading.Thread(target=pipe, args=(server, client, True), daemon=True).start()

        threading.Thread(target=serve, daemon=True).start()

    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def take(self) -> int:
        """The bytes sent since the last take."""
        with self._lock:
            sent, self.sent = self.sent, 0
        return sent


@pytest.fixture(scope="session")
def s3_server():
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"), f"cobsfile-s3-{port}.log"), "wb")
    server = subprocess.Popen(
        ["bash", str(REPO / "tests" / "s3" / "server"), str(port)],
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 600  # the first run installs the server
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, f"tests/s3/server exited {server.returncode}"
                assert time.monotonic() < deadline, "no S3 server"
                time.sleep(0.1)
        yield port
    finally:
        os.killpg(server.pid, 9)
        server.wait()
        log.close()


@pytest.fixture
def s3(s3_server, monkeypatch):
    """The server, with the AWS_* variables that point the package at it, and a new bucket."""
    import http.client
    import uuid

    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    for key, value in {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{s3_server}",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }.items():
        monkeypatch.setenv(key, value)
    bucket = f"b{uuid.uuid4().hex[:12]}"
    c = http.client.HTTPConnection("127.0.0.1", s3_server, timeout=30)
    c.request("PUT", f"/{bucket}")
    assert c.getresponse().status == 200
    return S3(s3_server, bucket)
