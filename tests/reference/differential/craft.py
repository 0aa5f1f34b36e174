"""Crafting requests for the checks: a request from keyword arguments and nested dicts, and the few
steps many checks share (a topic created, records produced, a topic's id looked up).

    body = make(METADATA, topics=[{"name": "orders"}], allow_auto_topic_creation=False)
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

from kbroker.protocol import framing
from kbroker.protocol.record_batch import Record, encode_batch
from kbroker.protocol.spec import StructSpec

from .runner import Check, Session

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS = 11, 12, 13, 14, 15, 16
SASL_HANDSHAKE, API_VERSIONS, CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS = 17, 18, 19, 20, 21
INIT_PRODUCER_ID, OFFSET_FOR_LEADER_EPOCH = 22, 23
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, WRITE_TXN_MARKERS, TXN_OFFSET_COMMIT = 24, 25, 26, 27, 28
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS, DESCRIBE_CONFIGS, ALTER_CONFIGS = 29, 30, 31, 32, 33
DESCRIBE_LOG_DIRS, SASL_AUTHENTICATE, CREATE_PARTITIONS = 35, 36, 37
DELETE_GROUPS, ELECT_LEADERS, INCREMENTAL_ALTER_CONFIGS = 42, 43, 44
ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS, OFFSET_DELETE = 45, 46, 47
DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51
DESCRIBE_QUORUM, UPDATE_FEATURES = 55, 57
DESCRIBE_CLUSTER, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 60, 61, 65, 66
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE, DESCRIBE_TOPIC_PARTITIONS = 68, 69, 75
ALTER_REPLICA_LOG_DIRS, UNREGISTER_BROKER, LIST_CONFIG_RESOURCES = 34, 64, 74
CREATE_DELEGATION_TOKEN, RENEW_DELEGATION_TOKEN, EXPIRE_DELEGATION_TOKEN, DESCRIBE_DELEGATION_TOKEN = 38, 39, 40, 41
STREAMS_GROUP_HEARTBEAT, STREAMS_GROUP_DESCRIBE = 88, 89

# Never a topic on either broker: the same on both, so it compares as itself.
UNKNOWN_TOPIC_ID = UUID("5a1c0ffe-0000-4000-8000-00000000dead")
ZERO_UUID = UUID(int=0)
# Record timestamps the client sets (CreateTime), the same on both brokers, so fetched batches compare
# byte for byte: the start of this run (a fixed date long past would be deleted by retention.ms).
BASE_TIMESTAMP = int(time.time()) // 60 * 60_000


def unique(s: Session, prefix: str) -> str:
    """A name of this check's own (topic, group, transactional id): the same on both brokers."""
    return f"{prefix}-" + re.sub(r"[^a-z0-9]+", "-", s.check_id.lower()).strip("-")


def table_row(table: str, prefix: str):
    """A decorator for a coordinator table's rows: the coroutine `(session, group)` becomes the Check
    "<prefix>: <title>", run with a group name of its own."""
    def row(title: str, steps: str):
        def wrap(fn: Callable[[Session, str], Awaitable[None]]) -> Check:
            async def run(s: Session) -> None:
                await fn(s, unique(s, "dw"))
            return Check(f"{prefix}: {title}", run, table=table, steps=steps)
        return wrap
    return row


def make(api_key: int, **fields: Any) -> Any:
    """The request of `api_key` with these fields; nested structs as dicts, arrays of them as lists."""
    spec = framing.request_spec(api_key)
    assert spec is not None, api_key
    return _struct(spec.struct, fields)


def _struct(struct: StructSpec, fields: dict[str, Any]) -> Any:
    by_name = {f.name: f for f in struct.fields}
    values = {}
    for name, value in fields.items():
        f = by_name.get(name)
        if f is None:
            raise TypeError(f"{struct.cls.__name__} has no field {name!r} (has {sorted(by_name)})")
        if f.struct is not None and value is not None:
            if f.kind == "array":
                value = [v if not isinstance(v, dict) else _struct(f.struct, v) for v in value]
            elif isinstance(value, dict):
                value = _struct(f.struct, value)
        values[name] = value
    return struct.cls(**values)


