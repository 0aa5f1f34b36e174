"""Admin operations on three kbroker processes over one real PostgreSQL (issue 44), through confluent-kafka's
AdminClient as a user runs them: CreatePartitions and DeleteTopics (the stored batches going with the
topic, and its groups' committed offsets, tombstoned by whichever node coordinates each group, a topic
created again under its name starting empty with a new id), topic configs altered on one node and
described alike by every node."""

from __future__ import annotations

import uuid

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.cluster_scenarios import create_topic
from kbroker.tests.integration.test_postgres_nodes import metadata, start_node, view, wait_for

NODES = (1, 2, 3)
TIMEOUT = 30


@pytest.fixture
def cluster(postgres, tmp_path):
    """(the nodes, a function running SQL on their database)."""
    database = postgres.create_database()
    url = postgres.url(database)
    started: dict[int, BrokerProcess] = {}
    try:
        for node in NODES:  # retention checked, and the cleaner looking, every 300 ms
            started[node] = start_node(tmp_path / f"node{node}", url, node, "--log-retention-check-interval-ms", "300",
                                       "--log-cleaner-backoff-ms", "300")
        wait_for(lambda: all(len(metadata(b).brokers) == len(NODES) for b in started.values()),
                 "every node sees the three brokers")
        yield started, lambda sql: postgres.psql(sql, database)
    finally:
        for broker in started.values():
            broker.kill()


def admin(broker: BrokerProcess):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap})


def topic_id(broker: BrokerProcess, topic: str):
    from kbroker.protocol.messages.metadata_request import MetadataRequestTopic
    from kbroker.tests.integration.wire import Wire
    from kbroker.protocol.messages.metadata_request import MetadataRequest

    wire = Wire(broker.bootstrap)
    try:
        answer = wire.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                                  allow_auto_topic_creation=False))
        return answer.topics[0].error_code, answer.topics[0].topic_id
    finally:
        wire.sock.close()


def produce(bootstrap: str, topic: str, values: dict[int, list[bytes]]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    failures: list[str] = []
    for partition, batch in values.items():
        for value in batch:
            producer.produce(topic, value, partition=partition,
                             on_delivery=lambda err, _msg: err is not None and failures.append(str(err)))
    assert producer.flush(TIMEOUT) == 0
    assert failures == []


def read_partition(bootstrap: str, topic: str, partition: int, expected: int) -> list[bytes]:
    """The values of the partition from its earliest offset, until `expected` or a quiet spell."""
    import time

    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, partition, -2)])
        got: list[bytes] = []
        deadline = time.monotonic() + (TIMEOUT if expected else 3)
        while len(got) < expected or (expected == 0 and time.monotonic() < deadline):
            assert time.monotonic() < deadline, f"{topic}-{partition}: {len(got)} of {expected} records"
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
        return got
    finally:
        consumer.close()


def watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "w"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT)
    finally:
        consumer.close()


def coordinator_of(broker: BrokerProcess, group: str) -> int:
    from kbroker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
    from kbroker.tests.integration.wire import Wire

    wire = Wire(broker.bootstrap)
    try:
        return wire.call(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[group])).coordinators[0].node_id
    finally:
        wire.sock.close()


