"""The storage port: what the rest of the broker may ask of a partition's storage and of the engine
that holds them (Kafka: `UnifiedLog` per partition, `LogManager` for the lot; ReplicaManager and the
coordinators' `PartitionWriter` above them).

Engine-neutral: no path, segment, flusher or file is named here. The segment files
(broker/storage/log/) are the first engine behind it; a second one (PostgreSQL, issue 44:
broker/storage/postgres/) implements the same two protocols. Above it, broker/partitions/service.py is the only caller on the data path
(the one append path and the one read path) and broker/partitions/catalogue.py the only caller for
topics: handlers and coordinator adapters see those two, never an engine (the import-linter
contracts in pyproject.toml say so).

Offsets, as Kafka defines them for a leader:
* log start: the first offset a reader may ask for;
* log end: the offset the next appended record gets;
* high watermark: what consumers may read. On one node that is what an acknowledgement promises:
  with `--flush always` (acks after fsync) the durable end, so a consumer never sees a record that
  a crash could take back; with `interval:MS` or `never`, where acknowledgements do not wait for the
  disk, the log end. A cluster engine makes it the committed end;
* last stable offset: the high watermark, or the first offset of the oldest transaction still open.

A store's producer state is its own: the idempotence check, the append and the state's update are
one call (`append`), never spread over a handler.
"""

from __future__ import annotations

import asyncio
import enum
from typing import TYPE_CHECKING, Any, AsyncContextManager, Callable, Iterable, Protocol

if TYPE_CHECKING:
    import uuid

    from ...protocol.record_batch import BatchHeader
    from ...purgatory.clock import Clock
    from .log.config import LogConfig
    from .log.topic_files import TopicInfo
    from .log.timestamp_search import BatchToWalk
    from .log.validation import InlineBudget


class AppendOrigin(enum.Enum):
    """Who appends (Kafka's AppendOrigin): a client's batch passes the idempotence and sequence checks;
    a coordinator's (its own records, a transaction's offsets) is trusted and only recorded."""

    CLIENT = "client"
    COORDINATOR = "coordinator"


class Isolation(enum.IntEnum):
    """How far a read may go (Kafka's FetchIsolation)."""

    LOG_END = 0  # everything appended: a coordinator replaying its own partition
    HIGH_WATERMARK = 1  # read_uncommitted consumers
    TXN_COMMITTED = 2  # read_committed consumers: up to the last stable offset


class AppendResult:
    """Where an append went, and the way to its durability: `durable()` is None once the records are
    durable under the broker's flush policy (or the policy does not wait), else a future that
    resolves then, or fails with KAFKA_STORAGE_ERROR. Asked for only when the caller is ready to wait,
    so that appends made in one turn of the event loop share one flush (group commit).

    `duplicate`: a client's retry of a batch already in the log, answered with the first append's
    offsets; nothing was appended."""

    __slots__ = ("store", "base_offset", "last_offset", "log_append_time_ms", "log_start_offset", "duplicate")

    def __init__(self, store: PartitionStore, base_offset: int, last_offset: int, log_append_time_ms: int,
                 log_start_offset: int, duplicate: bool = False) -> None:
        self.store = store
        self.base_offset = base_offset
        self.last_offset = last_offset
        self.log_append_time_ms = log_append_time_ms
        self.log_start_offset = log_start_offset
        self.duplicate = duplicate

    def durable(self) -> asyncio.Future[None] | None:
        return self.store.durable_future(self.last_offset)

    async def wait_durable(self) -> None:
        future = self.durable()
        if future is not None:
            await future


class ProducerView(Protocol):
    """One producer of a partition, as DescribeProducers shows it."""

    @property
    def producer_id(self) -> int: ...
    @property
    def epoch(self) -> int: ...
    @property
    def last_seq(self) -> int: ...
    @property
    def last_timestamp_ms(self) -> int: ...


