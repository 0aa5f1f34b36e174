"""Consumer groups of the new protocol (KIP-848) with confluent-kafka `group.protocol=consumer`
against a real broker process.

Three consumers share a 6-partition topic and process 60,000 messages exactly once, committing
after processing; one closes (its partitions move at once) and one is SIGKILLed (its partitions
move after the session timeout). A static member restarts without its partitions moving; a new
topic matching a regular-expression subscription is picked up; the broker restarts and the group
comes back with its epochs and offsets.

The workers are those of test_groups_clients.py (a subprocess per consumer that commits exactly
what it processed and then records it), with a confluent consumer speaking the new protocol.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter

import pytest

from kbroker.tests.integration import test_groups_clients as base

SESSION_TIMEOUT_MS = 6_000
HEARTBEAT_INTERVAL_MS = 500
MESSAGES = 60_000
SMALL_MESSAGES = 12_000
PARTITIONS = base.PARTITIONS


class _ConfluentNewProtocol(base._Confluent):
    def __init__(self, cfg: dict) -> None:
        from confluent_kafka import Consumer

        self._topic_of: dict[int, str] = {}
        if cfg.get("group_protocol") != "consumer":
            super().__init__(cfg)
            return
        conf = {
            "bootstrap.servers": cfg["bootstrap"], "group.id": cfg["group"], "client.id": cfg["client_id"],
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "group.protocol": "consumer",
        }
        if cfg.get("instance_id"):
            conf["group.instance.id"] = cfg["instance_id"]
        if cfg.get("assignor"):
            conf["group.remote.assignor"] = cfg["assignor"]
        self.topic = cfg["topic"]
        self.topics = cfg.get("subscribe") or [self.topic]
        self.c = Consumer(conf)
        self.c.subscribe(self.topics)

    # Partitions of other topics (a regex subscription) are numbered from 1000 in the records.
    async def poll(self) -> list[tuple[int, int]]:
        out = []
        for m in self.c.consume(num_messages=1000, timeout=base.POLL_TIMEOUT_S):
            if m.error() is None:
                key = m.partition() if m.topic() == self.topic else 1000 + m.partition()
                self._topic_of[key] = m.topic()
                out.append((key, m.offset()))
        return out

    async def commit(self, offsets: dict[int, int]) -> bool:
        from confluent_kafka import TopicPartition

        tps = [TopicPartition(self._topic_of.get(k, self.topic), k % 1000, o) for k, o in offsets.items()]
        try:
            result = self.c.commit(offsets=tps, asynchronous=False)
        except Exception:  # noqa: BLE001 - any failure means: not committed
            return False
        return all(tp.error is None for tp in result or [])

    def assignment(self) -> list[int]:
        return sorted(tp.partition if tp.topic == self.topic else 1000 + tp.partition for tp in self.c.assignment())


class Worker(base.Worker):
    def __init__(self, broker, tmp, group: str, topic: str, *, protocol: str = "consumer", **kw) -> None:
        self._protocol = protocol
        self._extra = {k: kw.pop(k) for k in ("subscribe", "assignor") if k in kw}
        super().__init__(broker, tmp, "confluent-range", group, topic, **kw)

    def start(self) -> None:
        self.cfg["group_protocol"] = self._protocol
        self.cfg.update(getattr(self, "_extra", {}))
        with open(self.log, "ab") as log:
            self.proc = base.subprocess.Popen([sys.executable, __file__, "worker", json.dumps(self.cfg)],
                                              stdout=log, stderr=base.subprocess.STDOUT)


if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    base._Confluent = _ConfluentNewProtocol
    asyncio.run(base._worker(json.loads(sys.argv[2])))
    sys.exit(0)


from kbroker.protocol.messages.consumer_group_describe_request import ConsumerGroupDescribeRequest  # noqa: E402
from kbroker.tests.integration.broker_process import BrokerProcess  # noqa: E402

pytestmark = pytest.mark.timeout(300)


def cg_describe(broker, group: str):
    return base.wire_call(broker, 69, 0, ConsumerGroupDescribeRequest([group], False)).groups[0]


def assignment_events(broker, group: str, start: int | None = None) -> list[dict]:
    return [e for e in broker.events("consumer_group_assignment_changed", start) if e.get("group_id") == group]


def wait_stable(broker, group: str, members: int, workers, timeout: float = 60) -> None:
    """Stable with `members` members, and the live workers' assignments cover every partition once."""

    def ready() -> bool:
        d = cg_describe(broker, group)
        if d.error_code != 0 or d.group_state != "Stable" or len(d.members) != members:
            return False
        # The coordinator counts a member reconciled once it has sent the new assignment; wait
        # until the clients have taken it too, i.e. they hold exactly what the coordinator says.
        described = sorted(sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions)
                           for m in d.members)
        held = sorted(w.assignment for w in workers)
        return described == held and sorted(p for ps in held for p in ps) == list(range(PARTITIONS))

    base.wait_until(ready, timeout, f"{group} Stable with {members} members", workers)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("kip848") / "data",
                         "--group-consumer-session-timeout-ms", str(SESSION_TIMEOUT_MS),
                         "--group-consumer-min-session-timeout-ms", str(SESSION_TIMEOUT_MS),
                         "--group-consumer-heartbeat-interval-ms", str(HEARTBEAT_INTERVAL_MS),
                         "--group-consumer-min-heartbeat-interval-ms", str(HEARTBEAT_INTERVAL_MS))
    yield proc
    proc.stop()