def test_create_partitions_then_delete_and_create_again(cluster):
    from confluent_kafka.admin import NewPartitions

    from kbroker.tests.integration.deleted_topic_offsets import NO_OFFSET, commit, committed

    nodes, sql = cluster
    topic = f"grow-{uuid.uuid4().hex[:6]}"
    create_topic(nodes[1].bootstrap, topic, 2)
    wait_for(lambda: all(len(view(b, topic)[2]) == 2 for b in nodes.values()), "every node knows the topic")
    bootstrap = ",".join(b.bootstrap for b in nodes.values())
    produce(bootstrap, topic, {0: [b"a0", b"a1"], 1: [b"b0"]})

    # CreatePartitions on node 2: placed as a new topic is (RF of the topic, leaders one node further each)
    client = admin(nodes[2])  # kept: its futures fail once it is collected
    for future in client.create_partitions([NewPartitions(topic, 5)]).values():
        future.result(TIMEOUT)
    # a node's image takes the new count before it has opened the partitions it leads (Metadata meanwhile
    # shows them leaderless, as Kafka's brokers do until their metadata has the leader): wait for them
    wait_for(lambda: all(len(parts := view(b, topic)[2]) == 5 and all(p[1] >= 0 for p in parts)
                         for b in nodes.values()), "every node sees 5 partitions and their leaders")
    views = {node: view(broker, topic) for node, broker in nodes.items()}
    assert len({repr(v) for v in views.values()}) == 1, views
    parts = views[1][2]
    new = [p for p in parts if p[0] >= 2]
    assert {leader for _, leader, _, _ in new} == set(NODES)  # one further each: the three nodes lead one each
    assert all(epoch == 0 and sorted(replicas) == list(NODES) and replicas[0] == leader
               for _, leader, epoch, replicas in new), new
    assert sql(f"SELECT count(*) FROM partitions WHERE topic = '{topic}'") == "5"
    assert sql(f"SELECT num_partitions FROM topics WHERE name = '{topic}'") == "5"
    # the new partitions serve: appended through their leaders, read back from every node
    produce(bootstrap, topic, {4: [b"e0", b"e1", b"e2"], 2: [b"c0"]})
    for broker in nodes.values():
        assert read_partition(broker.bootstrap, topic, 4, 3) == [b"e0", b"e1", b"e2"]
    # a count that is not an increase is refused as on one node
    from confluent_kafka import KafkaError

    client = admin(nodes[3])
    with pytest.raises(Exception) as refused:
        client.create_partitions([NewPartitions(topic, 4)])[topic].result(TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.INVALID_PARTITIONS

    # groups with offsets of the topic, coordinated by another node than node 3, which deletes it (the
    # first node up leads every partition of __consumer_offsets here): told by its image of the database
    groups = {f"{topic}-g{i}": coordinator_of(nodes[1], f"{topic}-g{i}") for i in range(3)}
    assert set(groups.values()) - {3}, groups
    for group in groups:
        commit(bootstrap, group, {(topic, p): 2 + p for p in range(5)})
        assert committed(bootstrap, group, topic, 5) == [2, 3, 4, 5, 6]

    # DeleteTopics on node 3: the placement and the stored batches go in one transaction
    old_id = topic_id(nodes[1], topic)[1]
    assert int(sql(f"SELECT count(*) FROM batches WHERE topic = '{topic}'")) >= 4
    for future in client.delete_topics([topic], operation_timeout=TIMEOUT).values():
        future.result(TIMEOUT)
    for table, column in (("topics", "name"), ("partitions", "topic"), ("batches", "topic"),
                          ("epoch_history", "topic"), ("topic_configs", "topic")):
        assert sql(f"SELECT count(*) FROM {table} WHERE {column} = '{topic}'") == "0", table
    wait_for(lambda: all(topic_id(b, topic)[0] == 3 for b in nodes.values()),
             "every node answers UNKNOWN_TOPIC_OR_PARTITION")
    client = admin(nodes[1])
    with pytest.raises(Exception) as gone:
        client.delete_topics([topic], operation_timeout=TIMEOUT)[topic].result(TIMEOUT)
    assert gone.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    # created again under its name: another topic id, every partition empty on every node
    create_topic(nodes[2].bootstrap, topic, 5)
    wait_for(lambda: all(len(view(b, topic)[2]) == 5 and all(p[1] >= 0 for p in view(b, topic)[2])
                         for b in nodes.values()), "every node knows the new topic")
    ids = {topic_id(b, topic) for b in nodes.values()}
    assert len(ids) == 1 and next(iter(ids))[1] != old_id
    for partition in range(5):
        assert watermarks(bootstrap, topic, partition) == (0, 0)
    # every group's offsets of the old topic went with it, whichever node coordinates the group
    assert {group: committed(bootstrap, group, topic, 5) for group in groups} == {g: [NO_OFFSET] * 5 for g in groups}
    assert read_partition(bootstrap, topic, 4, 0) == []
    produce(bootstrap, topic, {4: [b"new"]})
    assert read_partition(bootstrap, topic, 4, 1) == [b"new"]
    assert watermarks(bootstrap, topic, 4) == (0, 1)


SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 5: "DEFAULT_CONFIG"}


