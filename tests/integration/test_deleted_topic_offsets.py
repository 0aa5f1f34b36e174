"""A deleted topic's committed offsets go with it, as in Kafka 4.4 (tests/reference/ compares the two):
on one kbroker node, also after a restart (the tombstones replayed), and on `serve --nodes 3`, through
confluent-kafka (the scenario: deleted_topic_offsets.py)."""

from __future__ import annotations

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.deleted_topic_offsets import (EXPECTED, NO_OFFSET, Scenario, committed,
                                                            group_deleted_in_a_transaction)

pytest.importorskip("confluent_kafka")


def test_a_deleted_topics_offsets_are_gone_also_after_a_restart(tmp_path):
    with BrokerProcess(tmp_path / "data") as broker:
        scenario = Scenario()
        assert scenario.commit_then_delete(broker.bootstrap) == EXPECTED
        assert broker.events("deleted_topics_offsets_removed")
        broker.restart()
        assert scenario.observe(broker.bootstrap) == {k: v for k, v in EXPECTED.items() if k != "before"}


def test_a_group_deleted_during_a_transaction_keeps_none_of_its_offsets_also_after_a_restart(tmp_path):
    with BrokerProcess(tmp_path / "data") as broker:
        assert group_deleted_in_a_transaction(broker.bootstrap, "one") == [NO_OFFSET, NO_OFFSET]
        broker.restart()
        assert committed(broker.bootstrap, "gd-one", "txd-one", 2) == [NO_OFFSET, NO_OFFSET]


def test_a_deleted_topics_offsets_are_gone_on_three_nodes(tmp_path):
    with BrokerProcess(tmp_path / "data", "--nodes", "3") as broker:
        scenario = Scenario()
        assert scenario.commit_then_delete(broker.bootstrap) == EXPECTED
        broker.restart()
        assert scenario.observe(broker.bootstrap) == {k: v for k, v in EXPECTED.items() if k != "before"}


def share_states(data_dir, group: str, topic_id) -> list[tuple[int, bool]]:
    """(start offset, tombstone) of each record of the group's share-partition 0 of the topic in
    `__share_group_state`, read from the broker's segment files."""
    from kbroker.broker.coordinators.share_state import partition_for
    from kbroker.protocol.record_batch import decode_batch, iter_batches
    from kbroker.protocol.records.share_state_records import decode_share_state

    out = []
    for segment in sorted((data_dir / f"__share_group_state-{partition_for(group, topic_id, 0, 50)}").glob("*.log")):
        data = segment.read_bytes()
        for pos, _ in iter_batches(data):
            for r in decode_batch(data, pos)[1]:
                state = decode_share_state(r.key, r.value)
                if (state.group, state.topic_id, state.partition) == (group, topic_id, 0):
                    out.append((state.start_offset, state.tombstone))
    return out


def test_a_deleted_topics_share_group_state_is_tombstoned(tmp_path, capsys):
    """Kafka's share coordinator tombstones every share-partition state of a deleted topic
    (ShareCoordinatorShard.maybeCleanupShareState); so does kbroker's (a share-partition's state is keyed
    by topic id, so a topic created again never read the old one: only the log kept it)."""
    from confluent_kafka.admin import AdminClient

    from kbroker.tests.integration.test_admin_cli import cli_json
    from kbroker.tests.integration.test_share_fetch_wire import Member, acquired, produce, setup

    with BrokerProcess(tmp_path / "data", "--num-partitions", "1") as broker:
        topic, topic_id, group = setup(broker, 0)
        produce(broker, topic, 6)
        assert cli_json(capsys, "group", "reset-offsets", group, "--share", "--topic", topic, "--to-offset", "2",
                        "--execute", "-b", broker.bootstrap)[0]["new"] == 2
        member = Member(broker, group, topic, topic_id)
        assert acquired(member.fetch(max_wait_ms=5_000)) == [(2, 5, 1)]  # held in memory, under locks
        assert share_states(tmp_path / "data", group, topic_id)[-1] == (2, False)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.delete_topics([topic])[topic].result(30)
        assert share_states(tmp_path / "data", group, topic_id)[-1][1] is True  # durable before DeleteTopics answered
        assert broker.events("deleted_topics_share_states_removed")