def test_three_new_protocol_consumers_close_and_kill(broker, tmp_path):
    topic, group = "kip848-orders", "kip848-group"
    base.create_topic(broker, topic)
    produced: Counter = Counter()
    phase = MESSAGES // 3
    base.produce(broker, topic, phase, produced)
    workers = [Worker(broker, tmp_path, group, topic, name=f"kip848-{i}") for i in range(3)]
    first, second, third = workers
    try:
        wait_stable(broker, group, 3, workers)
        assert sorted(len(w.assignment) for w in workers) == [2, 2, 2], [w.assignment for w in workers]
        base.wait_committed(broker, group, topic, produced, workers)
        d = cg_describe(broker, group)
        assert d.assignor_name == "uniform" and d.group_epoch == d.assignment_epoch
        assert all(m.member_epoch == d.assignment_epoch for m in d.members)

        # A graceful close (epoch -1 leave): its partitions move with one assignment change.
        before = len(assignment_events(broker, group))
        base.produce(broker, topic, phase, produced)
        third.close()
        wait_stable(broker, group, 2, [first, second])
        events = assignment_events(broker, group)[before:]
        # librdkafka's close() unsubscribes first, and may heartbeat that empty subscription before
        # its leave: one "subscription changed" may precede the leave, nothing else
        reasons = [e["reason"] for e in events]
        assert reasons in (["member left"], ["subscription changed", "member left"]), events
        base.wait_committed(broker, group, topic, produced, [first, second])

        # A crash: the partitions move once the session times out.
        before = len(assignment_events(broker, group))
        second.kill()
        killed_at = time.monotonic()
        base.wait_until(lambda: len(cg_describe(broker, group).members) == 1, 30, "the dead member's removal", [first])
        waited = time.monotonic() - killed_at
        assert SESSION_TIMEOUT_MS / 1000 - 1.5 <= waited <= SESSION_TIMEOUT_MS / 1000 + 8, waited
        wait_stable(broker, group, 1, [first])
        assert [e["reason"] for e in assignment_events(broker, group)[before:]] == ["session expired"]
        base.produce(broker, topic, MESSAGES - 2 * phase, produced)
        base.wait_committed(broker, group, topic, produced, [first])
        assert sum(produced.values()) == MESSAGES
        base.assert_exactly_once(workers, produced)
    finally:
        for w in workers:
            w.kill()


