"""The cleaner's checkpoint over PostgreSQL (issue 44): where a leader's last compaction run ended (the
dirty part's start, Kafka's cleaner-offset-checkpoint) is stored in `partitions.cleaned_to` with the
run's rewrites, so the next leader's cleaner does not take the whole partition as dirty and clean it
again: its first run's dirty section starts where the last leader's ended (the `partition_compacted`
line, each run's, as Kafka's cleaner logs the dirty section of each log it cleaned)."""

from __future__ import annotations

import uuid

from kbroker.tests.integration.cluster_scenarios import create_topic
from kbroker.tests.integration.test_postgres_admin import TIMEOUT, cluster  # noqa: F401 - the fixture
from kbroker.tests.integration.test_postgres_nodes import view, wait_for


def test_a_new_leaders_cleaner_starts_where_the_last_ones_ended(cluster):  # noqa: F811 - the fixture
    from confluent_kafka import Producer

    nodes, sql = cluster
    topic = f"checkpoint-{uuid.uuid4().hex[:6]}"
    # any dirt is cleanable, so the leader's runs reach the log end (see test_postgres_admin's compaction test)
    create_topic(nodes[1].bootstrap, topic, 1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
    wait_for(lambda: all(view(b, topic)[2] and view(b, topic)[2][0][1] >= 0 for b in nodes.values()),
             "every node knows the topic's leader")
    first = view(nodes[1], topic)[2][0][1]
    producer = Producer({"bootstrap.servers": ",".join(b.bootstrap for b in nodes.values()), "acks": "all",
                         "enable.idempotence": True})

    def produce(rounds: range) -> None:
        for round_ in rounds:
            for key in ("k0", "k1", "k2"):
                producer.produce(topic, f"{key}-{round_}".encode(), key=key.encode(), partition=0)
                assert producer.flush(TIMEOUT) == 0

    produce(range(10))  # thirty batches of one record, offsets 0-29
    row = f"SELECT log_end || ' ' || cleaned_to FROM partitions WHERE topic = '{topic}'"
    wait_for(lambda: sql(row) == "30 30", "the leader's cleaner reached the log end, its checkpoint stored")
    assert sql(f"SELECT string_agg(base_offset::text, ' ' ORDER BY base_offset) FROM batches "
               f"WHERE topic = '{topic}'") == "27 28 29"
    runs = nodes[first].events("partition_compacted")
    assert any(r["topic"] == topic and r["cleaned_to"] == 30 for r in runs), runs

    # the leader killed: the next one opens the partition at the stored checkpoint ...
    nodes[first].kill()
    alive = [n for n in nodes if n != first]
    wait_for(lambda: view(nodes[alive[0]], topic)[2][0][1] in alive, "the partition moved to a live node")
    second = view(nodes[alive[0]], topic)[2][0][1]
    wait_for(lambda: any(e["topic"] == topic for e in nodes[second].events("partition_opened")),
             "the new leader opened the partition")
    opened = [e for e in nodes[second].events("partition_opened") if e["topic"] == topic]
    assert opened[-1]["cleaned_to"] == 30, opened
    # ... and its cleaner's first run, once there is dirt, cleans from there, not from the log start
    produce(range(10, 12))  # offsets 30-35
    wait_for(lambda: any(r["topic"] == topic for r in nodes[second].events("partition_compacted")),
             "the new leader's cleaner ran")
    ran = [r for r in nodes[second].events("partition_compacted") if r["topic"] == topic]
    assert ran[0]["dirty_from"] == 30, ran
    wait_for(lambda: sql(row) == "36 36", "the new leader's checkpoint stored")
    assert sql(f"SELECT string_agg(base_offset::text, ' ' ORDER BY base_offset) FROM batches "
               f"WHERE topic = '{topic}'") == "33 34 35"