def described(broker: BrokerProcess, topic: str) -> dict[str, tuple[str, str]]:
    """name -> (value, source) of the topic's configs, as this node answers DescribeConfigs (on the
    wire: an AdminClient sends it to whichever broker it likes)."""
    from kbroker.protocol.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
    from kbroker.tests.integration.wire import Wire

    wire = Wire(broker.bootstrap)
    try:
        answer = wire.call(32, 4, DescribeConfigsRequest(resources=[DescribeConfigsResource(
            resource_type=2, resource_name=topic, configuration_keys=None)]))
        result = answer.results[0]
        assert result.error_code == 0, result
        return {c.name: (c.value, SOURCES.get(c.config_source, str(c.config_source))) for c in result.configs}
    finally:
        wire.sock.close()


def test_topic_configs_altered_on_one_node_are_described_by_every_node(cluster):
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    nodes, sql = cluster
    topic = f"conf-{uuid.uuid4().hex[:6]}"
    create_topic(nodes[1].bootstrap, topic, 3, {"retention.ms": "600000"})
    wait_for(lambda: all(len(view(b, topic)[2]) == 3 for b in nodes.values()), "every node knows the topic")

    def everywhere(expected: dict[str, tuple[str, str]], what: str) -> None:
        wait_for(lambda: all({k: described(b, topic)[k] for k in expected} == expected for b in nodes.values()),
                 what)

    client = admin(nodes[2])
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("max.message.bytes", "1000", incremental_operation=AlterConfigOpType.SET)])
    for future in client.incremental_alter_configs([resource]).values():
        future.result(TIMEOUT)
    everywhere({"retention.ms": ("86400000", "DYNAMIC_TOPIC_CONFIG"),
                "cleanup.policy": ("delete,compact", "DYNAMIC_TOPIC_CONFIG"),
                "max.message.bytes": ("1000", "DYNAMIC_TOPIC_CONFIG"),
                "segment.ms": ("604800000", "DEFAULT_CONFIG")}, "every node describes the new overrides")
    assert sql(f"SELECT string_agg(key || '=' || value, ' ' ORDER BY key) FROM topic_configs "
               f"WHERE topic = '{topic}'") == \
        "cleanup.policy=delete,compact max.message.bytes=1000 retention.ms=86400000"

    # the leaders enforce the new limit, whichever node they are
    producer = Producer({"bootstrap.servers": ",".join(b.bootstrap for b in nodes.values()), "acks": "all",
                         "retries": 0})
    errors: list[int] = []
    for partition in range(3):
        producer.produce(topic, b"x" * 5000, partition=partition,
                         on_delivery=lambda err, msg: errors.append((msg.partition(), err.code() if err else 0)))
    producer.flush(TIMEOUT)
    assert sorted(errors) == [(p, KafkaError.MSG_SIZE_TOO_LARGE) for p in range(3)], (errors, view(nodes[1], topic))

    # refused as on one node, and nothing changed: an invalid value, a validate-only change
    client = admin(nodes[3])
    bad = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("segment.ms", "100000", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception) as refused:
        next(iter(client.incremental_alter_configs([bad]).values())).result(TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
    dry = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("segment.ms", "100000", incremental_operation=AlterConfigOpType.SET)])
    next(iter(client.incremental_alter_configs([dry], validate_only=True).values())).result(TIMEOUT)
    # AlterConfigs (the legacy request) replaces the overrides whole
    whole = ConfigResource("topic", topic, set_config={"retention.bytes": "1048576"})
    with pytest.warns(DeprecationWarning):  # confluent-kafka's word on the legacy request
        altered = client.alter_configs([whole])
    next(iter(altered.values())).result(TIMEOUT)
    everywhere({"retention.bytes": ("1048576", "DYNAMIC_TOPIC_CONFIG"),
                "retention.ms": ("604800000", "DEFAULT_CONFIG"),
                "cleanup.policy": ("delete", "DEFAULT_CONFIG"),
                "segment.ms": ("604800000", "DEFAULT_CONFIG")}, "every node describes the replaced overrides")
    assert sql(f"SELECT string_agg(key || '=' || value, ' ') FROM topic_configs WHERE topic = '{topic}'") == \
        "retention.bytes=1048576"