def test_static_member_restart_keeps_its_partitions(broker, tmp_path):
    topic, group = "kip848-static", "kip848-static-group"
    base.create_topic(broker, topic)
    produced: Counter = Counter()
    base.produce(broker, topic, SMALL_MESSAGES // 2, produced)
    a = Worker(broker, tmp_path, group, topic, instance_id="static-a", name="kip848-static-a")
    b = Worker(broker, tmp_path, group, topic, instance_id="static-b", name="kip848-static-b-1")
    restarted = None
    try:
        wait_stable(broker, group, 2, [a, b])
        base.wait_committed(broker, group, topic, produced, [a, b])
        epoch, b_assignment = cg_describe(broker, group).group_epoch, b.assignment
        events = len(assignment_events(broker, group))
        a_seen = len(a.assignments())
        # The new process is started (and has imported its client) before the old one closes: under
        # load a Python start-up alone can outlast the 6 s session, and then the broker rightly expires
        # the member. What is tested is a client that is back within the session.
        restarted = Worker(broker, tmp_path, group, topic, instance_id="static-b", name="kip848-static-b-2", hold=True)
        b.close()  # a static member's close is a temporary leave (epoch -2): it keeps its slot
        closed_at = time.monotonic()
        restarted.release()
        base.wait_until(lambda: restarted.assignment != [], 60, "the static member's return", [a, restarted])
        back_after = time.monotonic() - closed_at
        assert restarted.assignment == b_assignment, (back_after, assignment_events(broker, group)[events:])
        d = cg_describe(broker, group)
        # no rebalance
        assert d.group_epoch == epoch and len(assignment_events(broker, group)) == events, (
            f"back {back_after:.1f} s after the close (session {SESSION_TIMEOUT_MS} ms); assignment changes: "
            f"{assignment_events(broker, group)[events:]}")
        base.produce(broker, topic, SMALL_MESSAGES - SMALL_MESSAGES // 2, produced)
        base.wait_committed(broker, group, topic, produced, [a, restarted])
        # the other member's partitions never changed across the restart
        assert a.assignments()[a_seen:] == [] and len(a.assignment) == 3
        base.assert_exactly_once([a, b, restarted], produced)
    finally:
        for w in (a, b, restarted):
            if w is not None:
                w.kill()


def test_regex_subscription_picks_up_a_new_topic(broker, tmp_path):
    group = "kip848-regex-group"
    base.create_topic(broker, "kip848re-first", 2)
    w = Worker(broker, tmp_path, group, "kip848re-first", subscribe=["^kip848re-.*"], name="kip848-regex")
    try:
        base.wait_until(lambda: w.assignment == [0, 1], 30, "the first topic's partitions", [w])
        base.create_topic(broker, "kip848re-second", 2)
        base.wait_until(lambda: w.assignment == [0, 1, 1000, 1001], 30, "the new matching topic", [w])
        d = cg_describe(broker, group)
        # librdkafka joins its regex subscriptions into one RE2 alternation, each in parentheses
        assert d.members[0].subscribed_topic_regex == "(^kip848re-.*)"
        assert sorted(t.topic_name for t in d.members[0].assignment.topic_partitions) == [
            "kip848re-first", "kip848re-second"]
    finally:
        w.kill()


def test_broker_restart_keeps_epochs_and_offsets(broker, tmp_path):
    topic, group = "kip848-restart", "kip848-restart-group"
    base.create_topic(broker, topic)
    produced: Counter = Counter()
    base.produce(broker, topic, SMALL_MESSAGES // 2, produced)
    workers = [Worker(broker, tmp_path, group, topic, name=f"kip848-restart-{i}") for i in range(2)]
    try:
        wait_stable(broker, group, 2, workers)
        base.wait_committed(broker, group, topic, produced, workers)
        offsets = base.committed(broker, group, topic)
        before = cg_describe(broker, group)

        broker.restart()

        base.wait_until(lambda: cg_describe(broker, group).error_code == 0, 20, "the group to be loaded")
        after = cg_describe(broker, group)
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
        assert sorted((m.member_id, m.member_epoch) for m in after.members) == sorted(
            (m.member_id, m.member_epoch) for m in before.members)
        assert base.committed(broker, group, topic) == offsets
        base.produce(broker, topic, SMALL_MESSAGES - SMALL_MESSAGES // 2, produced)
        base.wait_committed(broker, group, topic, produced, workers)
        base.assert_exactly_once(workers, produced)
        # the members carried on with their epochs: no assignment change since the restart
        assert assignment_events(broker, group, start=broker.starts) == []
    finally:
        for w in workers:
            w.kill()


def member_types(broker, group: str) -> list[int]:
    """v1's member type of each member: 0 classic, 1 consumer."""
    d = base.wire_call(broker, 69, 1, ConsumerGroupDescribeRequest([group], False)).groups[0]
    return sorted(m.member_type for m in d.members) if d.error_code == 0 else []


def test_classic_group_upgraded_member_by_member_and_downgraded_back(broker, tmp_path):
    """Three classic confluent consumers (range) are replaced one at a time by new-protocol ones
    while messages keep coming, then back; commits gate every record written, so the union of the
    workers' records must hold every message exactly once."""
    topic, group = "kip848-migrate", "kip848-migrate-group"
    base.create_topic(broker, topic)
    produced: Counter = Counter()
    chunk = SMALL_MESSAGES // 8
    base.produce(broker, topic, chunk, produced)
    classic = [Worker(broker, tmp_path, group, topic, protocol="classic", name=f"migrate-classic-{i}")
               for i in range(3)]
    everyone = list(classic)
    try:
        base.wait_stable(broker, group, 3, classic)
        base.wait_committed(broker, group, topic, produced, classic)

        # Upgrade: each classic member closes and a new-protocol member takes its place.
        live = list(classic)
        for i in range(3):
            base.produce(broker, topic, chunk, produced)
            live[i].close()
            new = Worker(broker, tmp_path, group, topic, protocol="consumer", name=f"migrate-new-{i}")
            everyone.append(new)
            live[i] = new
            if i == 0:  # the group is a consumer group now, the classic members still in it
                base.wait_until(lambda: member_types(broker, group) == [0, 0, 1], 60, "a mixed group", live)
            base.wait_committed(broker, group, topic, produced, live, timeout=120)
        wait_stable(broker, group, 3, live)
        assert member_types(broker, group) == [1, 1, 1]
        assert [e for e in assignment_events(broker, group)], "the upgraded group never assigned"

        # Downgrade: back to classic members, one at a time; the last new-protocol member's leave
        # turns the group classic again.
        for i in range(3):
            base.produce(broker, topic, chunk, produced)
            live[i].close()
            back = Worker(broker, tmp_path, group, topic, protocol="classic", name=f"migrate-back-{i}")
            everyone.append(back)
            live[i] = back
            if i == 0:  # a classic member joins the consumer group
                base.wait_until(lambda: member_types(broker, group) == [0, 1, 1], 60, "a mixed group", live)
            base.wait_committed(broker, group, topic, produced, live, timeout=120)
        base.wait_stable(broker, group, 3, live, timeout=90)
        d = base.describe(broker, group)
        assert (d.group_state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", "range")
        assert cg_describe(broker, group).error_code == 69  # GROUP_ID_NOT_FOUND: no longer a consumer group
        base.produce(broker, topic, chunk, produced)
        base.wait_committed(broker, group, topic, produced, live, timeout=120)
        base.assert_exactly_once(everyone, produced)
    finally:
        for w in everyone:
            w.kill()


def test_admin_client_lists_and_describes_a_new_protocol_group(broker):
    """confluent-kafka's AdminClient: ListGroups with the group type, ConsumerGroupDescribe."""
    from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType
    from confluent_kafka.admin import AdminClient

    base.create_topic(broker, "kip848-admin", 3)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kip848-admin-group",
                         "group.protocol": "consumer"})
    try:
        consumer.subscribe(["kip848-admin"])
        base.wait_until(lambda: consumer.poll(0.1) is None and len(consumer.assignment()) == 3, 30,
                        "the consumer's assignment")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        listed = {g.group_id: g for g in admin.list_consumer_groups().result(timeout=10).valid}
        mine = listed["kip848-admin-group"]
        assert (mine.type, mine.state) == (ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE)
        d = admin.describe_consumer_groups(["kip848-admin-group"])["kip848-admin-group"].result(timeout=10)
        assert (d.type, d.state, d.partition_assignor) == (ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE,
                                                            "uniform")
        assert [sorted(tp.partition for tp in m.assignment.topic_partitions) for m in d.members] == [[0, 1, 2]]
    finally:
        consumer.close()
