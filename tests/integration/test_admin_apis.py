"""The admin APIs that UIs, lag tools and kafka-*.sh call, through real admin clients (kafka-python,
confluent-kafka) and, where neither client has a call (client quotas), through our own wire codec."""

from __future__ import annotations

import time

import pytest

from kbroker.protocol.errors import ErrorCode
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire

kafka = pytest.importorskip("kafka")
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer, TopicPartition as CTopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka import KafkaAdminClient, TopicPartition  # noqa: E402

TIMEOUT = 15


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("admin-apis") / "data", "--num-partitions", "1")
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.fixture
def kp_admin(broker):  # per test: two tests restart the broker
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="admin-apis")
    yield client
    client.close()


def create(admin, name: str, partitions: int, config: dict | None = None) -> None:
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(timeout=TIMEOUT)


def produce(broker, topic: str, partition: int, count: int) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(count):
        p.produce(topic, value=b"v%d" % i, key=b"k%d" % i, partition=partition)
        p.flush(TIMEOUT)  # one batch per record, so deletion has batch boundaries to work with
    assert len(p) == 0


def test_describe_topic_partitions_pages_with_a_cursor(admin, kp_admin):
    create(admin, "dtp-a", 5)
    create(admin, "dtp-b", 3)
    seen = []
    cursor = None
    pages = 0
    while True:
        result = kp_admin.describe_topic_partitions(["dtp-b", "dtp-a"], response_partition_limit=2, cursor=cursor)
        pages += 1
        for topic in result["topics"]:
            assert topic["error_code"] == 0, topic
            seen.extend((topic["name"], p["partition_index"]) for p in topic["partitions"])
        assert pages < 10
        cursor = result.get("next_cursor")
        if not cursor:
            break
    assert seen == [("dtp-a", p) for p in range(5)] + [("dtp-b", p) for p in range(3)]
    assert pages == 4  # 2 + 2 + (1 + 1) + 2 partitions


def test_describe_topic_partitions_unknown_topic(kp_admin):
    result = kp_admin.describe_topic_partitions(["no-such-topic-dtp"])
    assert [(t["name"], t["error_code"]) for t in result["topics"]] == [
        ("no-such-topic-dtp", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]


def test_delete_records_advances_log_start_durably(broker, admin, kp_admin):
    create(admin, "delrec", 2)
    produce(broker, "delrec", 0, 10)
    # confluent-kafka
    futures = admin.delete_records([CTopicPartition("delrec", 0, 4)])
    deleted = futures[CTopicPartition("delrec", 0, 4)].result(timeout=TIMEOUT)
    assert deleted.low_watermark == 4
    # kafka-python: past the high watermark is refused; -1 means "up to the high watermark"
    with pytest.raises(kafka.errors.OffsetOutOfRangeError):
        kp_admin.delete_records({TopicPartition("delrec", 0): 11})
    result = kp_admin.delete_records({TopicPartition("delrec", 0): 7})
    assert result[TopicPartition("delrec", 0)]["low_watermark"] == 7
    # earliest offset is what kafka-delete-records.sh leaves
    low, high = _watermarks(broker, "delrec", 0)
    assert (low, high) == (7, 10)
    broker.restart()
    assert _watermarks(broker, "delrec", 0) == (7, 10)
    # the records before it are gone for a consumer too
    from confluent_kafka import Consumer, OFFSET_BEGINNING
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "delrec-reader", "enable.auto.commit": False})
    c.assign([CTopicPartition("delrec", 0, OFFSET_BEGINNING)])
    msg = None
    deadline = time.monotonic() + TIMEOUT
    while msg is None and time.monotonic() < deadline:
        msg = c.poll(0.5)
    c.close()
    assert msg is not None and msg.error() is None and msg.offset() == 7 and msg.value() == b"v7"


def _watermarks(broker, topic: str, partition: int) -> tuple[int, int]:
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wm"})
    try:
        return c.get_watermark_offsets(CTopicPartition(topic, partition), timeout=TIMEOUT)
    finally:
        c.close()


