"""The two contracts of the coordinator runtime: the `Shard` it runs and the `PartitionWriter` it
writes through (Kafka's CoordinatorShard and PartitionWriter).

A shard is the state of one partition of a coordinator's log (`__consumer_offsets`,
`__transaction_state`) as a state machine: it decides (`handle`) and it applies what its log holds
(`replay`), and it never does I/O. The runtime (runtime.py, partition.py) gives it one command at a
time per key, writes the records it decides, replays them once durable, answers, arms its timers and
hands its follow-ups back to it, and loads and unloads it when this node becomes or stops being the
partition's leader.

The writer is the runtime's only way to disk: the adapter of the log in the broker
(broker/coordinators/) implements it over the partition service, encoding the shard's records in its
log's format.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol

from ...protocol.errors import ErrorCode
from .outcome import Outcome


class Shard(Protocol):
    partition: int

    def handle(self, cmd: Any, now_ms: int) -> Outcome:
        """Decide: the answer, the records to write, the timers, the events. State that must not
        change before a write is durable changes in `replay` or in the follow-up (`on_write_done`)."""
        ...

    def replay(self, record: Any) -> None:
        """Apply one record of the log: at load, and once a write of this shard is durable."""
        ...

    def on_write_done(self, follow_up: Any, error: ErrorCode | None, now_ms: int) -> Outcome:
        """Carry on after the write that carried `follow_up`: `error` is None when it is durable,
        else the error already translated for clients (append_error_to_response)."""
        ...

    def begin_load(self) -> None:
        """This node is becoming the partition's coordinator: forget everything; replays follow."""
        ...

    def finish_load(self, now_ms: int) -> Outcome:
        """Every record is replayed (Kafka's onLoaded): arm the timers the loaded state needs."""
        ...

    def unload(self, now_ms: int) -> Outcome:
        """This node no longer coordinates the partition (Kafka's onUnloaded): answer whoever waits,
        cancel every timer, forget everything."""
        ...

    def key_of(self, cmd: Any) -> str:
        """The key whose turn a command (a timer's expiry included) runs in: a group id, a
        transactional id."""
        ...

    def error_result(self, cmd: Any, code: ErrorCode) -> Any:
        """The whole-request error answer for `cmd`: refused before any state was read."""
        ...


class PartitionWriter(Protocol):
    """Where a coordinator's records become durable (one coordinator log's partitions)."""

    def append_records(self, partition: int, records: list[Any]) -> Awaitable[None]:
        """Append and return once durable; raises KafkaError (the runtime translates it for clients)."""
        ...

    def append_records_nowait(self, partition: int, records: list[Any]) -> Awaitable[None]:
        """Take the records now (raising at once if the log cannot) and return the wait for their
        durability: what lets PIPELINED writes be applied at append and answered once durable."""
        ...


def append_error_to_response(code: ErrorCode) -> ErrorCode:
    """How a failed append to a coordinator log is reported to clients (Kafka's CoordinatorRuntime
    and TransactionStateManager map them alike)."""
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    if code is ErrorCode.NETWORK_EXCEPTION:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    return code
