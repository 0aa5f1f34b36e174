"""Fault injection against a real broker process: damage written to segments and to `__consumer_offsets`
while the broker is stopped (cleanly and with kill -9), then restart, produce, fetch and count.

Each test names the defect of issue 10 it reproduces; before the fixes each failed (acknowledged records
lost after the next crash, damaged batches served with error 0, one bad batch stalling 50 - p groups)."""

from __future__ import annotations

import pytest

from kbroker.coordinator.partitioning import partition_for
from kbroker.tests.faults.damage import (
    CORRUPT_MESSAGE,
    commit,
    committed,
    cut,
    damage_length,
    fetch,
    read_partition,
    rot,
    segments,
    stored_batches,
)
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.timeout(240)


def produce(broker: BrokerProcess, topic: str, values: list[bytes], **conf) -> list[bytes]:
    acked: list[bytes] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 2,
                         "batch.num.messages": 20, **conf})
    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=lambda err, msg: err is None and acked.append(msg.value()))
        producer.poll(0)
    assert producer.flush(60) == 0
    return acked


def values(prefix: str, n: int, size: int = 100) -> list[bytes]:
    return [(b"%s-%06d-" % (prefix.encode(), i)).ljust(size, b".") for i in range(n)]


@pytest.mark.parametrize("stop", ["clean", "kill"])
def test_cut_active_segment_never_loses_what_is_acknowledged_after_restart(tmp_path, stop: str) -> None:
    """Section 1: a segment cut mid-batch while stopped; appends must not land behind the partial batch."""
    broker = BrokerProcess(tmp_path / "data")
    try:
        before = produce(broker, "cut", values("a", 2000))
        broker.stop() if stop == "clean" else broker.kill()
        [file] = segments(broker.data_dir, "cut", 0)
        batches = stored_batches(file)
        victim = batches[len(batches) // 2]
        cut(file, victim.position + 20)  # mid-batch: the index now points past the end
        broker.start()
        [truncated] = broker.events("log_truncated_on_recovery", start=2)
        assert truncated["level"] == "warning" and truncated["position"] == victim.position
        survivors = before[: victim.base_offset]
        after = produce(broker, "cut", values("b", 500))
        assert len(after) == 500
        wire = Wire(broker.bootstrap)
        got, corrupt = read_partition(wire, "cut", 0)
        assert [v for _, v in got] == survivors + after and not corrupt
        wire.close()
        broker.kill()  # the crash that used to destroy everything acknowledged since the restart
        broker.start()
        wire = Wire(broker.bootstrap)
        got, corrupt = read_partition(wire, "cut", 0)
        assert [v for _, v in got] == survivors + after and not corrupt
        if stop == "clean":  # the cut offsets are not handed out again
            assert got[len(survivors)][0] == len(before)
        wire.close()
    finally:
        broker.kill()


def create_topic(broker: BrokerProcess, name: str, partitions: int = 1, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=configs)])[name].result(30)


def test_damaged_batches_are_answered_corrupt_and_the_rest_stays_readable(tmp_path) -> None:
    """Section 3: rot (bad CRC) and a damaged length field in old segments, after a clean stop (the
    indexes are intact, so nothing rescans them): Fetch answers CORRUPT_MESSAGE at the damage, never
    error 0 with bad bytes or an empty answer below the high watermark, and everything else is read."""
    broker = BrokerProcess(tmp_path / "data")
    try:
        create_topic(broker, "rot", **{"segment.bytes": str(1024 * 1024)})
        acked = produce(broker, "rot", values("r", 14000, 200))  # ~3 MB: three or more segments
        assert len(acked) == 14000
        broker.stop()
        files = segments(broker.data_dir, "rot", 0)
        assert len(files) >= 3, "1 MiB segments must have rolled"
        rotten = stored_batches(files[0])[100]
        bad_length = stored_batches(files[1])[50]
        rot(files[0], rotten)
        damage_length(files[1], bad_length)
        broker.start()
        wire = Wire(broker.bootstrap)
        # a fetch that starts before the damage gets the good batches before it, with error 0
        error, _, got = fetch(wire, "rot", 0, rotten.base_offset - 40, max_bytes=1 << 20)
        assert error == 0 and got and got[-1][0] == rotten.base_offset - 1
        error, high, got = fetch(wire, "rot", 0, rotten.base_offset)
        assert (error, got) == (CORRUPT_MESSAGE, [])
        error, _, _ = fetch(wire, "rot", 0, bad_length.base_offset)
        assert error == CORRUPT_MESSAGE
        events = broker.events("corrupt_batch_on_read", start=2)
        assert {(e["file"], e["position"]) for e in events} >= {(str(files[0]), rotten.position),
                                                                 (str(files[1]), bad_length.position)}
        assert all(e["level"] == "error" for e in events)
        got, corrupt = read_partition(wire, "rot", 0)
        readable = {o for o, _ in got}
        assert set(range(rotten.base_offset, rotten.last_offset + 1)) <= set(corrupt)
        assert bad_length.base_offset in corrupt
        # nothing served is wrong, and all but the damaged batches (and, behind the damaged length,
        # the batches up to the next index entry) are still readable
        assert all(acked[o] == v for o, v in got)
        assert len(readable) >= len(acked) - 200 and max(readable) == len(acked) - 1
        wire.close()
    finally:
        broker.kill()