def test_delete_records_answers_a_partition_named_many_times_once(broker, admin):
    """Kafka keeps the request's partitions in a map: the last offset named wins and the partition is
    answered once (each entry was a deletion and a checkpoint fsync: 20,000 of them held every client
    20 s)."""
    from kbroker.protocol.messages.delete_records_request import (
        DeleteRecordsPartition,
        DeleteRecordsRequest,
        DeleteRecordsTopic,
    )

    create(admin, "delrec-many", 1)
    produce(broker, "delrec-many", 0, 10)
    wire = Wire(broker.bootstrap)
    entries = [DeleteRecordsPartition(0, offset) for offset in range(1, 9)] * 500 + [DeleteRecordsPartition(0, 5)]
    answer = wire.call(21, 2, DeleteRecordsRequest(topics=[DeleteRecordsTopic("delrec-many", entries)], timeout_ms=10000))
    wire.close()
    assert [(t.name, [(p.partition_index, p.low_watermark, p.error_code) for p in t.partitions])
            for t in answer.topics] == [("delrec-many", [(0, 5, ErrorCode.NONE)])]
    assert [e["log_start_offset"] for e in broker.events("records_deleted") if e["topic"] == "delrec-many"] == [5]


def test_delete_records_refuses_unknown_partitions(kp_admin):
    with pytest.raises(kafka.errors.UnknownTopicOrPartitionError):
        kp_admin.delete_records({TopicPartition("delrec-nope", 0): 1}, partition_leader_id=1)


def test_describe_log_dirs_sizes(broker, admin, kp_admin):
    create(admin, "logdirs", 2)
    produce(broker, "logdirs", 1, 3)
    result = kp_admin.describe_log_dirs({"logdirs": [0, 1]})
    dirs = result if isinstance(result, list) else [result]
    flat = repr(dirs)
    assert str(broker.data_dir.resolve()) in flat
    sizes = {}
    for d in _log_dir_entries(dirs):
        for topic in d["topics"]:
            for p in topic["partitions"]:
                sizes[(topic["name"], p["partition_index"])] = (p["partition_size"], p["offset_lag"])
    assert sizes[("logdirs", 0)] == (0, 0)
    assert sizes[("logdirs", 1)][0] > 0 and sizes[("logdirs", 1)][1] == 0


