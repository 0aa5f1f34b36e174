"""CreateTopics (19), v2-v7.

Checks follow Kafka's controller (ReplicationControlManager), in its order: a name listed twice is
INVALID_REQUEST; then the name (INVALID_TOPIC_EXCEPTION), existence (TOPIC_ALREADY_EXISTS), the
partition count (-1 = num.partitions, otherwise at least 1: INVALID_PARTITIONS), the replication
factor (-1 = default 1; anything but 1 cannot be met by one broker: INVALID_REPLICATION_FACTOR), and
the configs (INVALID_CONFIG). A manual assignment needs num_partitions and replication_factor -1
(INVALID_REQUEST otherwise); each partition 0..n-1 must be placed on this node alone
(INVALID_REPLICA_ASSIGNMENT otherwise). v5+ answers with the partition count, replication factor and
every config; v7 with the topic id.

An internal topic (`__consumer_offsets`, `__transaction_state`) that does not exist yet is refused
with INVALID_REQUEST, Kafka's answer for `__cluster_metadata`: the broker creates these itself, with
the partition count and configs their coordinators need (broker/partitions/internal_topics.py).
Kafka 4.4 creates one a client asks for, with the client's count and configs.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import TYPE_CHECKING

from .. import topic_defaults
from .describe_configs import SOURCES
from ..partitions import internal_topics
from ..partitions.catalogue import ConfigEntry, check_known_in, known_in
from ...protocol.topic_names import validate_topic_name
from ..network.router import RequestContext
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from ...protocol.messages.create_topics_response import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsResponse,
)

if TYPE_CHECKING:
    from ..services import BrokerServices

API_KEY = 19
VERSIONS = (0, 7)


def _partition_count(broker: BrokerServices, topic: CreatableTopic) -> int:
    if topic.assignments:
        if topic.num_partitions != -1:
            raise KafkaError("A manual partition assignment was specified, but numPartitions was not set to -1.",
                             ErrorCode.INVALID_REQUEST)
        if topic.replication_factor != -1:
            raise KafkaError("A manual partition assignment was specified, but replicationFactor was not set to -1.",
                             ErrorCode.INVALID_REQUEST)
        indexes = sorted(a.partition_index for a in topic.assignments)
        if indexes != list(range(len(indexes))):
            raise KafkaError("partitions should be a consecutive 0-based integer sequence",
                             ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        for a in topic.assignments:
            if not a.broker_ids:
                raise KafkaError(f"The manual partition assignment includes an empty replica list for partition "
                                 f"{a.partition_index}.", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
            stray = [b for b in a.broker_ids if b != broker.node_id]
            if stray:
                raise KafkaError(f"The manual partition assignment includes broker {stray[0]}, but no such broker "
                                 f"is registered.", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
            if len(a.broker_ids) != 1:
                raise KafkaError(f"The manual partition assignment includes the broker {broker.node_id} more than "
                                 f"once for partition {a.partition_index}.", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        return len(indexes)
    count = broker.config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
    if count <= 0:
        raise KafkaError("Number of partitions was set to an invalid non-positive value.", ErrorCode.INVALID_PARTITIONS)
    rf = topic.replication_factor
    if rf == 0 or rf < -1:
        raise KafkaError("Replication factor must be larger than 0, or -1 to use the default value.",
                         ErrorCode.INVALID_REPLICATION_FACTOR)
    if rf > 1:
        raise KafkaError(f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} "
                         f"cannot be reached because only 1 broker(s) are registered or some brokers have all their log "
                         f"directories cordoned.",  # Kafka 4.4's words
                         ErrorCode.INVALID_REPLICATION_FACTOR)
    return count


def _configs(topic: CreatableTopic) -> dict[str, str]:
    out: dict[str, str] = {}
    for c in topic.configs:
        if c.value is None:
            raise KafkaError(f"Null value not supported for topic configs: {c.name}", ErrorCode.INVALID_CONFIG)
        if c.name in out:
            raise KafkaError(f"Duplicate config key {c.name}", ErrorCode.INVALID_CONFIG)
        out[c.name] = c.value
    return out


def failed_response(_ctx: RequestContext, request: CreateTopicsRequest, error: int) -> CreateTopicsResponse:
    return CreateTopicsResponse(throttle_time_ms=0, topics=[
        CreatableTopicResult(name=t.name, error_code=error, error_message=None, configs=[]) for t in request.topics])


# Each topic costs ~0.2 ms here (checks, its config entries in the answer): a turn of the event loop
# is given up every this many, so a request naming 40,000 does not hold every other client for 7 s.
YIELD_EVERY = 256


async def handle(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    broker = ctx.broker
    counts = Counter(t.name for t in request.topics)  # one pass: a request may name 100,000
    duplicates = {n for n, k in counts.items() if k > 1}
    results: list[CreatableTopicResult] = []
    broker_defaults = topic_defaults.topic_values(broker.config)
    done: set[str] = set()
    for i, topic in enumerate(request.topics):
        if i % YIELD_EVERY == YIELD_EVERY - 1:
            await asyncio.sleep(0)  # thousands of topics: the other connections' requests run meanwhile
        if topic.name in done:
            continue
        done.add(topic.name)
        # A topic that fails keeps an empty config list, as Kafka's answer does (v5+)
        result = CreatableTopicResult(name=topic.name, error_code=ErrorCode.NONE, error_message=None,
                                      num_partitions=-1, replication_factor=-1, configs=[])
        results.append(result)
        if topic.name in duplicates:
            result.error_code, result.error_message = ErrorCode.INVALID_REQUEST, "Duplicate topic name."
            continue
        try:
            validate_topic_name(topic.name)
            if topic.name in broker.catalogue.topics():
                raise KafkaError(f"Topic '{topic.name}' already exists.", ErrorCode.TOPIC_ALREADY_EXISTS)
            with internal_topics.reported(ctx, topic.name, "create_topics", partitions=topic.num_partitions,
                                          configs={c.name: c.value for c in topic.configs},
                                          validate_only=request.validate_only):
                internal_topics.check_creation(topic.name)  # before the count's checks, which Kafka's policy precedes
                count = _partition_count(broker, topic)
                configs = _configs(topic)
                check_known_in(broker.kafka_release.version, configs)
                info = await broker.catalogue.create_topic_async(topic.name, count, configs,
                                                                 validate_only=request.validate_only)
        except KafkaError as e:
            result.error_code, result.error_message = e.code, str(e)
            continue
        result.topic_id = info.topic_id
        result.num_partitions = count
        result.replication_factor = 1
        result.configs = [
            CreatableTopicConfigs(name=e.name, value=value, read_only=False,
                                  config_source=SOURCES.get(source, 0), is_sensitive=False)
            for e in sorted(known_in(broker.kafka_release.version, info.config.describe()), key=lambda e: e.name)
            for value, source in [_with_broker_default(e, broker_defaults)]
        ]
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


def _with_broker_default(entry: ConfigEntry, broker_defaults: dict[str, str]) -> tuple[str, str]:
    """A config the topic did not set, where a broker setting gives it: that value, as Kafka's
    controller answers it (STATIC_BROKER_CONFIG, whichever synonym of the chain gave it)."""
    if entry.source == "DEFAULT_CONFIG" and entry.name in broker_defaults:
        return broker_defaults[entry.name], "STATIC_BROKER_CONFIG"
    return entry.value, entry.source
