"""`kbroker topic create|list|describe|alter|delete`: plain functions over the Kafka protocol,
returning rows (lists of dicts) for the table or JSON printer."""

from __future__ import annotations

from ..protocol.messages.create_partitions_request import CreatePartitionsRequest, CreatePartitionsTopic
from ..protocol.messages.create_topics_request import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from ..protocol.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from ..protocol.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from ..protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from ..protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from ..protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic

from typing import Any

from .client import Admin, AdminError, error_name

TOPIC_RESOURCE = 2
LATEST, EARLIEST = -1, -2


def parse_configs(items: list[str] | None) -> dict[str, str]:
    out = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise AdminError(f"config {item!r} is not NAME=VALUE")
        out[name] = value
    return out


def metadata(admin: Admin, topics: list[str] | None):
    request = MetadataRequest(
        topics=None if topics is None else [MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=False,
    )
    return admin.conn.request(3, request)


def list_topics(admin: Admin, include_internal: bool = False) -> list[dict]:
    resp = metadata(admin, None)
    return [
        {"topic": t.name, "partitions": len(t.partitions), "internal": t.is_internal}
        for t in sorted(resp.topics, key=lambda t: t.name or "")
        if include_internal or not t.is_internal
    ]


def create_topic(admin: Admin, name: str, partitions: int, replication_factor: int,
                 configs: dict[str, str]) -> list[dict]:
    request = CreateTopicsRequest(
        topics=[CreatableTopic(name=name, num_partitions=partitions, replication_factor=replication_factor,
                               configs=[CreatableTopicConfig(k, v) for k, v in configs.items()])],
        timeout_ms=int(admin.timeout * 1000),
    )
    result = admin.conn.request(19, request).topics[0]
    if result.error_code:
        raise AdminError(f"topic {name}: {error_name(result.error_code)}: {result.error_message or ''}".rstrip(": "))
    count = getattr(result, "num_partitions", -1)  # v5+: what the broker made of -1 (its num.partitions)
    return [{"topic": name, "partitions": count if count and count > 0 else partitions, "created": True}]


def delete_topics(admin: Admin, names: list[str]) -> list[dict]:
    conn = admin.conn
    version = conn.version_for(20)
    request = DeleteTopicsRequest(timeout_ms=int(admin.timeout * 1000))
    if version >= 6:
        request.topics = [DeleteTopicState(name=n) for n in names]
    else:
        request.topic_names = list(names)
    rows = []
    for r in conn.request(20, request, version).responses:  # one answer per topic: each deleted or not
        rows.append({"topic": r.name, "deleted": True} if not r.error_code else
                    {"topic": r.name, "deleted": False, "error": error_name(r.error_code)})
    return rows


def describe_topic(admin: Admin, name: str) -> dict:
    resp = metadata(admin, [name])
    topic = resp.topics[0]
    if topic.error_code:
        raise AdminError(f"topic {name}: {error_name(topic.error_code)}")
    ends = log_offsets(admin, {name: [p.partition_index for p in topic.partitions]}, LATEST)
    starts = log_offsets(admin, {name: [p.partition_index for p in topic.partitions]}, EARLIEST)
    partitions = [
        {"partition": p.partition_index, "leader": p.leader_id, "replicas": list(p.replica_nodes),
         "isr": list(p.isr_nodes), "offline": list(p.offline_replicas), "log_start": starts.get((name, p.partition_index)),
         "log_end": ends.get((name, p.partition_index))}
        for p in sorted(topic.partitions, key=lambda p: p.partition_index)
    ]
    configs = describe_configs(admin, name)
    return {"topic": name, "topic_id": str(topic.topic_id), "internal": topic.is_internal,
            "partitions": partitions, "configs": {c: v for c, (v, _) in configs.items()},
            "config_sources": {c: source for c, (_, source) in configs.items()},
            "overrides": sorted(c for c, (_, source) in configs.items() if source == "DYNAMIC_TOPIC_CONFIG")}


# Kafka's ConfigSource ids
CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
                  4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
                  7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}


