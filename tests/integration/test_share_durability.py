"""Share-partition state survives the broker (KIP-932's share coordinator, `__share_group_state`):
after a clean restart and after a kill -9, every acknowledged record stays acknowledged (never
delivered again) and every record that was acquired but not acknowledged is delivered again, against
a real broker process on the same data directory."""

from __future__ import annotations

import time

import pytest

from kbroker.protocol.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kbroker.protocol.errors import ErrorCode as E
from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.test_share_fetch_wire import Member, acquired, produce, setup
from kbroker.tests.integration.wire import Wire

ACCEPT, RELEASE, REJECT = 1, 2, 3


def joined(broker, group, topic, topic_id) -> Member:
    """A member, once the restarted broker has loaded the group's coordinator partition (until then
    the heartbeat is answered COORDINATOR_LOAD_IN_PROGRESS, which clients retry)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return Member(broker, group, topic, topic_id)
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.mark.parametrize("clean", [True, False], ids=["restart", "kill-9"])
def test_acknowledgements_survive_and_acquired_records_come_back(tmp_path, clean):
    broker = BrokerProcess(tmp_path / "data", "--num-partitions", "1")
    try:
        topic, topic_id, group = setup(broker, 0)
        a = Member(broker, group, topic, topic_id)
        assert acquired(a.fetch()) == []  # the share-partition starts at the (empty) log's end
        produce(broker, topic, 12)
        assert acquired(a.fetch(max_records=8, max_wait_ms=5_000)) == [(0, 7, 1)]
        # accept 0-2, reject 3, release 4: answered, so durable; 5-7 stay acquired, 8-11 never delivered
        ack = a.acknowledge([(0, 4, [ACCEPT, ACCEPT, ACCEPT, REJECT, RELEASE])])
        assert [p.error_code for t in ack.responses for p in t.partitions] == [0]
        broker.restart(clean=clean)
        b = joined(broker, group, topic, topic_id)
        got = acquired(b.fetch(max_records=100, max_wait_ms=5_000))
        offsets = sorted(o for first, last, _ in got for o in range(first, last + 1))
        assert offsets == list(range(4, 12)), got  # nothing acknowledged or rejected comes back
        counts = {o: count for first, last, count in got for o in range(first, last + 1)}
        assert counts[4] == 2  # released once, delivered again
        assert all(counts[o] == 1 for o in range(8, 12))
        # ...and the acknowledgements made after the restart survive the next one too
        assert [p.error_code for t in b.acknowledge([(4, 11, [ACCEPT])]).responses for p in t.partitions] == [0]
        broker.restart(clean=clean)
        c = joined(broker, group, topic, topic_id)
        assert acquired(c.fetch(max_records=100, max_wait_ms=500)) == []
        produce(broker, topic, 1)
        assert acquired(c.fetch(max_records=100, max_wait_ms=5_000)) == [(12, 12, 1)]
    finally:
        broker.kill()


def test_share_group_state_topic_is_internal_with_kafkas_partitions(tmp_path):
    with BrokerProcess(tmp_path / "data", "--num-partitions", "1") as broker:
        topic, topic_id, group = setup(broker, 0)
        Member(broker, group, topic, topic_id).fetch()
        w = Wire(broker.bootstrap)
        meta = w.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name="__share_group_state")],
                                             allow_auto_topic_creation=False)).topics[0]
        configs = w.call(32, 4, DescribeConfigsRequest(resources=[DescribeConfigsResource(
            resource_type=2, resource_name="__share_group_state", configuration_keys=None)],
            include_synonyms=False, include_documentation=False)).results[0].configs
        w.close()
        assert meta.error_code == 0 and meta.is_internal and len(meta.partitions) == 50
        # what Kafka 4.4's DescribeConfigs of its __share_group_state says it was created with
        assert {c.name: c.value for c in configs if c.config_source == 1} == {
            "cleanup.policy": "delete", "retention.ms": "-1", "compression.type": "producer",
            "segment.bytes": "104857600", "min.insync.replicas": "1"}


def state_log_bounds(broker, partition: int) -> tuple[int, int]:
    """(log start, log end) of one partition of __share_group_state, as ListOffsets answers them."""
    from kbroker.protocol.messages.list_offsets_request import (
        ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
    )

    w = Wire(broker.bootstrap)
    try:
        def at(timestamp: int) -> int:
            answer = w.call(2, 7, ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[ListOffsetsTopic(
                name="__share_group_state", partitions=[ListOffsetsPartition(
                    partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)])]))
            p = answer.topics[0].partitions[0]
            assert p.error_code == 0, p
            return p.offset
        return at(-2), at(-1)
    finally:
        w.close()


@pytest.mark.parametrize("clean", [True, False], ids=["restart", "kill-9"])
def test_share_group_state_is_pruned_below_the_oldest_current_snapshot(tmp_path, clean):
    from kbroker.broker.coordinators.share_state import partition_for

    broker = BrokerProcess(tmp_path / "data", "--num-partitions", "1")
    try:
        topic, topic_id, group = setup(broker, 0)
        a = Member(broker, group, topic, topic_id)
        assert acquired(a.fetch()) == []
        produce(broker, topic, 40)
        assert acquired(a.fetch(max_records=40, max_wait_ms=5_000)) == [(0, 39, 1)]
        for offset in range(30):  # one acknowledgement at a time: a whole snapshot each
            ack = a.acknowledge([(offset, offset, [ACCEPT])])
            assert [p.error_code for t in ack.responses for p in t.partitions] == [0]
        start, end = state_log_bounds(broker, partition_for(group, topic_id, 0, 50))
        assert end >= 31 and start == end - 1, (start, end)  # only the latest snapshot of the one key is kept
        broker.restart(clean=clean)
        b = joined(broker, group, topic, topic_id)
        got = acquired(b.fetch(max_records=100, max_wait_ms=5_000))
        assert sorted(o for first, last, _ in got for o in range(first, last + 1)) == list(range(30, 40)), got
        assert state_log_bounds(broker, partition_for(group, topic_id, 0, 50))[0] >= start  # the start stayed moved
    finally:
        broker.kill()


def test_share_group_state_pruning_keeps_the_oldest_current_snapshot_of_a_partition(tmp_path):
    """Two share-partitions whose states share a partition of __share_group_state: one busy, one
    idle. The idle one's snapshot is still current, so the log start stays at or below it and a
    restart restores both."""
    from kbroker.broker.coordinators.share_state import partition_for

    broker = BrokerProcess(tmp_path / "data", "--num-partitions", "1")
    try:
        topic, topic_id, busy_group = setup(broker, 0)
        state_partition = partition_for(busy_group, topic_id, 0, 50)
        idle_group = next(g for g in (f"idle-{i}" for i in range(10_000))
                          if partition_for(g, topic_id, 0, 50) == state_partition)
        busy, idle = Member(broker, busy_group, topic, topic_id), Member(broker, idle_group, topic, topic_id)
        assert acquired(busy.fetch()) == [] and acquired(idle.fetch()) == []
        produce(broker, topic, 40)
        assert acquired(idle.fetch(max_records=40, max_wait_ms=5_000)) == [(0, 39, 1)]
        assert [p.error_code for t in idle.acknowledge([(0, 4, [ACCEPT])]).responses for p in t.partitions] == [0]
        _, idle_end = state_log_bounds(broker, state_partition)  # the idle group's last snapshot: idle_end - 1
        assert acquired(busy.fetch(max_records=40, max_wait_ms=5_000)) == [(0, 39, 1)]
        for offset in range(30):
            assert [p.error_code for t in busy.acknowledge([(offset, offset, [ACCEPT])]).responses
                    for p in t.partitions] == [0]
        start, end = state_log_bounds(broker, state_partition)
        assert end >= idle_end + 30 and start == idle_end - 1, (start, idle_end, end)
        broker.restart(clean=True)
        for group, first in ((idle_group, 5), (busy_group, 30)):
            got = acquired(joined(broker, group, topic, topic_id).fetch(max_records=100, max_wait_ms=5_000))
            assert sorted(o for f, last, _ in got for o in range(f, last + 1)) == list(range(first, 40)), (group, got)
    finally:
        broker.kill()


def _admin_get(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.read().decode()


def _loaded_share_state_partitions(admin_url: str) -> float | None:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(_admin_get(admin_url + "/metrics")):
        if family.name == "kbroker_share_state_partitions_loaded":
            return family.samples[0].value
    return None


def test_share_state_is_replayed_by_the_coordinator_runtime_at_start(tmp_path):
    """After a restart, `__share_group_state` is replayed by the share coordinator's loader while the
    broker serves, before any share group request (it used to be replayed inside the first ShareFetch,
    on the event loop): every partition loaded, the replay logged, and the state it holds used."""
    admin = free_port()
    broker = BrokerProcess(tmp_path / "data", "--num-partitions", "1", "--metrics-listen", f"127.0.0.1:{admin}")
    admin_url = f"http://127.0.0.1:{admin}"
    try:
        topic, topic_id, group = setup(broker, 0)
        a = Member(broker, group, topic, topic_id)
        assert acquired(a.fetch()) == []
        produce(broker, topic, 6)
        assert acquired(a.fetch(max_records=6, max_wait_ms=5_000)) == [(0, 5, 1)]
        assert [p.error_code for t in a.acknowledge([(0, 2, [ACCEPT])]).responses for p in t.partitions] == [0]
        assert _loaded_share_state_partitions(admin_url) == 50  # made with the first fetch: loaded empty
        broker.restart()
        deadline = time.monotonic() + 30
        while _loaded_share_state_partitions(admin_url) != 50:  # no share request has been made
            assert time.monotonic() < deadline, broker.dump_log()
            time.sleep(0.1)
        loaded = broker.events("share_state_loaded", broker.starts)  # this start's log
        assert loaded and loaded[-1]["records"] >= 1 and loaded[-1]["share_partitions"] == 1, loaded
        b = joined(broker, group, topic, topic_id)
        assert acquired(b.fetch(max_records=100, max_wait_ms=5_000)) == [(3, 5, 2)]  # 0-2 stay acknowledged
    finally:
        broker.kill()


@pytest.fixture
def controlled(tmp_path):
    """A broker with its test controls (the injected failure of a coordinator's append)."""
    admin = free_port()
    broker = BrokerProcess(tmp_path / "data", "--num-partitions", "1", "--metrics-listen", f"127.0.0.1:{admin}",
                           "--test-controls")
    broker.admin_url = f"http://127.0.0.1:{admin}"
    broker.token = (broker.data_dir / "test-controls.token").read_text().strip()
    try:
        yield broker
    finally:
        broker.kill()


def fail_next_state_write(broker, group: str, topic_id, error: str) -> None:
    """The next append to the share-partition's `__share_group_state` partition fails with `error`."""
    from kbroker.broker.coordinators.share_state import partition_for
    from kbroker.tests.integration.test_metrics_and_controls import http

    state_partition = partition_for(group, topic_id, 0, 50)
    status, body = http(broker, f"/v1/test/topics/__share_group_state/partitions/{state_partition}/fail", "POST",
                        {"api": "Append", "count": 1, "error": error})
    assert status == 200, body


def test_a_failed_state_write_rolls_the_acknowledgement_back(controlled):
    """The write of an acknowledgement's state fails: the member is answered as Kafka answers (the
    coordinator's NOT_ENOUGH_REPLICAS is COORDINATOR_NOT_AVAILABLE to it) and the records are its
    own again, acquired under their locks, so it may acknowledge them again; nothing of the failed
    change is in memory (another member gets none of them) nor on disk (a restart redelivers them)."""
    broker = controlled
    topic, topic_id, group = setup(broker, 0)
    a, b = Member(broker, group, topic, topic_id), Member(broker, group, topic, topic_id)
    assert acquired(a.fetch()) == [] and acquired(b.fetch()) == []
    produce(broker, topic, 6)
    assert acquired(a.fetch(max_records=4, max_wait_ms=5_000)) == [(0, 3, 1)]
    fail_next_state_write(broker, group, topic_id, "NOT_ENOUGH_REPLICAS")
    ack = a.acknowledge([(0, 3, [ACCEPT, ACCEPT, REJECT, RELEASE])])
    assert [p.error_code for t in ack.responses for p in t.partitions] == [E.COORDINATOR_NOT_AVAILABLE]
    # nothing was released: the other member gets only what was never acquired
    assert acquired(b.fetch(max_records=100, max_wait_ms=500)) == [(4, 5, 1)]
    broker.restart()  # nothing of the failed acknowledgement was persisted either
    c = joined(broker, group, topic, topic_id)
    assert sorted(o for first, last, _ in acquired(c.fetch(max_records=100, max_wait_ms=5_000))
                  for o in range(first, last + 1)) == [0, 1, 2, 3, 4, 5]


def test_an_acknowledgement_rolled_back_can_be_made_again(controlled):
    """Piggybacked on a ShareFetch, an acknowledgement whose state write fails (MESSAGE_TOO_LARGE:
    UNKNOWN_SERVER_ERROR to the member, as Kafka's persister answers it) leaves the records acquired
    by the member, who acknowledges them again; that one is durable."""
    broker = controlled
    topic, topic_id, group = setup(broker, 0)
    a = Member(broker, group, topic, topic_id)
    assert acquired(a.fetch()) == []
    produce(broker, topic, 4)
    assert acquired(a.fetch(max_records=4, max_wait_ms=5_000)) == [(0, 3, 1)]
    fail_next_state_write(broker, group, topic_id, "MESSAGE_TOO_LARGE")
    failed = a.fetch(acks=[(0, 3, [ACCEPT])], max_records=100)
    assert [p.acknowledge_error_code for t in failed.responses for p in t.partitions] == [E.UNKNOWN_SERVER_ERROR]
    again = a.acknowledge([(0, 3, [ACCEPT])])
    assert [p.error_code for t in again.responses for p in t.partitions] == [0]
    broker.restart()
    b = joined(broker, group, topic, topic_id)
    assert acquired(b.fetch(max_records=100, max_wait_ms=500)) == []
