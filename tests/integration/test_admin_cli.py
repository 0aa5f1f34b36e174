"""`kbroker topic|group ...` against a real broker with real consumer groups (confluent-kafka), the
rebalance history, and `group describe` of a group caught mid-rebalance.

The CLI runs in-process (`kbroker.broker.cli.main`) but talks the Kafka protocol over a socket
like any other client; the lag figures it prints are checked against what the test produced and
committed itself.
"""

from __future__ import annotations

import json
import urllib.request
import uuid

import pytest

from kbroker.broker.cli import main
from kbroker.protocol.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.wire import Wire

confluent_kafka = pytest.importorskip("confluent_kafka")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    admin_port = free_port()
    with BrokerProcess(tmp_path_factory.mktemp("admin") / "data", "--metrics-listen", f"127.0.0.1:{admin_port}",
                       "--test-controls", "--profile", "test") as b:
        b.admin_url = f"http://127.0.0.1:{admin_port}"
        yield b


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def cli_json(capsys, *argv: str):
    code, out, err = cli(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def produce(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition, n in per_partition.items():
        for i in range(n):
            p.produce(topic, value=b"v%d" % i, key=b"k%d" % i, partition=partition)
    assert p.flush(30) == 0


def consumer(bootstrap: str, group: str, client_id: str, **extra) -> confluent_kafka.Consumer:
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id,
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 3000,
            "heartbeat.interval.ms": 300, **extra}
    return confluent_kafka.Consumer(conf)


def consume(c: confluent_kafka.Consumer, count: int, max_polls: int = 600) -> dict[int, int]:
    """Poll until `count` messages arrived; messages per partition."""
    seen: dict[int, int] = {}
    for _ in range(max_polls):
        m = c.poll(0.1)
        if m is not None and m.error() is None:
            seen[m.partition()] = seen.get(m.partition(), 0) + 1
            if sum(seen.values()) == count:
                return seen
    raise AssertionError(f"only {sum(seen.values())} of {count} messages arrived")


def test_topic_commands(broker, capsys) -> None:
    b = ("-b", broker.bootstrap)
    assert cli_json(capsys, "topic", "create", "cli-t", "-p", "2", "-c", "retention.ms=60000", *b) == [
        {"topic": "cli-t", "partitions": 2, "created": True}]
    assert {"topic": "cli-t", "partitions": 2, "internal": False} in cli_json(capsys, "topic", "list", *b)
    assert cli_json(capsys, "topic", "alter", "cli-t", "-p", "3", "-c", "retention.ms=120000", *b)
    described = cli_json(capsys, "topic", "describe", "cli-t", *b)
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    assert described["configs"]["retention.ms"] == "120000"
    code, out, _ = cli(capsys, "topic", "describe", "cli-t", *b)
    assert code == 0 and "PARTITION" in out and "retention.ms" in out and "None" not in out
    code, _, err = cli(capsys, "topic", "create", "cli-t", *b)
    assert code == 1 and "topic cli-t: TOPIC_ALREADY_EXISTS" in err and len(err.strip().splitlines()) == 1
    assert cli_json(capsys, "topic", "delete", "cli-t", *b) == [{"topic": "cli-t", "deleted": True}]
    code, _, err = cli(capsys, "topic", "describe", "cli-t", *b)
    assert code == 1 and "topic cli-t: UNKNOWN_TOPIC_OR_PARTITION" in err and len(err.strip().splitlines()) == 1


def test_errors_name_the_broker_and_a_silent_broker_times_out(broker, capsys) -> None:
    code, _, err = cli(capsys, "group", "wait", "no-such-group", "--members", "1", "--timeout", "3",
                       "-b", broker.bootstrap)
    assert code == 1 and "group no-such-group does not exist after 3 s" in err
    code, _, err = cli(capsys, "group", "list", "-b", f"127.0.0.1:{free_port()}")
    assert code == 1 and "cannot connect" in err and len(err.strip().splitlines()) == 1
    import socket

    with socket.socket() as silent:  # accepts, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = "127.0.0.1:%d" % silent.getsockname()[1]
        code, _, err = cli(capsys, "topic", "list", "-b", address, "--timeout", "0.5")
    assert code == 1 and f"broker {address} did not answer within 0.5 s" in err


def test_group_describe_lag_reset_delete_with_a_real_consumer(broker, capsys) -> None:
    b = ("-b", broker.bootstrap)
    topic, group = f"lag-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    cli_json(capsys, "topic", "create", topic, "-p", "3", *b)
    produced = {0: 10, 1: 7, 2: 4}
    produce(broker.bootstrap, topic, produced)
    c = consumer(broker.bootstrap, group, "lag-client")
    c.subscribe([topic])
    assert consume(c, 21) == produced
    committed = {0: 5, 1: 7, 2: 1}
    c.commit(offsets=[confluent_kafka.TopicPartition(topic, p, o) for p, o in committed.items()], asynchronous=False)

    desc = cli_json(capsys, "group", "describe", group, *b)
    assert desc["state"] == "Stable" and desc["protocol_type"] == "consumer"
    [member] = desc["members"]
    assert member["client_id"] == "lag-client" and member["host"]
    assert sorted(member["assignment"]) == [f"{topic}-0", f"{topic}-1", f"{topic}-2"]
    rows = {p["partition"]: p for p in desc["partitions"]}
    for p in range(3):
        assert (rows[p]["committed"], rows[p]["log_end"], rows[p]["lag"]) == (
            committed[p], produced[p], produced[p] - committed[p])
        assert rows[p]["member"] == member["member_id"]
    assert desc["total_lag"] == 5 + 0 + 3
    code, out, _ = cli(capsys, "group", "describe", group, *b)
    assert code == 0 and "lag-client" in out and "None" not in out
    assert {"group": group, "state": "Stable", "protocol_type": "consumer"} in cli_json(capsys, "group", "list", *b)

    # Kafka's rule: no reset while the group has members.
    code, _, err = cli(capsys, "group", "reset-offsets", group, "--topic", topic, "--to-earliest", *b)
    assert code == 1 and f"group {group} is Stable" in err
    history = cli_json(capsys, "group", "history", group, "--admin-url", broker.admin_url)
    assert history["rebalances"][-1]["kind"] == "rebalance" and history["rebalances"][-1]["member_count"] == 1
    c.close()

    def offsets() -> dict[int, int]:
        return {p["partition"]: p["committed"] for p in cli_json(capsys, "group", "describe", group, *b)["partitions"]}

    dry = cli_json(capsys, "group", "reset-offsets", group, "--topic", topic, "--to-earliest", "--dry-run", *b)
    assert [(r["partition"], r["previous"], r["new"]) for r in dry] == [(0, 5, 0), (1, 7, 0), (2, 1, 0)]
    assert offsets() == committed
    # As kafka-consumer-groups.sh: without --execute only the plan, and the note says how to commit it.
    code, out, err = cli(capsys, "group", "reset-offsets", group, "--topic", topic, "--to-earliest", *b)
    assert code == 0 and "NEW" in out and "add --execute" in err
    assert offsets() == committed
    cli_json(capsys, "group", "reset-offsets", group, "--topic", topic, "--to-offset", "3", "--execute", *b)
    assert offsets() == {0: 3, 1: 3, 2: 3}
    cli_json(capsys, "group", "reset-offsets", group, "--topic", f"{topic}:0", "--shift-by", "2", "--execute", *b)
    assert offsets() == {0: 5, 1: 3, 2: 3}
    cli_json(capsys, "group", "reset-offsets", group, "--topic", topic, "--shift-by", "-100", "--execute", *b)
    assert offsets() == {0: 0, 1: 0, 2: 0}  # clamped to the log start
    cli_json(capsys, "group", "reset-offsets", group, "--topic", topic, "--to-latest", "--execute", *b)
    assert offsets() == produced
    cli_json(capsys, "group", "reset-offsets", group, "--topic", topic, "--to-datetime", "2000-01-01T00:00:00Z",
             "--execute", *b)
    assert offsets() == {0: 0, 1: 0, 2: 0}
    cli_json(capsys, "group", "reset-offsets", group, "--topic", topic, "--to-datetime", "2999-01-01T00:00:00",
             "--execute", *b)
    assert offsets() == produced  # nothing that late: the log end
    cli_json(capsys, "group", "delete-offsets", group, "--topic", f"{topic}:1", *b)
    assert offsets() == {0: 10, 2: 4}
    assert cli_json(capsys, "group", "delete", group, *b) == [{"group": group, "deleted": True}]
    code, _, err = cli(capsys, "group", "describe", group, *b)
    assert code == 1 and f"group {group}" in err


def test_group_commands_see_a_new_protocol_consumer_group(broker, capsys) -> None:
    """A KIP-848 group (group.protocol=consumer) is not found by DescribeGroups; describe, wait and
    reset-offsets find it through ConsumerGroupDescribe (they once said it did not exist)."""
    b = ("-b", broker.bootstrap)
    topic, group = f"cg-{uuid.uuid4().hex[:6]}", f"cg-{uuid.uuid4().hex[:6]}"
    cli_json(capsys, "topic", "create", topic, "-p", "2", *b)
    produce(broker.bootstrap, topic, {0: 6, 1: 3})
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "cg-client",
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "group.protocol": "consumer"})
    c.subscribe([topic])
    assert consume(c, 9) == {0: 6, 1: 3}
    c.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 4), confluent_kafka.TopicPartition(topic, 1, 3)],
             asynchronous=False)
    assert cli_json(capsys, "group", "wait", group, "--members", "1", "--stable", "--timeout", "20", *b) == {
        "group": group, "state": "Stable", "members": 1}
    desc = cli_json(capsys, "group", "describe", group, *b)
    assert (desc["state"], desc["protocol_type"], desc["protocol"]) == ("Stable", "consumer", "uniform")
    [member] = desc["members"]
    assert member["client_id"] == "cg-client" and sorted(member["assignment"]) == [f"{topic}-0", f"{topic}-1"]
    assert [(p["partition"], p["committed"], p["lag"], p["member"]) for p in desc["partitions"]] == [
        (0, 4, 2, member["member_id"]), (1, 3, 0, member["member_id"])]
    code, _, err = cli(capsys, "group", "reset-offsets", group, "--topic", topic, "--to-earliest", *b)
    assert code == 1 and f"group {group} is Stable with 1 member(s)" in err
    c.close()
    assert cli_json(capsys, "group", "wait", group, "--members", "0", "--timeout", "20", *b)["state"] == "Empty"
    cli_json(capsys, "group", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute", *b)
    assert [p["committed"] for p in cli_json(capsys, "group", "describe", group, *b)["partitions"]] == [0, 0]
    assert cli_json(capsys, "group", "delete", group, *b) == [{"group": group, "deleted": True}]
    code, _, err = cli(capsys, "group", "wait", "no-such-group", "--timeout", "0.3", *b)
    assert code == 1 and "does not exist after 3 s" in err


def test_describe_and_history_of_a_group_stuck_mid_rebalance(broker, capsys) -> None:
    """A raw member joins and then never rejoins; a real consumer's arrival starts a rebalance that
    waits for it. `group describe` shows PreparingRebalance, `group history` says who is awaited."""
    b = ("-b", broker.bootstrap)
    topic, group = f"stuck-{uuid.uuid4().hex[:6]}", f"stuck-{uuid.uuid4().hex[:6]}"
    cli_json(capsys, "topic", "create", topic, *b)
    wire = Wire(broker.bootstrap, client_id="silent-member")
    try:
        import struct

        subscription = struct.pack(">hih", 0, 1, len(topic)) + topic.encode() + struct.pack(">i", -1)
        protocols = [JoinGroupRequestProtocol("range", subscription)]
        join = JoinGroupRequest(group, 30_000, 60_000, "", None, "consumer", protocols)
        first = wire.call(11, 5, join)  # v5: MEMBER_ID_REQUIRED, then join with the id
        join.member_id = first.member_id
        joined = wire.call(11, 5, join)
        assert joined.error_code == 0
        from kbroker.protocol.messages.sync_group_request import SyncGroupRequest

        assert wire.call(14, 3, SyncGroupRequest(group, joined.generation_id, joined.member_id)).error_code == 0
        cli_json(capsys, "group", "wait", group, "--members", "1", "--stable", *b)

        c = consumer(broker.bootstrap, group, "newcomer")
        c.subscribe([topic])
        c.poll(0.5)
        status = cli_json(capsys, "group", "wait", group, "--members", "2", *b)
        assert status["state"] == "PreparingRebalance"
        desc = cli_json(capsys, "group", "describe", group, *b, "--admin-url", broker.admin_url)
        assert desc["state"] == "PreparingRebalance"
        assert desc["rebalance_in_progress"]["members_waiting"] == [joined.member_id]
        code, out, _ = cli(capsys, "group", "describe", group, *b, "--admin-url", broker.admin_url)
        assert code == 0 and "Rebalancing since" in out and "waiting for 1 of 2 members to rejoin" in out
        assert {m["client_id"] for m in desc["members"]} == {"silent-member", "newcomer"}
        history = cli_json(capsys, "group", "history", group, "--admin-url", broker.admin_url)
        stuck = history["in_progress"]
        assert stuck["members_waiting"] == [joined.member_id]
        assert stuck["why"].startswith("waiting for 1 of 2 members to rejoin")
        metrics = urllib.request.urlopen(broker.admin_url + "/metrics", timeout=10).read().decode()
        assert f'kbroker_group_rebalancing_seconds{{group="{group}"}}' in metrics
        code, out, _ = cli(capsys, "group", "history", group, "--admin-url", broker.admin_url)
        assert code == 0 and "In progress since" in out and "waiting for 1 of 2 members" in out
        code, _, err = cli(capsys, "group", "wait", group, "--members", "2", "--stable", "--timeout", "0.5",
                           "--admin-url", broker.admin_url, *b)
        assert code == 1 and "PreparingRebalance with 2 member(s)" in err and "waiting for 1 of 2" in err
        c.close()
    finally:
        wire.close()


def test_commands_on_several_topics_or_groups_list_what_failed(broker, capsys) -> None:
    """As Kafka's tools: each topic or group is tried, the output says which went, exit 1 names the rest."""
    b = ("-b", broker.bootstrap)
    first, second = f"del-{uuid.uuid4().hex[:6]}", f"del-{uuid.uuid4().hex[:6]}"
    for topic in (first, second):
        cli_json(capsys, "topic", "create", topic, *b)
    code, out, err = cli(capsys, "topic", "delete", first, "no-such-topic", second, *b, "--json")
    assert code == 1
    assert json.loads(out) == [{"topic": first, "deleted": True},
                               {"topic": "no-such-topic", "deleted": False, "error": "UNKNOWN_TOPIC_OR_PARTITION"},
                               {"topic": second, "deleted": True}]
    assert err.strip() == ("kbroker topic delete: 1 of 3 topics not deleted: no-such-topic "
                           "(UNKNOWN_TOPIC_OR_PARTITION)")
    assert {first, second}.isdisjoint(t["topic"] for t in cli_json(capsys, "topic", "list", *b))
    code, out, err = cli(capsys, "group", "delete", "no-such-group", *b)
    assert code == 1 and "no-such-group" in out and "1 of 1 groups not deleted: no-such-group (GROUP_ID_NOT_FOUND)" in err


def test_unknown_groups_and_topics_exit_non_zero(broker, capsys) -> None:
    b = ("-b", broker.bootstrap)
    code, _, err = cli(capsys, "group", "history", "no-such-group", *b)
    assert code == 1 and "no-such-group does not exist" in err
    code, _, err = cli(capsys, "group", "reset-offsets", "g", "--topic", "no-such-topic", "--to-earliest", *b)
    assert code == 1 and "no-such-topic" in err
    code, _, err = cli(capsys, "group", "describe", "no-such-group", *b)
    assert code == 1 and "no-such-group does not exist" in err


def test_topic_describe_marks_what_is_set_on_the_topic(broker, capsys) -> None:
    b = ("-b", broker.bootstrap)
    topic = f"marks-{uuid.uuid4().hex[:6]}"
    with pytest.raises(SystemExit):
        main(["topic", "create", "--help"])
    out = capsys.readouterr().out
    assert "partition count (default: the broker's num.partitions)" in " ".join(out.split())
    assert "replicas per partition" in out
    cli_json(capsys, "topic", "create", topic, "-c", "retention.ms=120000", "-c", "cleanup.policy=compact", *b)
    described = cli_json(capsys, "topic", "describe", topic, *b)
    assert described["overrides"] == ["cleanup.policy", "retention.ms"]
    assert described["config_sources"]["retention.ms"] == "DYNAMIC_TOPIC_CONFIG"
    assert described["config_sources"]["segment.bytes"] == "DEFAULT_CONFIG"
    code, out, _ = cli(capsys, "topic", "describe", topic, *b)
    # kafka-topics.sh --describe's line of what is not Kafka's default, `*` where the topic set it
    assert code == 0 and "Configs: cleanup.policy=compact*,retention.ms=120000*   (* set on this topic)" in out
    assert "retention.ms*" in out and "DYNAMIC_TOPIC_CONFIG" in out and "DEFAULT_CONFIG" in out
    cli_json(capsys, "topic", "delete", topic, *b)


def test_the_http_endpoint_is_the_one_the_broker_reports(tmp_path, broker, capsys) -> None:
    """Two brokers: history, test controls and /ready follow -b (each finds its own broker's endpoint
    through DescribeConfigs), and a broker without one is named with what to give instead."""
    group = f"ep-{uuid.uuid4().hex[:6]}"
    cli_json(capsys, "topic", "create", group, "-b", broker.bootstrap)
    produce(broker.bootstrap, group, {0: 1})
    c = consumer(broker.bootstrap, group, "ep-client")
    c.subscribe([group])
    consume(c, 1)
    c.close()
    other_port = free_port()
    with BrokerProcess(tmp_path / "other", "--metrics-listen", f"127.0.0.1:{other_port}", "--test-controls") as other:
        history = cli_json(capsys, "group", "history", group, "-b", broker.bootstrap)
        assert history["group_id"] == group and history["rebalances"]
        code, _, err = cli(capsys, "group", "history", group, "-b", other.bootstrap)
        assert code == 1 and "does not exist" in err and f"127.0.0.1:{other_port}" in err  # the other broker's
        token = ("--data-dir", str(other.data_dir))  # where that broker wrote its test-controls token
        assert cli_json(capsys, "test", "run-retention", "offsets", "-b", other.bootstrap, *token)["ok"]
        code, out, _ = cli(capsys, "test", "drop-connections", "--client-id", "nobody", "-b", other.bootstrap, *token)
        assert code == 0 and "DROPPED" in out and "ok=" not in out  # a table, not Python's repr
        assert main(["probe", other.bootstrap, "--ready"]) == 0
        assert f"ready: http://127.0.0.1:{other_port}" in capsys.readouterr().out
    with BrokerProcess(tmp_path / "plain") as plain:
        code, _, err = cli(capsys, "group", "history", group, "-b", plain.bootstrap)
        assert code == 1 and "reports no HTTP endpoint" in err and "--metrics-listen" in err and "--admin-url" in err
        assert main(["probe", plain.bootstrap, "--ready"]) == 1