def describe_configs(admin: Admin, name: str) -> dict[str, tuple[str | None, str]]:
    """Each config of the topic: (value, Kafka's source name: DYNAMIC_TOPIC_CONFIG when set on the
    topic, STATIC_BROKER_CONFIG from the broker's settings, DEFAULT_CONFIG Kafka's default)."""
    request = DescribeConfigsRequest(resources=[DescribeConfigsResource(TOPIC_RESOURCE, name, None)])
    result = admin.conn.request(32, request).results[0]
    if result.error_code:
        raise AdminError(f"topic {name}: {error_name(result.error_code)}")
    return {c.name: (c.value, CONFIG_SOURCES.get(c.config_source, str(c.config_source)))
            for c in sorted(result.configs, key=lambda c: c.name)}


def alter_topic(admin: Admin, name: str, partitions: int | None, set_configs: dict[str, str],
                delete_configs: list[str]) -> list[dict]:
    rows = []
    if partitions is not None:
        request = CreatePartitionsRequest(topics=[CreatePartitionsTopic(name=name, count=partitions, assignments=None)],
                                          timeout_ms=int(admin.timeout * 1000))
        result = admin.conn.request(37, request).results[0]
        if result.error_code:
            raise AdminError(f"topic {name}: {error_name(result.error_code)}: {result.error_message or ''}".rstrip(": "))
        rows.append({"topic": name, "change": f"partitions -> {partitions}"})
    if set_configs or delete_configs:
        configs = [AlterableConfig(k, 0, v) for k, v in set_configs.items()]  # 0 = SET
        configs += [AlterableConfig(k, 1, None) for k in delete_configs]       # 1 = DELETE
        alter = IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(TOPIC_RESOURCE, name, configs)])
        result = admin.conn.request(44, alter).responses[0]
        if result.error_code:
            raise AdminError(f"topic {name}: {error_name(result.error_code)}: {result.error_message or ''}".rstrip(": "))
        rows += [{"topic": name, "change": f"{k}={v}"} for k, v in set_configs.items()]
        rows += [{"topic": name, "change": f"{k} deleted"} for k in delete_configs]
    if not rows:
        raise AdminError(f"topic {name}: nothing to alter (give --partitions, --config or --delete-config)")
    return rows


def log_offsets(admin: Admin, partitions: dict[str, list[int]], timestamp: int) -> dict[tuple[str, int], int]:
    """ListOffsets for every partition: LATEST (-1), EARLIEST (-2) or a timestamp in ms."""
    if not partitions:
        return {}
    md = metadata(admin, list(partitions))
    if len(md.brokers) <= 1:  # one broker: it leads everything
        return _log_offsets(admin.conn, partitions, timestamp)
    # several brokers: each partition's offsets come from its leader, as Kafka's admin client asks
    address = {b.node_id: f"{b.host}:{b.port}" for b in md.brokers}
    leaders = {(t.name, p.partition_index): p.leader_id for t in md.topics for p in t.partitions}
    by_leader: dict[int, dict[str, list[int]]] = {}
    for t, ps in partitions.items():
        for p in ps:
            by_leader.setdefault(leaders.get((t, p), -1), {}).setdefault(t, []).append(p)
    out: dict[tuple[str, int], int] = {}
    for leader, wanted in by_leader.items():
        if leader not in address:
            raise AdminError(f"{wanted}: no leader available")
        out.update(_log_offsets(admin.connection_to(address[leader]), wanted, timestamp))
    return out


def _log_offsets(conn: Any, partitions: dict[str, list[int]], timestamp: int) -> dict[tuple[str, int], int]:
    request = ListOffsetsRequest(replica_id=-1, topics=[
        ListOffsetsTopic(name=t, partitions=[ListOffsetsPartition(partition_index=p, timestamp=timestamp) for p in ps])
        for t, ps in partitions.items()
    ])
    out = {}
    for topic in conn.request(2, request).topics:
        for p in topic.partitions:
            if p.error_code:
                raise AdminError(f"topic {topic.name} partition {p.partition_index}: {error_name(p.error_code)}")
            out[(topic.name, p.partition_index)] = p.offset
    return out


def partitions_of(admin: Admin, topics: list[str]) -> dict[str, list[int]]:
    resp = metadata(admin, topics)
    out = {}
    for t in resp.topics:
        if t.error_code:
            raise AdminError(f"topic {t.name}: {error_name(t.error_code)}")
        out[t.name] = sorted(p.partition_index for p in t.partitions)
    return out