def _log_dir_entries(obj):
    """kafka-python nests its answer per broker; find the log dir dicts wherever they are."""
    if isinstance(obj, dict):
        if "log_dir" in obj and "topics" in obj:
            yield obj
        for v in obj.values():
            yield from _log_dir_entries(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _log_dir_entries(v)


def test_elect_leaders_and_reassignments(admin, kp_admin):
    create(admin, "elect", 2)
    result = kp_admin.elect_leaders(0, {"elect": [0, 1]}, raise_errors=False)
    codes = [(r.topic, p.partition_id, p.error_code) for r in result.replica_election_results for p in r.partition_result]
    assert codes == [("elect", 0, ErrorCode.ELECTION_NOT_NEEDED), ("elect", 1, ErrorCode.ELECTION_NOT_NEEDED)]
    assert kp_admin.list_partition_reassignments() == {}
    done = kp_admin.alter_partition_reassignments({TopicPartition("elect", 0): [1]})
    assert TopicPartition("elect", 0) in done
    # broker 2 does not exist
    refused = kp_admin.alter_partition_reassignments({TopicPartition("elect", 1): [1, 2]})
    assert refused[TopicPartition("elect", 1)] is kafka.errors.InvalidReplicationAssignmentError


def test_confluent_elect_leaders(admin):
    from confluent_kafka import ElectionType
    create(admin, "elect-ck", 1)
    future = admin.elect_leaders(ElectionType.PREFERRED, [CTopicPartition("elect-ck", 0)])
    result = future.result(timeout=TIMEOUT)
    (tp,) = result
    assert tp.error is None or tp.error.code() == ErrorCode.ELECTION_NOT_NEEDED


def test_kafka_3_topic_configs_are_unknown_to_kafka_4(admin):
    """Kafka 4.0 removed message.format.version and its kin; Kafka 4.4 refuses them as unknown
    (tests/reference/test_kafka_versions.py asks it) and describes none of them. `--kafka-version 3.x`
    accepts them as Kafka 3 did (tests/integration/test_kafka_versions.py)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource

    for name, value in (("message.format.version", "2.8"), ("message.downconversion.enable", "true"),
                        ("message.timestamp.difference.max.ms", "1000")):
        with pytest.raises(KafkaException, match=f"Unknown topic config name: {name}"):
            create(admin, f"old-configs-{name}", 1, {name: value})
    create(admin, "new-configs", 1)
    res = ConfigResource(ConfigResource.Type.TOPIC, "new-configs")
    assert "message.format.version" not in admin.describe_configs([res])[res].result(timeout=TIMEOUT)


# --- client quotas: neither admin client here has the calls, so our wire codec speaks them ---------------

def test_client_quotas_stored_described_and_enforced(broker, admin):
    from kbroker.protocol.messages import alter_client_quotas_request as aq
    from kbroker.protocol.messages import describe_client_quotas_request as dq

    wire = Wire(broker.bootstrap)
    entity = [aq.EntityData("client-id", "slow-producer")]
    bad = wire.call(49, 1, aq.AlterClientQuotasRequest(entries=[
        aq.EntryData(entity=entity, ops=[aq.OpData("no_such_quota", 1.0, False)])]))
    assert bad.entries[0].error_code == ErrorCode.INVALID_REQUEST
    ok = wire.call(49, 1, aq.AlterClientQuotasRequest(entries=[
        aq.EntryData(entity=entity, ops=[aq.OpData("producer_byte_rate", 1024.0, False)]),
        aq.EntryData(entity=[aq.EntityData("client-id", None)], ops=[aq.OpData("consumer_byte_rate", 2048.0, False)]),
    ]))
    assert [e.error_code for e in ok.entries] == [0, 0]

    def describe(*components, strict=False):
        r = wire.call(48, 1, dq.DescribeClientQuotasRequest(components=list(components), strict=strict))
        assert r.error_code == 0, r.error_message
        return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
                for entry in r.entries}

    everything = describe(dq.ComponentData("client-id", 2, None))
    assert everything == {(("client-id", "slow-producer"),): {"producer_byte_rate": 1024.0},
                          (("client-id", None),): {"consumer_byte_rate": 2048.0}}
    assert describe(dq.ComponentData("client-id", 0, "slow-producer")) == {
        (("client-id", "slow-producer"),): {"producer_byte_rate": 1024.0}}
    assert describe(dq.ComponentData("client-id", 1, None)) == {(("client-id", None),): {"consumer_byte_rate": 2048.0}}
    assert wire.call(48, 1, dq.DescribeClientQuotasRequest(  # Kafka's answer to an unknown entity type
        components=[dq.ComponentData("nobody", 2, None)])).error_code == ErrorCode.UNSUPPORTED_VERSION

    # Stored across a restart.
    broker.restart()
    wire = Wire(broker.bootstrap)
    r = wire.call(48, 1, dq.DescribeClientQuotasRequest(components=[], strict=False))
    assert len(r.entries) == 2

    # Enforced: a producer writing faster than 1 KiB/s is told to back off in throttle_time_ms.
    create(admin, "quota-topic", 1)
    from confluent_kafka import Producer as P
    stats = []
    p = P({"bootstrap.servers": broker.bootstrap, "client.id": "slow-producer", "linger.ms": 0,
           "statistics.interval.ms": 100, "stats_cb": stats.append})
    for i in range(20):
        p.produce("quota-topic", value=b"x" * 4096)
        p.flush(TIMEOUT)
    import json

    def max_throttle() -> int:
        return max([b["throttle"]["max"] for st in stats for b in json.loads(st)["brokers"].values()
                    if b.get("nodeid", -1) >= 0] or [0])

    deadline = time.monotonic() + TIMEOUT
    while max_throttle() == 0 and time.monotonic() < deadline:
        p.poll(0.2)
    assert max_throttle() > 0

    # Removing the quota lifts it.
    gone = wire.call(49, 1, aq.AlterClientQuotasRequest(entries=[
        aq.EntryData(entity=entity, ops=[aq.OpData("producer_byte_rate", 0.0, True)])]))
    assert gone.entries[0].error_code == 0
    assert describe(dq.ComponentData("client-id", 0, "slow-producer")) == {}


def test_confluent_describe_topics(admin):
    from confluent_kafka import TopicCollection
    create(admin, "ck-describe", 3)
    futures = admin.describe_topics(TopicCollection(["ck-describe"]))
    desc = futures["ck-describe"].result(timeout=TIMEOUT)
    assert desc.name == "ck-describe" and [p.id for p in desc.partitions] == [0, 1, 2]
    assert all(p.leader.id == 1 and [r.id for r in p.isr] == [1] for p in desc.partitions)


def test_describe_producers_through_kafka_pythons_admin(admin, kp_admin, broker):
    """kafka-python's `describe_producers` (DescribeProducers v0) sees the idempotent producer that
    wrote the partition, with its epoch and last sequence, and an empty partition has none."""
    create(admin, "producers", 2)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for i in range(5):
        p.produce("producers", b"v%d" % i, partition=0)
    assert p.flush(30) == 0
    states = kp_admin.describe_producers([TopicPartition("producers", 0), TopicPartition("producers", 1)])
    active = states[TopicPartition("producers", 0)].active_producers
    assert len(active) == 1 and active[0].producer_id >= 0 and active[0].producer_epoch == 0
    assert active[0].last_sequence == 4 and active[0].current_transaction_start_offset == -1
    assert states[TopicPartition("producers", 1)].active_producers == []


def test_client_quota_changes_past_kafkas_bound_per_request_change_nothing(broker):
    """Kafka's controller writes at most 10,000 records (quota values) per operation: a request of
    more answers POLICY_VIOLATION for every entry, ValidateOnly or not, and changes nothing; 10,000
    are applied and stored across a restart."""
    from kbroker.protocol.messages import alter_client_quotas_request as aq
    from kbroker.protocol.messages import describe_client_quotas_request as dq

    def entries(prefix: str, n: int) -> list:
        return [aq.EntryData(entity=[aq.EntityData("client-id", f"{prefix}-{i}")],
                             ops=[aq.OpData("producer_byte_rate", 1000.0 + i, False)]) for i in range(n)]

    def stored(wire: Wire, prefix: str) -> int:
        r = wire.call(48, 1, dq.DescribeClientQuotasRequest(components=[dq.ComponentData("client-id", 2, None)]))
        return sum((e.entity[0].entity_name or "").startswith(prefix + "-") for e in r.entries)

    wire = Wire(broker.bootstrap, timeout=120)
    for validate_only in (True, False):
        over = wire.call(49, 1, aq.AlterClientQuotasRequest(entries=entries("over", 10_001),
                                                            validate_only=validate_only))
        assert len(over.entries) == 10_001
        assert {(e.error_code, e.error_message) for e in over.entries} == {
            (ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")}
    assert stored(wire, "over") == 0
    within = wire.call(49, 1, aq.AlterClientQuotasRequest(entries=entries("within", 10_000)))
    assert {e.error_code for e in within.entries} == {ErrorCode.NONE}
    broker.restart()
    wire = Wire(broker.bootstrap, timeout=120)
    assert stored(wire, "within") == 10_000
    removed = wire.call(49, 1, aq.AlterClientQuotasRequest(entries=[
        aq.EntryData(entity=[aq.EntityData("client-id", f"within-{i}")], ops=[aq.OpData("producer_byte_rate", 0, True)])
        for i in range(10_000)]))
    assert {e.error_code for e in removed.entries} == {ErrorCode.NONE}
    assert stored(wire, "within") == 0