class PartitionStore(Protocol):
    """One partition's storage."""

    topic: str
    partition: int

    @property
    def config(self) -> LogConfig: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def last_stable_offset(self) -> int: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def offline(self) -> Exception | None: ...  # the storage error that took it offline, if any
    @property
    def closed(self) -> bool: ...  # deleted or closed: work that outlived it must drop it

    # --- writing
    def append(self, records: bytes | bytearray | memoryview, *, origin: AppendOrigin, now_ms: int,
               leader_epoch: int, headers: list[BatchHeader] | None = None) -> AppendResult: ...
    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                      now_ms: int, leader_epoch: int, transaction_version: int = 0
                      ) -> AppendResult: ...  # a stale one raises, unwritten
    def complete_marker(self, producer_id: int, commit: bool, marker_offset: int) -> None: ...
    def durable_future(self, offset: int) -> asyncio.Future[None] | None: ...
    def request_durability(self) -> None: ...  # an append nobody waits for (acks=0) still becomes durable
    def delete_records_before(self, offset: int) -> int: ...
    # Resolved once the log start that delete_records_before moved is durable (None: it is already).
    def durable_log_start(self) -> asyncio.Future[None] | None: ...
    # Coordinators batch their records per turn of the loop: `before_append` writes what they hold
    # before anyone else appends; `after_durability_round` runs a callback once the engine's
    # durability round in progress ends (False: none in progress).
    before_append: Callable[[], None] | None
    def after_durability_round(self, callback: Callable[[], None]) -> bool: ...

    # --- reading
    def read(self, offset: int, max_bytes: int, isolation: Isolation, *,
             min_one_batch: bool = True) -> bytes | memoryview: ...
    # An engine that keeps only part of a log in memory (PostgreSQL's: its tail) reads the rest
    # asynchronously first: None when `read` (or the timestamp search) can be served now (the segment
    # engine's, always), else a future to await before it. A read not prepared returns what is in memory.
    def prepare_read(self, offset: int, max_bytes: int) -> asyncio.Future[None] | None: ...
    # `timestamp` None: the search for the largest timestamp (ListOffsets' MAX_TIMESTAMP)
    def prepare_timestamp_search(self, timestamp: int | None, from_offset: int) -> asyncio.Future[None] | None: ...
    def aborted_transactions(self, start: int, upper: int) -> list[tuple[int, int]]: ...
    def has_aborted_transactions(self) -> bool: ...
    def offset_for_timestamp(self, timestamp: int, from_offset: int,
                             budget: InlineBudget | None) -> tuple[int, int] | BatchToWalk | None: ...
    def max_timestamp_offset(self, budget: InlineBudget | None) -> tuple[int, int] | BatchToWalk: ...
    def offsets_before(self, timestamp: int, max_num_offsets: int, now_ms: int) -> list[int]: ...
    def producers(self) -> Iterable[tuple[ProducerView, int]]: ...  # (producer, open txn's first offset or -1)
    def epoch_end_offset(self, epoch: int) -> tuple[int, int]: ...  # OffsetForLeaderEpoch: (epoch, end offset)
    def epoch_at(self, offset: int) -> int: ...  # the leader epoch the record at `offset` was appended in
    def latest_epoch(self) -> int: ...
    def assign_leader_epoch(self, epoch: int) -> None: ...  # a new leadership term starts at the log end
    def stable_for_reading(self) -> AsyncContextManager[Any]: ...  # no segment rewrite under a replay's reads


class LogEngine(Protocol):
    """Every partition of this node's storage, and the topic records it keeps for the catalogue (which
    validates and owns them; the engine persists them and makes or removes the partitions they name)."""

    clock: Clock
    # Called with (topic, partition) whenever a partition's high watermark moves.
    high_watermark_listener: Callable[[str, int], object] | None

    # --- partitions
    def store(self, topic: str, partition: int) -> PartitionStore | None: ...  # built with its first use
    def loaded_store(self, topic: str, partition: int) -> PartitionStore | None: ...  # only if in use
    def has_partition(self, topic: str, partition: int) -> bool: ...
    def partition_size(self, topic: str, partition: int) -> int | None: ...  # bytes; None: no such partition
    async def run_maintenance(self, now_ms: int) -> int: ...  # retention and compaction
    def close(self) -> None: ...

    # --- the topic records
    topics_version: int  # bumped by every change of the table
    default_config: LogConfig
    def set_default_config(self, default: LogConfig) -> None: ...  # the broker-wide defaults changed
    def topics(self) -> dict[str, TopicInfo]: ...
    def topic(self, name: str) -> TopicInfo | None: ...
    # `replicas`: the catalogue's placement of the partitions on several nodes, kept in the record
    def create_topic(self, name: str, num_partitions: int, configs: dict[str, str], topic_id: uuid.UUID | None = None,
                     *, validate_only: bool = False, allow_internal_configs: bool = False,
                     replicas: dict[int, list[int]] | None = None) -> TopicInfo: ...
    async def create_topic_async(self, name: str, num_partitions: int, configs: dict[str, str],
                                 topic_id: uuid.UUID | None = None, *, validate_only: bool = False,
                                 replicas: dict[int, list[int]] | None = None) -> TopicInfo: ...
    async def add_partitions_async(self, name: str, new_total: int, *, validate_only: bool = False,
                                   replicas: dict[int, list[int]] | None = None) -> TopicInfo: ...
    def alter_topic_configs(self, name: str, configs: dict[str, str], *, validate_only: bool = False) -> TopicInfo: ...
    def delete_topic(self, name: str) -> None: ...
    # The requests' (AlterConfigs, DeleteTopics): an engine whose records are a database's awaits it.
    async def alter_topic_configs_async(self, name: str, configs: dict[str, str], *,
                                        validate_only: bool = False) -> TopicInfo: ...
    async def delete_topic_async(self, name: str) -> None: ...
    def write_topic_record(self, info: TopicInfo) -> None: ...
