"""Real clients against a real kbroker, then the pipeline over what it left on disk.

Several consumer groups commit, a member joins and one leaves (two rebalances), the groups end empty;
the committed offsets are read back with OffsetFetch while the broker runs. After a clean stop, the
job's `offsets_latest` must equal those answers, `lag` must be end offset minus committed offset, and
every generation a client was handed must appear in `rebalances`, with the broker log's reason.
"""

from __future__ import annotations

import struct
import time

import pytest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kbroker.pipeline import job  # noqa: E402
from kbroker.tests.integration.broker_process import BrokerProcess  # noqa: E402

pytestmark = pytest.mark.slow


def client_generation(consumer: Consumer) -> int:
    """The generation librdkafka holds, from its serialized consumer group metadata ("CGMDv2:" then the
    generation id as a native int32)."""
    blob = consumer.consumer_group_metadata()
    assert blob[:7] == b"CGMDv2:", blob[:16]
    return struct.unpack_from("=i", blob, 7)[0]


class Member:
    def __init__(self, bootstrap: str, group: str, topics: list[str], name: str) -> None:
        self.name = name
        self.generations: list[int] = []
        self.assigned: list[tuple[str, int]] = []
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
            "partition.assignment.strategy": "range",
        })
        self.consumer.subscribe(topics, on_assign=self._on_assign)
        self.consumed = 0

    def _on_assign(self, consumer, partitions) -> None:
        self.assigned = sorted((p.topic, p.partition) for p in partitions)
        self.generations.append(client_generation(consumer))

    def commit(self, **kw) -> None:
        try:
            self.consumer.commit(asynchronous=False, **kw)
        except ck.KafkaException as exc:
            if exc.args[0].code() != ck.KafkaError._NO_OFFSET:  # nothing consumed since the last commit
                raise

    def poll(self, limit: int = 1000, timeout: float = 0.05) -> int:
        got = 0
        for _ in range(limit):
            msg = self.consumer.poll(timeout)
            if msg is None:
                break
            if msg.error() is None:
                got += 1
        self.consumed += got
        return got


def poll_until(members: list[Member], condition, timeout: float = 60.0, budget: int = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, [(m.name, m.assigned, m.generations) for m in members]
        for m in members:
            m.poll(budget)


def test_pipeline_matches_what_the_live_broker_answered(spark, tmp_path) -> None:
    data = tmp_path / "data"
    with BrokerProcess(data, "--group-initial-rebalance-delay-ms", "0") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.create_topics([NewTopic("orders", 3, 1), NewTopic("clicks", 2, 1)]).values():
            f.result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "compression.type": "lz4"})

        def produce(topic: str, n: int, partitions: int) -> None:
            for i in range(n):
                # librdkafka sends a batch uncompressed when lz4 would make it bigger (a lone tiny
                # record would), so the values are padded to make every batch worth compressing
                producer.produce(topic, value=b"v%d" % i + b"." * 64, key=b"k%d" % i, partition=i % partitions)
            assert producer.flush(30) == 0

        produce("orders", 300, 3)
        produce("clicks", 120, 2)

        # g-orders: a, then b joins (rebalance), then a leaves (rebalance); commits in every generation.
        a = Member(broker.bootstrap, "g-orders", ["orders"], "a")
        poll_until([a], lambda: len(a.assigned) == 3 and a.consumed >= 40)
        a.commit()
        b = Member(broker.bootstrap, "g-orders", ["orders"], "b")
        poll_until([a, b], lambda: a.assigned and b.assigned and len(a.assigned) + len(b.assigned) == 3
                   and len(a.generations) >= 2)
        a.poll(50)
        b.poll(50)
        a.commit()
        b.commit()
        a.consumer.close()
        poll_until([b], lambda: len(b.assigned) == 3)
        poll_until([b], lambda: b.poll(20) == 0)
        b.commit()

        # g-clicks: commits, then an explicit rewind (the compacted view must keep the newest commit).
        c = Member(broker.bootstrap, "g-clicks", ["clicks"], "c")
        poll_until([c], lambda: len(c.assigned) == 2 and c.consumed >= 120)
        c.commit()
        c.commit(offsets=[TopicPartition("clicks", 0, 7)])

        # g-both: two topics, a partial read.
        d = Member(broker.bootstrap, "g-both", ["orders", "clicks"], "d")
        poll_until([d], lambda: len(d.assigned) == 5 and d.consumed >= 10)
        d.commit()

        produce("orders", 60, 3)  # lag for everyone
        for m in (b, c, d):
            m.consumer.close()  # LeaveGroup: each group ends empty, one more generation

        groups = ["g-orders", "g-clicks", "g-both"]
        fetched: dict[tuple[str, str, int], int] = {}
        from confluent_kafka import ConsumerGroupTopicPartitions

        for group in groups:
            result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
            for tp in result.topic_partitions:
                if tp.offset >= 0:
                    fetched[(group, tp.topic, tp.partition)] = tp.offset
        probe = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "probe"})
        ends = {(t, p): probe.get_watermark_offsets(TopicPartition(t, p), 10)[1]
                for t, n in (("orders", 3), ("clicks", 2)) for p in range(n)}
        probe.close()
        seen = {"g-orders": set(a.generations) | set(b.generations), "g-clicks": set(c.generations),
                "g-both": set(d.generations)}
        log_path = broker.log_paths[-1]
        # No client may outlive the broker: librdkafka would retry its port and log every failure for
        # as long as the job below runs.
        del producer, admin
    # the broker is stopped here (cleanly); the data directory is what it left

    assert fetched[("g-clicks", "clicks", 0)] == 7
    assert all(seen.values()) and len(seen["g-orders"]) >= 2
    result = job.run(spark, data, tmp_path / "report", broker_log=log_path)
    assert result.problems == []

    latest = {(r.group_id, r.topic, r.partition): r.committed_offset
              for r in spark.read.parquet(f"{result.out}/offsets_latest").collect()}
    assert latest == fetched

    lag = {(r.group_id, r.topic, r.partition): (r.log_end_offset, r.lag)
           for r in spark.read.parquet(f"{result.out}/lag").collect()}
    assert lag == {key: (ends[key[1:]], ends[key[1:]] - offset) for key, offset in fetched.items()}

    rebalances = spark.read.parquet(f"{result.out}/rebalances").collect()
    by_group: dict[str, dict[int, object]] = {}
    for r in rebalances:
        by_group.setdefault(r.group_id, {})[r.generation] = r
    for group, generations in seen.items():
        assert generations <= set(by_group[group]), (group, generations, sorted(by_group[group]))
        for gen in generations:
            row = by_group[group][gen]
            assert row.in_offsets_log and row.member_count >= 1
            assert row.reason_source == "broker log" and row.reason
    # the groups end empty: the last generation has no members
    for group in groups:
        last = by_group[group][max(by_group[group])]
        assert last.member_count == 0
    orders_gens = [by_group["g-orders"][g] for g in sorted(seen["g-orders"])]
    assert {m.client_id for row in orders_gens for m in row.members} == {"a", "b"}

    commits = spark.read.parquet(f"{result.out}/commit_rate").groupBy("group_id").sum("commits").collect()
    assert {r.group_id for r in commits} == set(groups)
    topics = {(r.topic, r.partition): r for r in spark.read.parquet(f"{result.out}/topics").collect()}
    assert sum(topics[("orders", p)].messages for p in range(3)) == 360
    assert {tuple(topics[("orders", p)].compression) for p in range(3)} == {("lz4",)}