def test_damaged_consumer_offsets_batch_affects_only_its_own_commits(tmp_path) -> None:
    """Section 2: a damaged batch in one __consumer_offsets partition used to end the single load task,
    leaving every group on that partition and all later ones in COORDINATOR_LOAD_IN_PROGRESS forever."""
    broker = BrokerProcess(tmp_path / "data", "--num-partitions", "1")
    try:
        create_topic(broker, "orders")
        wire = Wire(broker.bootstrap)
        groups = [f"group-{i}" for i in range(120)]
        assert committed(wire, groups[0], "orders", 0)[0] == 0  # the coordinator has loaded
        for i, group in enumerate(groups):
            assert commit(wire, group, "orders", 0, 1000 + i) == 0
        wire.close()
        broker.stop()
        by_partition: dict[int, list[str]] = {}
        for group in groups:
            by_partition.setdefault(partition_for(group, 50), []).append(group)
        # the earliest partition holding two or more groups: damage the first group's commit only
        p = min(q for q, gs in by_partition.items() if len(gs) >= 2)
        victim, survivor = by_partition[p][0], by_partition[p][1]
        [file] = segments(broker.data_dir, "__consumer_offsets", p)
        first = stored_batches(file)[0]
        rot(file, first)
        broker.start()
        wire = Wire(broker.bootstrap)
        for i, group in enumerate(groups):
            error, offset = committed(wire, group, "orders", 0)
            assert error == 0, f"{group} on partition {partition_for(group, 50)} answers {error}"
            expected = -1 if group == victim else 1000 + i
            assert offset == expected, group
        skipped = broker.events("offsets_batch_skipped", start=2)
        assert [(e["partition"], e["level"]) for e in skipped] == [(p, "error")]
        assert any(victim in lost and "orders-0" in lost for lost in skipped[0]["lost"])
        assert survivor not in str(skipped[0]["lost"])
        # and the partition takes new commits after the damaged batch, which survive a crash
        assert commit(wire, victim, "orders", 0, 7) == 0
        wire.close()
        broker.kill()
        broker.start()
        wire = Wire(broker.bootstrap)
        assert committed(wire, victim, "orders", 0) == (0, 7)
        assert committed(wire, survivor, "orders", 0)[1] == 1000 + groups.index(survivor)
        wire.close()
    finally:
        broker.kill()


def test_damaged_length_in_the_active_segment_costs_only_that_stretch(tmp_path) -> None:
    """Sections 1 and 3 together: a damaged length field in the middle of the active segment after a
    clean stop. Recovery must not cut the thousands of acknowledged records behind it (it walks past the
    damage through the old index), new records land after the last valid batch, and a later kill -9
    keeps them all."""
    broker = BrokerProcess(tmp_path / "data")
    try:
        acked = produce(broker, "mid", values("m", 3000))
        broker.stop()
        [file] = segments(broker.data_dir, "mid", 0)
        batches = stored_batches(file)
        victim = batches[len(batches) // 3]
        damage_length(file, victim)
        broker.start()
        assert not broker.events("log_truncated_on_recovery", start=2)
        [kept] = broker.events("corrupt_batch_on_recovery", start=2)
        assert kept["level"] == "error" and kept["position"] == victim.position
        after = produce(broker, "mid", values("n", 500))
        broker.kill()
        broker.start()
        wire = Wire(broker.bootstrap)
        got, corrupt = read_partition(wire, "mid", 0)
        wire.close()
        served = [v for _, v in got]
        assert served[-500:] == after
        assert all(acked[o] == v for o, v in got[:-500])
        assert victim.base_offset in corrupt
        lost = len(acked) - (len(served) - 500)
        assert lost <= 200, f"{lost} acknowledged records behind the damage are unreadable"
    finally:
        broker.kill()
