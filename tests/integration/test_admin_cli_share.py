"""`kbroker group list|describe|history|delete` of a share group (KIP-932) against a real broker: the
group listed with its type, described with its members (who may share a partition) and its
share-partitions' start offsets and lags (DescribeShareGroupOffsets, what kafka-share-groups.sh shows),
its membership changes in the rebalance history, and deleted once empty. The members are real
ShareGroupHeartbeat / ShareFetch / ShareAcknowledge clients over sockets (test_share_fetch_wire's)."""

from __future__ import annotations

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.test_admin_cli import cli, cli_json
from kbroker.tests.integration.test_share_fetch_wire import Member, acquired, produce, setup

ACCEPT = 1


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    admin_port = free_port()
    with BrokerProcess(tmp_path_factory.mktemp("admin-share") / "data", "--metrics-listen",
                       f"127.0.0.1:{admin_port}", "--num-partitions", "1") as b:
        b.admin_url = f"http://127.0.0.1:{admin_port}"
        yield b


def test_a_share_group_is_listed_described_and_deleted(broker, capsys):
    topic, topic_id, group = setup(broker, 0)
    a, b = Member(broker, group, topic, topic_id), Member(broker, group, topic, topic_id)
    assert acquired(a.fetch()) == [] and acquired(b.fetch()) == []
    produce(broker, topic, 10)
    assert acquired(a.fetch(max_records=4, max_wait_ms=5_000)) == [(0, 3, 1)]
    assert [p.error_code for t in a.acknowledge([(0, 3, [ACCEPT])]).responses for p in t.partitions] == [0]
    bs = ("-b", broker.bootstrap)
    listed = {g["group"]: g for g in cli_json(capsys, "group", "list", *bs)}
    assert listed[group]["protocol_type"] == "share" and listed[group]["state"] == "Stable", listed[group]
    described = cli_json(capsys, "group", "describe", group, *bs)
    assert (described["state"], described["protocol_type"], described["protocol"]) == ("Stable", "share", "simple")
    assert sorted(m["member_id"] for m in described["members"]) == sorted([a.id, b.id])
    assert all(m["assignment"] == [f"{topic}-0"] for m in described["members"])  # both share the one partition
    # 0-3 accepted: the persisted start is 0 (one write behind, as Kafka's), 4-9 not delivered for good
    assert described["partitions"] == [{"topic": topic, "partition": 0, "start": 0, "log_end": 10, "lag": 6,
                                        "members": ",".join(sorted([a.id, b.id]))}]
    assert described["total_lag"] == 6
    code, out, _ = cli(capsys, "group", "describe", group, *bs)
    assert code == 0 and "TOPIC PARTITION START LOG_END LAG MEMBERS" in [" ".join(line.split()) for line in out.splitlines()]

    assert a.wire.call(76, 1, _leave(group, a.id)).error_code == 0
    history = cli_json(capsys, "group", "history", group, "--admin-url", broker.admin_url)
    rows = [(r["group_type"], r["reason"], r["members_in"], r["members_out"], r["member_count"])
            for r in history["rebalances"]]
    assert rows == [("share", "member joined", [a.id], [], 1), ("share", "member joined", [b.id], [], 2),
                    ("share", "member left", [], [a.id], 1)], history

    code, out, err = cli(capsys, "group", "delete", group, *bs)
    assert code == 1 and "NON_EMPTY_GROUP" in out + err, (out, err)
    assert b.wire.call(76, 1, _leave(group, b.id)).error_code == 0
    assert cli_json(capsys, "group", "delete", group, *bs) == [{"group": group, "deleted": True}]
    code, _, err = cli(capsys, "group", "describe", group, *bs)
    assert code == 1 and "does not exist" in err, err


def _leave(group: str, member_id: str):
    from kbroker.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest

    return ShareGroupHeartbeatRequest(group_id=group, member_id=member_id, member_epoch=-1, rack_id=None,
                                      subscribed_topic_names=None)


def test_a_share_groups_offsets_are_reset_and_deleted_only_while_it_is_empty(broker, capsys):
    """`group reset-offsets` and `delete-offsets` of a share group go through AlterShareGroupOffsets and
    DeleteShareGroupOffsets, as kafka-share-groups.sh's: refused while a member is in the group, then
    the plan (nothing changed), the new start a member fetches from, and the state forgotten."""
    topic, topic_id, group = setup(broker, 0)
    a = Member(broker, group, topic, topic_id)
    assert acquired(a.fetch()) == []
    produce(broker, topic, 10)
    assert acquired(a.fetch(max_wait_ms=5_000)) == [(0, 9, 1)]
    assert [p.error_code for t in a.acknowledge([(0, 9, [ACCEPT])]).responses for p in t.partitions] == [0]
    bs = ("-b", broker.bootstrap)
    code, out, err = cli(capsys, "group", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute", *bs)
    assert code == 1 and f"Share group '{group}' is not empty." in err, (out, err)
    code, out, err = cli(capsys, "group", "delete-offsets", group, "--topic", topic, *bs)
    assert code == 1 and "NON_EMPTY_GROUP" in err, (out, err)

    assert a.wire.call(76, 1, _leave(group, a.id)).error_code == 0
    assert a.acknowledge([], epoch=-1).error_code == 0
    start = cli_json(capsys, "group", "describe", group, *bs)["partitions"][0]["start"]
    plan = cli_json(capsys, "group", "reset-offsets", group, "--topic", topic, "--to-offset", "4", *bs)
    assert plan == [{"topic": topic, "partition": 0, "previous": start, "new": 4}], plan
    assert cli_json(capsys, "group", "describe", group, *bs)["partitions"][0]["start"] == start  # only a plan
    done = cli_json(capsys, "group", "reset-offsets", group, "--topic", topic, "--to-offset", "4", "--execute", *bs)
    assert done == plan
    assert cli_json(capsys, "group", "describe", group, *bs)["partitions"][0]["start"] == 4
    b = Member(broker, group, topic, topic_id)
    assert acquired(b.fetch(max_wait_ms=5_000)) == [(4, 9, 1)]  # delivered again from the new start
    assert b.wire.call(76, 1, _leave(group, b.id)).error_code == 0
    assert b.acknowledge([], epoch=-1).error_code == 0

    assert cli_json(capsys, "group", "delete-offsets", group, "--topic", topic, *bs) == [
        {"group": group, "topic": topic, "deleted": True}]
    assert cli_json(capsys, "group", "describe", group, *bs)["partitions"] == []  # no share-partition state left


def test_a_share_group_that_does_not_exist_yet_is_given_its_start(broker, capsys):
    """`--share`: the group does not exist, so nothing tells its type; Kafka 4.4 sets the state (and
    makes the group), and its first member fetches from there, not from share.auto.offset.reset's latest."""
    topic, topic_id, group = setup(broker, 0)
    produce(broker, topic, 6)
    bs = ("-b", broker.bootstrap)
    assert cli_json(capsys, "group", "reset-offsets", group, "--share", "--topic", topic, "--to-offset", "2",
                    "--execute", *bs) == [{"topic": topic, "partition": 0, "previous": None, "new": 2}]
    a = Member(broker, group, topic, topic_id)
    assert acquired(a.fetch(max_wait_ms=5_000)) == [(2, 5, 1)]
