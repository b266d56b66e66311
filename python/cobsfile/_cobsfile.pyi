"""Type stubs of the native module (the Rust bindings)."""

from typing import Any, Callable, Iterable, Iterator, Optional, Sequence, Union

FORMAT_VERSION: int
__version__: str

class Error(Exception):
    offset: Optional[int]

class DamagedError(Error):
    start: int
    end: int
    status: str  # "damaged" or "unreadable"
    cause: str  # the cause's name (spec 9.8)
    message: str

class NotACobsfileError(Error): ...
class RecordError(Error): ...

class Held:
    blocks: int
    data_blocks: int
    metadata_blocks: int
    records: int

class Damage:
    start: int
    end: int
    status: str  # "damaged" or "unreadable"
    cause: str  # the cause's name: spec 9.8's ("crc", ...) or "schema-unknown"
    message: str
    held: Optional[Held]
    kind: str  # "damaged", "unreadable" or "record"
    records: int
    @property
    def size(self) -> int: ...
    def to_dict(self) -> dict[str, Any]: ...

class BlockInfo:
    offset: int
    type: Optional[str]
    size: int
    records: Optional[int]
    codec: Optional[str]
    payload_size: Optional[int]
    status: str  # "intact", "damaged" or "unreadable"
    cause: Optional[str]
    message: Optional[str]

class Report:
    len: int
    records: int
    blocks: dict[str, int]
    block_bytes: int
    damaged: list[Damage]
    ending: str  # "finished", "open", "unfinished" or "empty"
    clean: bool
    damaged_bytes: int
    seals: Optional[Seals]  # with verify(keys=...)
    def __bool__(self) -> bool: ...

class Seals:
    authentic: bool
    authentic_blocks: int
    authentic_records: int
    unsealed_blocks: int
    unsealed_records: int
    unsealed: list[tuple[int, int]]
    tampered: list[tuple[int, int, str, str]]  # (start, end, kind, message)
    chains: list[dict[str, Any]]
    last_seal: Optional[str]
    file_id: Optional[str]
    span: Optional[tuple[int, int]]
    def extends(self, seal_hash: str) -> bool: ...
    def __bool__(self) -> bool: ...

class Recovery:
    report: Report
    blocks: int
    written: int
    lossless: bool
    newer_version: Optional[tuple[int, int]]

class ArrowStream:
    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any: ...
    @property
    def num_rows(self) -> int: ...

class JsonRecords(Iterator[Any]):
    def __iter__(self) -> JsonRecords: ...
    def __next__(self) -> Any: ...

class AvroRecords(Iterator[Any]):
    def __iter__(self) -> AvroRecords: ...
    def __next__(self) -> Any: ...
    @property
    def damage(self) -> list[Damage]: ...

class Reader(Iterator[bytes]):
    @property
    def _on_damage_is_skip(self) -> bool: ...
    def __new__(
        cls,
        source: Any,
        *,
        on_damage: Union[str, Callable[[Damage], Any], None] = None,
        dictionaries: Optional[Sequence[bytes]] = None,
        threads: int = 1,
        max_body_size: Optional[int] = None,
        since: Any = None,
        until: Any = None,
    ) -> Reader: ...
    def __iter__(self) -> Reader: ...
    def __next__(self) -> bytes: ...
    def _next_timed(self) -> Optional[tuple[Optional[int], bytes]]: ...
    def close(self) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def damage(self) -> list[Damage]: ...
    @property
    def metadata(self) -> dict[str, bytes]: ...
    def blocks(self) -> list[BlockInfo]: ...
    def avro_schemas(self) -> list[str]: ...
    def _avro_records(self, reader_schema: Optional[str] = None) -> AvroRecords: ...
    def _json_records(self) -> JsonRecords: ...
    def _arrow_stream(
        self,
        columns: Optional[list[str]] = None,
        records: str = "auto",
        reader_schema: Optional[str] = None,
        batch_size: int = 65536,
        threads: int = 1,
    ) -> ArrowStream: ...

class Writer:
    def __new__(
        cls,
        target: Any,
        *,
        compression: Union[None, str, tuple[str, int]] = None,
        block_size: Optional[int] = None,
        metadata: Optional[dict[str, Union[str, bytes]]] = None,
        dictionary: Optional[bytes] = None,
        schema: Optional[str] = None,
        threads: int = 1,
        index: bool = True,
        overwrite: bool = False,
        seal: Optional[Any] = None,
        seal_every: Optional[int] = None,
        lines: bool = True,
    ) -> Writer: ...
    def write(self, record: Any, time: Any = None) -> None: ...
    def write_many(self, records: Iterable[Any]) -> int: ...
    def write_metadata(self, entries: dict[str, Union[str, bytes]]) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    @property
    def records(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> Writer: ...
    def __exit__(self, *exc: Any) -> bool: ...

class Appender:
    def __new__(
        cls,
        path: Any,
        *,
        durability: str = "none",
        compression: Union[None, str, tuple[str, int]] = None,
        block_size: Optional[int] = None,
        dictionary: Optional[bytes] = None,
        schema: Optional[str] = None,
        max_delay: Optional[float] = None,
        threads: int = 1,
        segment_size: Optional[int] = None,
        segment_age: Optional[float] = None,
        retain_size: Optional[int] = None,
        retain_age: Optional[float] = None,
        retain_count: Optional[int] = None,
        seal: Optional[Any] = None,
        seal_every: Optional[int] = None,
        lines: bool = True,
    ) -> Appender: ...
    def append(self, record: Any, time: Any = None) -> int: ...
    def append_many(self, records: Iterable[Any]) -> int: ...
    def write_metadata(self, entries: dict[str, Union[str, bytes]]) -> None: ...
    def flush(self) -> None: ...
    def sync(self) -> None: ...
    def wait_durable(self, seq: int) -> None: ...
    @property
    def durable(self) -> int: ...
    @property
    def opened(self) -> dict[str, Any]: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> Appender: ...
    def __exit__(self, *exc: Any) -> bool: ...

class Follower(Iterator[bytes]):
    def __new__(
        cls,
        path: Any,
        *,
        from_end: bool = False,
        timeout: Optional[float] = None,
        on_damage: Union[str, Callable[[Damage], Any], None] = None,
        dictionaries: Optional[Sequence[bytes]] = None,
        max_body_size: Optional[int] = None,
        since: Any = None,
        until: Any = None,
    ) -> Follower: ...
    def __iter__(self) -> Follower: ...
    def __next__(self) -> bytes: ...
    @property
    def damage(self) -> list[Damage]: ...
    @property
    def truncations(self) -> int: ...
    @property
    def replacements(self) -> int: ...

def verify(
    source: Any,
    *,
    dictionaries: Optional[Sequence[bytes]] = None,
    threads: int = 1,
    max_body_size: Optional[int] = None,
    keys: Optional[Sequence[Any]] = None,
    since: Any = None,
    until: Any = None,
) -> Report: ...
def segments(path: Any) -> list[Any]: ...
def recover(
    source: Any,
    destination: Any,
    *,
    overwrite: bool = False,
    dictionaries: Optional[Sequence[bytes]] = None,
    max_body_size: Optional[int] = None,
) -> Recovery: ...