def batch(*values: str, key: str | None = "k", producer_id: int = -1, producer_epoch: int = -1,
          base_sequence: int = -1, transactional: bool = False) -> bytes:
    """One record batch of these values at offsets 0.. (the broker assigns the real ones)."""
    records = [Record(i, BASE_TIMESTAMP + i, key.encode() if key is not None else None, v.encode())
               for i, v in enumerate(values)]
    return encode_batch(records, producer_id=producer_id, producer_epoch=producer_epoch,
                        base_sequence=base_sequence, is_transactional=transactional)


CONFIG_LEVEL = "(compared by the configuration level)"


def created_configs_elsewhere(plain: dict[str, Any]) -> dict[str, Any]:
    """CreateTopics v5+ answers with the new topic's every config: which names, values and sources a
    broker has is the configuration level's table (config.json), so a non-empty list is left to it."""
    for topic in plain.get("topics", []):
        if topic.get("configs"):
            topic["configs"] = CONFIG_LEVEL
    return plain


def described_configs_elsewhere(plain: dict[str, Any]) -> dict[str, Any]:
    """DescribeConfigs: the names asked for and their values compare here; sources, synonyms, types and
    documentation are the configuration level's."""
    for result in plain.get("results", []):
        for config in result.get("configs", []):
            for name in ("config_source", "synonyms", "config_type", "documentation", "is_default"):
                config.pop(name, None)
    return plain


async def create_topic(s: Session, name: str, partitions: int = 1, label: str | None = None,
                       configs: dict[str, str] | None = None) -> Any:
    """CreateTopics v7, waiting until the broker's Metadata lists every partition with a leader (Kafka
    answers CreateTopics before its own broker has caught up with the controller)."""
    response = await s.call(CREATE_TOPICS, 7, make(
        CREATE_TOPICS, timeout_ms=30000, topics=[{
            "name": name, "num_partitions": partitions, "replication_factor": 1,
            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}]),
        label or f"setup: create {name}", project=created_configs_elsewhere)
    await wait_for_topic(s, name, partitions)
    return response


async def wait_for_topic(s: Session, name: str, partitions: int) -> UUID:
    import asyncio

    for _ in range(300):
        meta = await s.call(METADATA, 12, make(METADATA, topics=[{"name": name}]), record=False)
        topic = meta.topics[0]
        if topic.error_code == 0 and len(topic.partitions) == partitions and all(
                p.leader_id >= 0 for p in topic.partitions):
            # Kafka's metadata cache may list the leader before its log is open: ListOffsets tells.
            offsets = await s.call(LIST_OFFSETS, 5, make(LIST_OFFSETS, replica_id=-1, topics=[{"name": name, "partitions": [
                {"partition_index": p, "timestamp": -1} for p in range(partitions)]}]), record=False)
            if all(p.error_code == 0 for t in offsets.topics for p in t.partitions):
                s.values[f"topic_id:{name}"] = topic.topic_id
                return topic.topic_id
        await asyncio.sleep(0.05)
    raise TimeoutError(f"topic {name} never had {partitions} partitions with leaders")


async def topic_id(s: Session, name: str) -> UUID:
    found = s.values.get(f"topic_id:{name}") or s.shared.get(f"topic_id:{name}")
    if found is None:
        meta = await s.call(METADATA, 12, make(METADATA, topics=[{"name": name}]), record=False)
        found = s.values[f"topic_id:{name}"] = meta.topics[0].topic_id
    return found


async def produce(s: Session, topic: str, partition: int, *values: str, label: str | None = None,
                  version: int = 9, **batch_args: Any) -> Any:
    return await s.call(PRODUCE, version, make(PRODUCE, acks=-1, timeout_ms=30000, topic_data=[{
        "name": topic, "partition_data": [{"index": partition, "records": batch(*values, **batch_args)}]}]),
        label or f"setup: produce to {topic}-{partition}")