def test_delete_records_moves_the_stored_log_start_and_survives_a_failover(cluster):
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

    nodes, sql = cluster
    topic = f"trim-{uuid.uuid4().hex[:6]}"
    create_topic(nodes[1].bootstrap, topic, 2)
    wait_for(lambda: all(len(view(b, topic)[2]) == 2 and all(p[1] >= 0 for p in view(b, topic)[2])
                         for b in nodes.values()), "every node knows the topic's leaders")
    bootstrap = ",".join(b.bootstrap for b in nodes.values())
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(10):  # ten batches
        producer.produce(topic, f"v{i}".encode(), partition=0)
        assert producer.flush(TIMEOUT) == 0
    assert sql(f"SELECT count(*) FROM batches WHERE topic = '{topic}' AND partition = 0") == "10"

    client = admin(nodes[2])
    deleted = client.delete_records([TopicPartition(topic, 0, 4)])
    assert next(iter(deleted.values())).result(TIMEOUT).low_watermark == 4
    # stored, fenced as appends are, before the answer: the row's log start, the batches below it gone
    assert sql(f"SELECT log_start FROM partitions WHERE topic = '{topic}' AND partition = 0") == "4"
    assert sql(f"SELECT min(base_offset) || ' ' || count(*) FROM batches WHERE topic = '{topic}' "
               f"AND partition = 0") == "4 6"
    assert watermarks(bootstrap, topic, 0) == (4, 10)
    assert read_partition(bootstrap, topic, 0, 6) == [f"v{i}".encode() for i in range(4, 10)]
    with pytest.raises(Exception) as past:  # past the high watermark: refused as on one node
        next(iter(client.delete_records([TopicPartition(topic, 0, 11)]).values())).result(TIMEOUT)
    assert past.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE
    # a log start never moves back
    assert next(iter(client.delete_records([TopicPartition(topic, 0, 2)]).values())).result(TIMEOUT).low_watermark == 4

    # the leader killed: the next leader opens the partition at the stored log start
    leader = view(nodes[1], topic)[2][0][1]
    nodes[leader].kill()
    others = [b for n, b in nodes.items() if n != leader]
    wait_for(lambda: all(view(b, topic)[2][0][1] not in (leader, -1) for b in others), "the partition moved")
    bootstrap = ",".join(b.bootstrap for b in others)
    assert watermarks(bootstrap, topic, 0) == (4, 10)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 2)])  # below the log start: out of range, reset to it
        first = None
        import time
        deadline = time.monotonic() + TIMEOUT
        while first is None:
            assert time.monotonic() < deadline, "nothing consumed"
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                first = message
        assert (first.offset(), first.value()) == (4, b"v4")
    finally:
        consumer.close()
    # and it moves the log start on from there
    client = admin(others[0])
    assert next(iter(client.delete_records([TopicPartition(topic, 0, 10)]).values())).result(TIMEOUT).low_watermark == 10
    assert sql(f"SELECT log_start FROM partitions WHERE topic = '{topic}' AND partition = 0") == "10"
    assert sql(f"SELECT count(*) FROM batches WHERE topic = '{topic}' AND partition = 0") == "0"
    assert watermarks(bootstrap, topic, 0) == (10, 10)


def test_retention_by_time_and_by_size_moves_the_log_start_on_the_leader(cluster):
    import time

    from confluent_kafka import Producer

    nodes, sql = cluster
    aged, sized = f"aged-{uuid.uuid4().hex[:6]}", f"sized-{uuid.uuid4().hex[:6]}"
    create_topic(nodes[1].bootstrap, aged, 1, {"retention.ms": "3600000"})
    create_topic(nodes[1].bootstrap, sized, 1, {"retention.bytes": "2000"})
    wait_for(lambda: all(view(b, t)[2] and view(b, t)[2][0][1] >= 0 for b in nodes.values() for t in (aged, sized)),
             "every node knows the topics' leaders")
    bootstrap = ",".join(b.bootstrap for b in nodes.values())
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    now_ms = int(time.time() * 1000)
    for i in range(5):  # three batches two hours old, then two of now
        producer.produce(aged, f"a{i}".encode(), partition=0, timestamp=now_ms - 7_200_000 if i < 3 else now_ms)
        assert producer.flush(TIMEOUT) == 0
    for i in range(5):  # five batches of about 1,070 bytes: the log stays at least 2,000 without the first three
        producer.produce(sized, bytes([65 + i]) * 1000, partition=0)
        assert producer.flush(TIMEOUT) == 0
    for topic, start, kept in ((aged, 3, 2), (sized, 3, 2)):
        wait_for(lambda: watermarks(bootstrap, topic, 0) == (start, 5), f"{topic} starts at {start}")
        assert sql(f"SELECT log_start FROM partitions WHERE topic = '{topic}'") == str(start)
        assert sql(f"SELECT count(*) FROM batches WHERE topic = '{topic}'") == str(kept)
    assert read_partition(bootstrap, aged, 0, 2) == [b"a3", b"a4"]
    time.sleep(1)  # more checks: what is kept stays
    assert watermarks(bootstrap, aged, 0) == (3, 5) and watermarks(bootstrap, sized, 0) == (3, 5)


