"""A scripted workload against a real broker, its truth recorded on the client side, then the job over
what the broker left on disk; every figure in the output tables is checked against that truth.

* g-classic: member a, then b (a subprocess) joins and is SIGKILLed: its session expires and a takes
  everything back; the outage the job reports matches the time from the kill to a's new assignment;
* g-848: a KIP-848 group through four epochs (c1 joins, c2 joins, c2 leaves, c1 leaves);
* g-txn: a consume-transform-produce app: a committed transaction, an aborted one, a committed one;
* g-simple: two committers hammering one partition at once (their commits share batches);
* g-idle: commits once and closes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kbroker.pipeline import job  # noqa: E402
from kbroker.tests.integration.broker_process import BrokerProcess  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

SESSION_MS, HEARTBEAT_MS = 6000, 500
TOPIC, OUT = "in", "out"

KILLED_MEMBER = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "g-classic", "client.id": "b",
                  "session.timeout.ms": %d, "heartbeat.interval.ms": %d, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "partition.assignment.strategy": "range"})
    c.subscribe(["%s"], on_assign=lambda c, ps: print("assigned", len(ps), flush=True))
    while True:
        c.poll(0.1)
""" % (SESSION_MS, HEARTBEAT_MS, TOPIC))


def classic(bootstrap: str, group: str, client: str, on_assign=None) -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": client,
                  "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "partition.assignment.strategy": "range"})
    c.subscribe([TOPIC], on_assign=on_assign or (lambda *_: None))
    return c


def new_protocol(bootstrap: str, group: str, client: str) -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": client, "group.protocol": "consumer",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.subscribe([TOPIC])
    return c


