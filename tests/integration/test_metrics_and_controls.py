"""/metrics scraped during a produce/consume/rebalance workload; /health and /ready; every test
control used on a confluent-kafka consumer group with the client-side effect observed; `group
wait` instead of sleeps; a reset between two tests leaving no trace of the first.

One warm broker (`--profile test --test-controls`) serves the module; the `clean_broker`
fixture resets it after each test, the way a user's suite would.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
import uuid

import pytest

from kbroker.broker.cli import main
from kbroker.tests.integration.broker_process import BrokerProcess, free_port

confluent_kafka = pytest.importorskip("confluent_kafka")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    admin_port = free_port()
    with BrokerProcess(tmp_path_factory.mktemp("metrics") / "data", "--metrics-listen", f"127.0.0.1:{admin_port}",
                       "--test-controls", "--profile", "test", "--create-topics", "base:2") as b:
        b.admin_url = f"http://127.0.0.1:{admin_port}"
        b.token = (b.data_dir / "test-controls.token").read_text().strip()
        # `kbroker test ...` finds the token where the broker wrote it: KBROKER_DATA_DIR names the directory
        before = os.environ.get("KBROKER_DATA_DIR")
        os.environ["KBROKER_DATA_DIR"] = str(b.data_dir)
        try:
            yield b
        finally:
            if before is None:
                os.environ.pop("KBROKER_DATA_DIR", None)
            else:
                os.environ["KBROKER_DATA_DIR"] = before


@pytest.fixture
def clean_broker(broker, capsys):
    yield broker
    assert kb(capsys, "test", "reset", "--admin-url", broker.admin_url)["ok"]


def kb(capsys, *argv: str):
    """Run a `kbroker` command in-process; its --json output."""
    capsys.readouterr()
    code = main([*argv, "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def http(broker, path: str, method: str = "GET", body: dict | None = None) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {getattr(broker, 'token', '')}"}
    request = urllib.request.Request(broker.admin_url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def scrape(broker) -> dict[tuple[str, tuple], float]:
    status, body = http(broker, "/metrics")
    assert status == 200
    out = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def metric(samples, name: str, **labels) -> float | None:
    return samples.get((name, tuple(sorted((k, str(v)) for k, v in labels.items()))))


class Member:
    """A confluent-kafka consumer that records its rebalance callbacks."""

    def __init__(self, broker, group: str, topic: str, client_id: str, **extra) -> None:
        conf = {"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": client_id,
                "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 3000,
                "heartbeat.interval.ms": 300, **extra}
        self.c = confluent_kafka.Consumer(conf)
        self.events: list[str] = []
        self.received: list[tuple[int, int]] = []
        self.c.subscribe([topic], on_assign=lambda c, ps: self.events.append("assign"),
                         on_revoke=lambda c, ps: self.events.append("revoke"),
                         on_lost=lambda c, ps: self.events.append("lost"))

    def poll_until(self, done, max_polls: int = 3000) -> None:
        for _ in range(max_polls):
            m = self.c.poll(0.05)
            if m is not None and m.error() is None:
                self.received.append((m.partition(), m.offset()))
            if done():
                return
        raise AssertionError(f"not reached; events {self.events}, received {len(self.received)}")

    def close(self) -> None:
        self.c.close()


def produce(broker, topic: str, n: int, partition: int = 0) -> None:
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2})
    for i in range(n):
        p.produce(topic, value=b"x" * 100, key=b"%d" % i, partition=partition)
    assert p.flush(30) == 0


def topic_and_group(capsys, broker, partitions: int = 1) -> tuple[str, str]:
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    kb(capsys, "topic", "create", topic, "-p", str(partitions), "-b", broker.bootstrap)
    return topic, group


def wait_stable(capsys, broker, group: str, members: int = 1) -> dict:
    return kb(capsys, "group", "wait", group, "--members", str(members), "--stable", "--timeout", "30",
              "-b", broker.bootstrap, "--admin-url", broker.admin_url)


def test_health_ready_and_refusals(broker, capsys) -> None:
    assert http(broker, "/health")[0] == 200
    status, body = http(broker, "/ready")
    assert status == 200 and json.loads(body) == {"ready": True, "waiting_for": []}
    assert main(["probe", broker.bootstrap, "--ready", "--admin-url", broker.admin_url]) == 0
    assert http(broker, "/v1/test/reset")[0] == 405  # controls are POSTs
    assert http(broker, "/nope")[0] == 404
    import socket

    for garbage in (b"garbage\r\n\r\n", b"POST /v1/test/reset HTTP/1.1\r\nContent-Length: 5\r\n\r\n[1,2]",
                    b"POST /v1/test/reset HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", int(broker.admin_url.rsplit(":", 1)[1])), timeout=10) as s:
            s.sendall(garbage)
            assert s.recv(100).startswith(b"HTTP/1.1 400 ")
    assert http(broker, "/health")[0] == 200  # still serving
    status, body = http(broker, "/v1/test/groups/g/fail", "POST", {"api": "Nope"})
    assert status == 400 and "api must be one of" in json.loads(body)["error"]


def test_ready_waits_for_seed_topics_and_controls_are_refused_without_the_flag(tmp_path) -> None:
    port = free_port()
    with BrokerProcess(tmp_path / "d", "--metrics-listen", f"127.0.0.1:{port}", "--create-topics",
                       "a:2,b:1:compact") as b:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=10) as resp:
            assert json.loads(resp.read())["ready"]
        # --flush always: an acknowledged produce was fsynced, and the fsync was counted
        b.admin_url = f"http://127.0.0.1:{port}"
        before = metric(scrape(b), "kbroker_fsync_seconds_count")
        produce(b, "a", 3)
        assert metric(scrape(b), "kbroker_fsync_seconds_count") > before
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/test/reset", data=b"{}", method="POST",
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 403


def test_metrics_during_produce_consume_and_rebalances(clean_broker, capsys) -> None:
    broker = clean_broker
    topic, group = topic_and_group(capsys, broker, partitions=2)
    before = scrape(broker)
    joined_before = metric(before, "kbroker_rebalances_total", group_type="classic", reason="member_joined") or 0
    produce(broker, topic, 300, partition=0)
    produce(broker, topic, 200, partition=1)
    m = Member(broker, group, topic, "metrics-client")
    try:
        m.poll_until(lambda: len(m.received) == 500)
        m.c.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 120),
                            confluent_kafka.TopicPartition(topic, 1, 200)], asynchronous=False)
        kb(capsys, "test", "rebalance", group, "--reason", "metrics", "--admin-url", broker.admin_url)
        m.poll_until(lambda: m.events.count("assign") >= 2)
        wait_stable(capsys, broker, group)
        s = scrape(broker)
        for p, end in ((0, 300), (1, 200)):
            assert metric(s, "kbroker_log_end_offset", topic=topic, partition=p) == end
        size = sum(metric(s, "kbroker_log_size_bytes", topic=topic, partition=p) for p in (0, 1))
        # Every appended byte is in the segment files, and the consumer read all of it at least once.
        assert metric(s, "kbroker_topic_bytes_in_total", topic=topic) == size > 500 * 100
        assert metric(s, "kbroker_topic_bytes_out_total", topic=topic) >= size
        assert metric(s, "kbroker_consumer_lag", group=group, topic=topic, partition=0) == 180
        assert metric(s, "kbroker_consumer_lag", group=group, topic=topic, partition=1) == 0
        assert metric(s, "kbroker_consumer_committed_offset", group=group, topic=topic, partition=0) == 120
        assert metric(s, "kbroker_rebalances_total", group_type="classic", reason="member_joined") == joined_before + 1
        assert metric(s, "kbroker_rebalances_total", group_type="classic", reason="test_control") >= 1
        assert metric(s, "kbroker_rebalance_duration_seconds_count") >= 2
        assert metric(s, "kbroker_group_members", group=group) == 1
        assert metric(s, "kbroker_groups", group_type="classic", state="Stable") >= 1
        assert metric(s, "kbroker_requests_total", api="Produce", version=metric_version(s, "Produce")) >= 2
        assert metric(s, "kbroker_request_latency_seconds_count", api="JoinGroup") >= 2
        assert metric(s, "kbroker_connections") >= 1
        assert metric(s, "kbroker_offsets_partitions_loaded") == 50
        assert metric(s, "kbroker_event_loop_stall_seconds_count") > 0
        assert metric(s, "kbroker_fsync_seconds_count") is not None  # --flush never here; see test_ready_waits_for_seed_topics_...
    finally:
        m.close()


def test_a_new_protocol_consumer_group_in_metrics_and_the_group_endpoint(clean_broker, capsys) -> None:
    """A KIP-848 group (group.protocol=consumer) is counted, measured and described like a classic one
    (it was missing from every group metric and /v1/groups answered 404)."""
    broker = clean_broker
    topic, group = topic_and_group(capsys, broker, partitions=2)
    produce(broker, topic, 50, partition=0)
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "cg-metrics",
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "group.protocol": "consumer"})
    try:
        c.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < 50 and time.monotonic() < deadline:
            m = c.poll(0.2)
            got += m is not None and m.error() is None
        assert got == 50
        c.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 20)], asynchronous=False)
        waited = json.loads(http(broker, f"/v1/groups/{group}/wait?members=1&stable=1&timeout=20")[1])
        assert (waited["group_type"], waited["state"]) == ("consumer", "Stable")
        [member] = waited["members"]
        assert member["client_id"] == "cg-metrics" and member["member_epoch"] >= 1 and member["state"] == "stable"
        assert group in json.loads(http(broker, "/v1/groups")[1])["groups"]
        s = scrape(broker)
        assert metric(s, "kbroker_groups", group_type="consumer", state="Stable") == 1
        assert metric(s, "kbroker_group_members", group=group) == 1
        assert metric(s, "kbroker_consumer_committed_offset", group=group, topic=topic, partition=0) == 20
        assert metric(s, "kbroker_consumer_lag", group=group, topic=topic, partition=0) == 30
        # The test controls reach it too: its sessions end, and the consumer joins again.
        assert kb(capsys, "test", "expire-sessions", group, "--admin-url", broker.admin_url)["ok"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            c.poll(0.1)
            rejoined = json.loads(http(broker, f"/v1/groups/{group}")[1])
            if rejoined["members"] and rejoined["members"][0]["member_epoch"] > member["member_epoch"] \
                    and rejoined["state"] == "Stable":
                break
        assert rejoined["state"] == "Stable" and rejoined["members"][0]["member_epoch"] > member["member_epoch"]
        history = json.loads(http(broker, f"/v1/groups/{group}/history")[1])["rebalances"]
        assert any("expire every session" in json.dumps(e) for e in history)
    finally:
        c.close()


def _count(samples, name: str, **labels) -> float:
    """The sum over every sample of `name` whose labels include `labels`."""
    want = {k: str(v) for k, v in labels.items()}
    return sum(v for (n, ls), v in samples.items() if n == name and want.items() <= dict(ls).items())


def metric_version(samples, api: str) -> str:
    versions = [dict(labels)["version"] for (name, labels) in samples
                if name == "kbroker_requests_total" and dict(labels).get("api") == api]
    assert versions, f"no {api} requests counted"
    return versions[0]


def test_forced_rebalance_revokes_and_reassigns_and_shows_in_history(clean_broker, capsys) -> None:
    broker = clean_broker
    topic, group = topic_and_group(capsys, broker)
    m = Member(broker, group, topic, "forced")
    try:
        m.poll_until(lambda: "assign" in m.events)
        wait_stable(capsys, broker, group)
        kb(capsys, "test", "rebalance", group, "--reason", "chaos", "--admin-url", broker.admin_url)
        m.poll_until(lambda: m.events[-2:] == ["revoke", "assign"])
        wait_stable(capsys, broker, group)
        history = kb(capsys, "group", "history", group, "--admin-url", broker.admin_url)["rebalances"]
        assert [e["kind"] for e in history] == ["rebalance", "control", "rebalance"]
        assert history[1]["reason"] == "force a rebalance: chaos"
        assert history[2]["reason"] == "forced by test control: chaos"
        assert history[2]["client_reason"] == "chaos" and history[2]["new_generation"] == 2
    finally:
        m.close()


def test_expired_member_loses_its_partitions_and_rejoins_under_a_new_id(clean_broker, capsys) -> None:
    broker = clean_broker
    topic, group = topic_and_group(capsys, broker)
    m = Member(broker, group, topic, "expiring")
    try:
        m.poll_until(lambda: "assign" in m.events)
        wait_stable(capsys, broker, group)
        before = kb(capsys, "group", "describe", group, "-b", broker.bootstrap)["members"][0]["member_id"]
        kb(capsys, "test", "expire-member", group, before, "--admin-url", broker.admin_url)
        m.poll_until(lambda: m.events.count("assign") >= 2)
        assert "lost" in m.events or "revoke" in m.events
        wait_stable(capsys, broker, group)
        after = kb(capsys, "group", "describe", group, "-b", broker.bootstrap)["members"][0]["member_id"]
        assert after != before
        reasons = [e["reason"] for e in kb(capsys, "group", "history", group, "--admin-url",
                                            broker.admin_url)["rebalances"]]
        assert f"session expired for member {before} (test control)" in reasons
    finally:
        m.close()


def test_not_coordinator_window_then_consumption_resumes(clean_broker, capsys) -> None:
    broker = clean_broker
    topic, group = topic_and_group(capsys, broker)
    # A session comfortably longer than the window plus librdkafka's coordinator re-discovery: the
    # member must survive the move (a 3 s session expired when the machine was loaded).
    m = Member(broker, group, topic, "moving", **{"session.timeout.ms": 10000})
    try:
        m.poll_until(lambda: "assign" in m.events)
        wait_stable(capsys, broker, group)
        finds_before = _count(scrape(broker), "kbroker_requests_total", api="FindCoordinator")
        kb(capsys, "test", "not-coordinator", group, "--seconds", "3", "--admin-url", broker.admin_url)
        started = time.monotonic()
        try:
            m.c.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 0)], asynchronous=False)
            # librdkafka retried until the coordinator "came back": not before the window ended.
            assert time.monotonic() - started >= 2.5
        except confluent_kafka.KafkaException as e:
            assert e.args[0].code() in (confluent_kafka.KafkaError.NOT_COORDINATOR,
                                        confluent_kafka.KafkaError._WAIT_COORD, confluent_kafka.KafkaError._TIMED_OUT)
        # The client looked for its coordinator again.
        assert _count(scrape(broker), "kbroker_requests_total", api="FindCoordinator") > finds_before
        assert _count(scrape(broker), "kbroker_error_answers_total", error="NOT_COORDINATOR") >= 1
        produce(broker, topic, 50)
        m.poll_until(lambda: len(m.received) == 50)
        # After the window the client finds its coordinator again and commits.
        for _ in range(100):
            try:
                m.c.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 50)], asynchronous=False)
                break
            except confluent_kafka.KafkaException:
                m.c.poll(0.1)
        d = kb(capsys, "group", "describe", group, "-b", broker.bootstrap)
        assert [(p["committed"], p["lag"]) for p in d["partitions"]] == [(50, 0)]
    finally:
        m.close()


def test_join_delay_and_failing_the_next_commits(clean_broker, capsys) -> None:
    broker = clean_broker
    topic, group = topic_and_group(capsys, broker)
    m = Member(broker, group, topic, "delayed")
    try:
        m.poll_until(lambda: "assign" in m.events)
        wait_stable(capsys, broker, group)
        kb(capsys, "test", "join-delay", group, "--ms", "1500", "--admin-url", broker.admin_url)
        kb(capsys, "test", "rebalance", group, "--admin-url", broker.admin_url)
        m.poll_until(lambda: "revoke" in m.events)
        revoked = time.monotonic()
        m.poll_until(lambda: m.events[-1] == "assign")
        assert time.monotonic() - revoked >= 1.4  # the JoinGroup answer was held back
        kb(capsys, "test", "join-delay", group, "--ms", "0", "--admin-url", broker.admin_url)

        kb(capsys, "test", "fail", group, "--api", "OffsetCommit", "--count", "1", "--error",
           "GROUP_AUTHORIZATION_FAILED", "--admin-url", broker.admin_url)
        with pytest.raises(confluent_kafka.KafkaException) as failed:
            m.c.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 0)], asynchronous=False)
        assert failed.value.args[0].code() == confluent_kafka.KafkaError.GROUP_AUTHORIZATION_FAILED
        m.c.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 0)], asynchronous=False)  # only one failed
        controls = [e["reason"] for e in kb(capsys, "group", "history", group, "--admin-url",
                                             broker.admin_url)["rebalances"] if e["kind"] == "control"]
        assert "next 1 OffsetCommit request(s) fail with GROUP_AUTHORIZATION_FAILED" in controls
    finally:
        m.close()


def test_failing_the_next_produce_of_a_partition_reaches_the_producer(clean_broker, capsys) -> None:
    broker = clean_broker
    topic, _ = topic_and_group(capsys, broker)
    kb(capsys, "test", "fail-partition", topic, "0", "--api", "Produce", "--count", "1", "--error",
       "INVALID_RECORD", "--admin-url", broker.admin_url)
    reports = []
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "enable.idempotence": False})
    p.produce(topic, b"first", partition=0, on_delivery=lambda err, msg: reports.append(err))
    assert p.flush(30) == 0
    p.produce(topic, b"second", partition=0, on_delivery=lambda err, msg: reports.append(err))
    assert p.flush(30) == 0
    assert reports[0] is not None and reports[0].code() == confluent_kafka.KafkaError.INVALID_RECORD
    assert reports[1] is None  # only the next one failed
    assert metric(scrape(broker), "kbroker_log_end_offset", topic=topic, partition=0) == 1


def test_dropped_connections_reconnect_and_keep_consuming(clean_broker, capsys) -> None:
    broker = clean_broker
    topic, group = topic_and_group(capsys, broker)
    m = Member(broker, group, topic, "dropped")
    try:
        m.poll_until(lambda: "assign" in m.events)
        result = kb(capsys, "test", "drop-connections", "--client-id", "dropped", "--admin-url", broker.admin_url)
        assert result["dropped"] >= 1
        produce(broker, topic, 20)
        m.poll_until(lambda: len(m.received) == 20)
    finally:
        m.close()


def test_group_wait_replaces_sleeps_and_expire_sessions_empties_the_group(clean_broker, capsys) -> None:
    """A sample test written without one sleep: two consumers poll on their own threads; the test
    waits until the group is Stable with both, expires every session, and waits again."""
    broker = clean_broker
    topic, group = topic_and_group(capsys, broker, partitions=2)
    a, b = Member(broker, group, topic, "a"), Member(broker, group, topic, "b")
    stop = threading.Event()
    pollers = [threading.Thread(target=_poll_forever, args=(m, stop)) for m in (a, b)]
    for t in pollers:
        t.start()
    try:
        first = wait_stable(capsys, broker, group, members=2)
        assert first["state"] == "Stable" and first["members"] == 2
        # the same wait over the HTTP endpoint, and its answer when the condition is not met in time
        status, body = http(broker, f"/v1/groups/{group}/wait?members=2&stable=1&timeout=10")
        assert status == 200 and json.loads(body)["state"] == "Stable"
        status, body = http(broker, f"/v1/groups/{group}/wait?members=5&timeout=0.2")
        assert status == 408 and "is Stable with 2 member(s) after 0.2 s" in json.loads(body)["error"]
        generation = kb(capsys, "group", "history", group, "--admin-url", broker.admin_url)["rebalances"][-1]
        kb(capsys, "test", "expire-sessions", group, "--admin-url", broker.admin_url)
        again = wait_stable(capsys, broker, group, members=2)
        assert again["members"] == 2
        latest = kb(capsys, "group", "history", group, "--admin-url", broker.admin_url)["rebalances"][-1]
        assert latest["new_generation"] > generation["new_generation"]
    finally:
        stop.set()
        for t in pollers:
            t.join(10)
        a.close()
        b.close()


def _poll_forever(member: Member, stop: threading.Event) -> None:
    while not stop.is_set():
        member.c.poll(0.05)


def test_run_retention_now(clean_broker, capsys) -> None:
    broker = clean_broker
    for what in ("offsets", "logs", "compaction"):
        assert kb(capsys, "test", "run-retention", what, "--admin-url", broker.admin_url)["ok"]


def test_a_reset_leaves_no_trace_first_half(clean_broker, capsys) -> None:
    broker = clean_broker
    kb(capsys, "topic", "create", "leftover", "-p", "2", "-b", broker.bootstrap)
    produce(broker, "leftover", 10)
    m = Member(broker, "leftover-group", "leftover", "leftover")
    try:
        m.poll_until(lambda: len(m.received) == 10)
        m.c.commit(asynchronous=False)
    finally:
        m.close()


def test_a_reset_leaves_no_trace_second_half(broker, capsys) -> None:
    # The previous test's topic, group, offsets and history are gone; the seed topic is back, empty.
    topics = {t["topic"] for t in kb(capsys, "topic", "list", "-b", broker.bootstrap)}
    assert topics == {"base"}
    assert kb(capsys, "group", "list", "-b", broker.bootstrap) == []
    assert kb(capsys, "group", "history", "leftover-group", "--admin-url", broker.admin_url)["rebalances"] == []
    s = scrape(broker)
    assert metric(s, "kbroker_topic_bytes_in_total", topic="leftover") is None
    assert not [k for k in s if dict(k[1]).get("group") == "leftover-group"]
    status, body = http(broker, "/ready")
    assert status == 200, body
    reset = kb(capsys, "test", "reset", "--admin-url", broker.admin_url)
    assert reset["topics_deleted"] == 1 and reset["groups_deleted"] == 0