def broker_config(broker: BrokerProcess, resource: str, key: str) -> tuple[str | None, int]:
    """(value, source) of one dynamic broker config as this node describes the BROKER resource."""
    from kbroker.protocol.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
    from kbroker.tests.integration.wire import Wire

    wire = Wire(broker.bootstrap)
    try:
        answer = wire.call(32, 4, DescribeConfigsRequest(resources=[DescribeConfigsResource(
            resource_type=4, resource_name=resource, configuration_keys=[key])]))
        result = answer.results[0]
        assert result.error_code == 0, result
        found = [c for c in result.configs if c.name == key]
        return (found[0].value, found[0].config_source) if found else (None, -1)
    finally:
        wire.sock.close()


DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC_OR_DEFAULT = 2, 3, (4, 5)


def test_dynamic_broker_configs_are_the_clusters_and_survive_a_restart(cluster):
    from confluent_kafka import KafkaError

    nodes, sql = cluster
    topic = f"plain-{uuid.uuid4().hex[:6]}"
    create_topic(nodes[1].bootstrap, topic, 1)

    def alter(node: int, resource: str, key: str, value: str) -> tuple[int, str | None]:
        """IncrementalAlterConfigs SET on a BROKER resource, sent to `node` as Kafka's Admin sends it
        (on the wire: confluent-kafka refuses the cluster-wide resource's empty name)."""
        from kbroker.protocol.messages.incremental_alter_configs_request import (
            AlterableConfig, AlterConfigsResource, IncrementalAlterConfigsRequest)
        from kbroker.tests.integration.wire import Wire

        wire = Wire(nodes[node].bootstrap)
        try:
            answer = wire.call(44, 1, IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
                resource_type=4, resource_name=resource, configs=[AlterableConfig(key, 0, value)])]))
            return answer.responses[0].error_code, answer.responses[0].error_message
        finally:
            wire.sock.close()

    # the cluster-wide default, set through node 1: every node reports it, its topics' defaults follow
    assert alter(1, "", "log.retention.ms", "123456789") == (0, None)
    wait_for(lambda: all(broker_config(b, str(n), "log.retention.ms") == ("123456789", DYNAMIC_DEFAULT)
                         for n, b in nodes.items()), "every node reports the cluster-wide default")
    wait_for(lambda: all(described(b, topic)["retention.ms"][0] == "123456789" for b in nodes.values()),
             "every node's topics take the new default")
    assert all(broker_config(b, "", "log.retention.ms") == ("123456789", DYNAMIC_DEFAULT) for b in nodes.values())
    # node 2's own layer: over the default there, not elsewhere
    assert alter(2, "2", "log.retention.ms", "222222") == (0, None)
    assert broker_config(nodes[2], "2", "log.retention.ms") == ("222222", DYNAMIC_BROKER)
    assert broker_config(nodes[1], "1", "log.retention.ms") == ("123456789", DYNAMIC_DEFAULT)
    assert sql("SELECT string_agg(node_id || ':' || key || '=' || value, ' ' ORDER BY node_id) "
               "FROM broker_configs") == "-1:log.retention.ms=123456789 2:log.retention.ms=222222"
    # checked as on one node: nothing kept
    assert alter(3, "", "log.retention.ms", "soon") == \
        (KafkaError.INVALID_REQUEST, "Invalid value soon for configuration log.retention.ms: Not a number of type LONG")
    assert alter(3, "3", "log.dirs", "/elsewhere") == \
        (KafkaError.INVALID_REQUEST, "Cannot update these configs dynamically: [log.dirs]")
    assert sql("SELECT count(*) FROM broker_configs") == "2"

    # node 2 restarted (SIGTERM, then the same command): its layer and the default are the database's
    nodes[2].restart()
    assert broker_config(nodes[2], "2", "log.retention.ms") == ("222222", DYNAMIC_BROKER)
    assert broker_config(nodes[2], "", "log.retention.ms") == ("123456789", DYNAMIC_DEFAULT)
    assert described(nodes[2], topic)["retention.ms"][0] == "222222"