def poll_until(consumers: list[Consumer], done, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "condition not met in time"
        for c in consumers:
            c.poll(0.05)


def test_every_figure_matches_the_clients_record(spark, tmp_path) -> None:
    data = tmp_path / "data"
    truth_commits: dict[str, int] = {}
    with BrokerProcess(data, "--group-initial-rebalance-delay-ms", "0",
                       "--group-consumer-session-timeout-ms", str(SESSION_MS),
                       "--group-consumer-min-session-timeout-ms", str(SESSION_MS),
                       "--group-consumer-heartbeat-interval-ms", str(HEARTBEAT_MS),
                       "--group-consumer-min-heartbeat-interval-ms", str(HEARTBEAT_MS)) as broker:
        bs = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": bs})
        for f in admin.create_topics([NewTopic(TOPIC, 3, 1), NewTopic(OUT, 1, 1)]).values():
            f.result(30)
        producer = Producer({"bootstrap.servers": bs, "linger.ms": 2})
        for i in range(300):
            producer.produce(TOPIC, value=b"m%d" % i, partition=i % 3)
        assert producer.flush(30) == 0

        # g-classic: a, then b joins; b is killed; a gets all three partitions back
        a_assigned: list[tuple[float, int]] = []
        a = classic(bs, "g-classic", "a", on_assign=lambda c, ps: a_assigned.append((time.monotonic(), len(ps))))
        poll_until([a], lambda: a_assigned and a_assigned[-1][1] == 3)
        b = subprocess.Popen([sys.executable, "-c", KILLED_MEMBER, bs], stdout=subprocess.PIPE, text=True)
        try:
            poll_until([a], lambda: a_assigned[-1][1] < 3)  # b is in: a has fewer
            a.commit(offsets=[TopicPartition(TOPIC, p, 10 + p) for p in range(3)], asynchronous=False)
            time.sleep(1.0)
            killed_at = time.monotonic()
            b.send_signal(signal.SIGKILL)
        finally:
            b.wait(30)
        poll_until([a], lambda: a_assigned[-1][1] == 3 and a_assigned[-1][0] > killed_at, timeout=60)
        true_outage = a_assigned[-1][0] - killed_at
        a.commit(offsets=[TopicPartition(TOPIC, p, 20 + p) for p in range(3)], asynchronous=False)
        truth_commits["g-classic"] = 2

        # g-848: four epochs
        c1 = new_protocol(bs, "g-848", "c1")
        poll_until([c1], lambda: len(c1.assignment()) == 3)
        c2 = new_protocol(bs, "g-848", "c2")
        poll_until([c1, c2], lambda: len(c1.assignment()) + len(c2.assignment()) == 3 and c2.assignment())
        c1.commit(offsets=[TopicPartition(TOPIC, tp.partition, 30) for tp in c1.assignment()], asynchronous=False)
        truth_commits["g-848"] = 1
        c2.close()
        poll_until([c1], lambda: len(c1.assignment()) == 3)
        c1.close()

        # g-txn: committed, aborted, committed
        reader = classic(bs, "g-txn", "txn-reader")
        poll_until([reader], lambda: len(reader.assignment()) == 3)
        txp = Producer({"bootstrap.servers": bs, "transactional.id": "etl-1"})
        txp.init_transactions(30)
        for offset, commit in ((50, True), (80, False), (70, True)):
            txp.begin_transaction()
            txp.produce(OUT, value=b"transformed")
            txp.send_offsets_to_transaction([TopicPartition(TOPIC, p, offset) for p in range(3)],
                                            reader.consumer_group_metadata(), 30)
            txp.commit_transaction(30) if commit else txp.abort_transaction(30)
        truth_commits["g-txn"] = 2  # the committed transactions' TxnOffsetCommits

        # g-simple: two committers at once, same partition (their commits share batches)
        def hammer(name: str, base: int) -> None:
            c = Consumer({"bootstrap.servers": bs, "group.id": "g-simple", "client.id": name})
            for i in range(20):
                c.commit(offsets=[TopicPartition(TOPIC, 0, base + i)], asynchronous=False)
            c.close()

        threads = [threading.Thread(target=hammer, args=(n, base)) for n, base in (("h1", 100), ("h2", 200))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        truth_commits["g-simple"] = 40

        idle = classic(bs, "g-idle", "idle")
        poll_until([idle], lambda: len(idle.assignment()) == 3)
        idle.commit(offsets=[TopicPartition(TOPIC, p, 100) for p in range(3)], asynchronous=False)
        truth_commits["g-idle"] = 1
        idle.close()
        a.close()
        reader.close()

        groups = sorted(truth_commits)
        committed: dict[tuple[str, str, int], int] = {}
        for g in groups:
            res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)])[g].result(30)
            committed.update({(g, tp.topic, tp.partition): tp.offset for tp in res.topic_partitions if tp.offset >= 0})
        probe = Consumer({"bootstrap.servers": bs, "group.id": "probe"})
        ends = {p: probe.get_watermark_offsets(TopicPartition(TOPIC, p), 10)[1] for p in range(3)}
        probe.close()
        del producer, txp, admin
    assert committed[("g-txn", TOPIC, 0)] == 70 and committed[("g-classic", TOPIC, 2)] == 22

    res = job.run(spark, data, tmp_path / "report")
    assert res.problems == []

    def table(name):
        return spark.read.parquet(f"{res.out}/{name}").collect()

    assert {(r.group_id, r.topic, r.partition): r.committed_offset for r in table("offsets_latest")} == committed
    assert {(r.group_id, r.topic, r.partition): r.lag for r in table("lag")} == {
        k: ends[k[2]] - o for k, o in committed.items()}
    commits: dict[str, int] = {}
    for r in table("commit_rate"):
        commits[r.group_id] = commits.get(r.group_id, 0) + r.commits
    assert commits == truth_commits
    summary = {r.group_id: r for r in table("group_summary")}
    assert (summary["g-txn"].transactions_committed, summary["g-txn"].transactions_aborted) == (2, 1)
    # g-848 stopped behind (c1 committed 30 of 100 on its partitions); g-idle caught up and left
    assert {g: summary[g].status for g in ("g-848", "g-idle")} == {"g-848": "stopped", "g-idle": "empty"}

    gens = sorted((r for r in table("rebalances") if r.group_id == "g-848"), key=lambda r: r.generation)
    assert [r.group_type for r in gens] == ["consumer"] * 4
    assert [sorted(m.client_id for m in r.members) for r in gens] == [["c1"], ["c1", "c2"], ["c1"], []]
    assert [r.reason_source for r in gens] == ["broker history"] * 4

    crash = [o for o in table("outages") if o.group_id == "g-classic" and o.kind.startswith("crash")]
    assert len(crash) == 1
    assert abs(crash[0].seconds - true_outage) <= 1.5, (crash[0].seconds, true_outage)
    classic_gens = [r for r in table("rebalances") if r.group_id == "g-classic"]
    assert [r.ending for r in classic_gens].count("crash or hang") == 1
    assert summary["g-classic"].crashes == 1 and summary["g-idle"].clean_leaves == 1
    assert os.path.exists(res.report)