def test_compaction_by_the_leader_keeps_each_keys_newest_through_a_failover(cluster):
    from confluent_kafka import Consumer, Producer, TopicPartition

    from kbroker.coordinator.partitioning import partition_for

    nodes, sql = cluster
    topic, group = f"keyed-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    # any dirt is cleanable (min.cleanable.dirty.ratio): with Kafka's 0.5, a cleaning that ran while the
    # records were still being produced left the last ones below the ratio, uncleaned for good
    create_topic(nodes[1].bootstrap, topic, 1, {"cleanup.policy": "compact", "delete.retention.ms": "0",
                                                "min.cleanable.dirty.ratio": "0.01"})
    wait_for(lambda: all(view(b, topic)[2] and view(b, topic)[2][0][1] >= 0 for b in nodes.values()),
             "every node knows the topic's leader")
    bootstrap = ",".join(b.bootstrap for b in nodes.values())
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for round_ in range(4):  # twelve batches, each key's newest in the last round
        for key in ("k0", "k1", "k2"):
            producer.produce(topic, f"{key}-{round_}".encode(), key=key.encode(), partition=0)
            assert producer.flush(TIMEOUT) == 0
    producer.produce(topic, None, key=b"k1", partition=0)  # a tombstone, dropped at once (delete.retention.ms 0)
    assert producer.flush(TIMEOUT) == 0
    # the group commits 30 times: its __consumer_offsets partition keeps the newest commit only
    committer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        for offset in range(1, 31):
            committer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        committer.close()
    offsets_partition = partition_for(group, 50)

    def stored(name: str, partition: int) -> str:
        return sql(f"SELECT string_agg(base_offset || '-' || last_offset, ' ' ORDER BY base_offset) FROM batches "
                   f"WHERE topic = '{name}' AND partition = {partition}")

    wait_for(lambda: stored(topic, 0) == "9-9 11-11", "the topic compacted to each key's newest")
    wait_for(lambda: len(stored("__consumer_offsets", offsets_partition).split()) < 5,
             "the group's offsets partition compacted")

    def newest() -> list[tuple[int, bytes, bytes | None]]:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                             "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition(topic, 0, -2)])
            got: list[tuple[int, bytes, bytes | None]] = []
            import time
            deadline = time.monotonic() + TIMEOUT
            while len(got) < 2:
                assert time.monotonic() < deadline, got
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    got.append((message.offset(), message.key(), message.value()))
            return got
        finally:
            consumer.close()

    assert newest() == [(9, b"k0", b"k0-3"), (11, b"k2", b"k2-3")]
    assert watermarks(bootstrap, topic, 0) == (0, 13)
    # the topic's leader and the group's coordinator killed: the next ones read the compacted rows
    doomed = {view(nodes[1], topic)[2][0][1],
              {p: leader for p, leader, _, _ in view(nodes[1], "__consumer_offsets")[2]}[offsets_partition]}
    for node in doomed:
        nodes[node].kill()
    alive = [b for n, b in nodes.items() if n not in doomed]
    bootstrap = ",".join(b.bootstrap for b in alive)
    wait_for(lambda: view(alive[0], topic)[2][0][1] not in doomed | {-1} and
             view(alive[0], "__consumer_offsets")[2][offsets_partition][1] not in doomed | {-1},
             "the topic's partition and the group's offsets partition moved")
    assert newest() == [(9, b"k0", b"k0-3"), (11, b"k2", b"k2-3")]
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        assert [tp.offset for tp in reader.committed([TopicPartition(topic, 0)], timeout=TIMEOUT)] == [30]
    finally:
        reader.close()
