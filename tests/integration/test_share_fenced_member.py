"""A share group member that goes (fenced when its session times out, or leaving and closing its share
session) gives back what it acquired at once, not when its locks expire: here the locks last a minute
and the records come back to another member within seconds. A member that leaves keeps its share
session until it ends it, so its last acknowledgements, sent with or just after the leave as
librdkafka's close sends them, are taken (Kafka's share sessions end with their final epoch or the
connection, not with a leave)."""

from __future__ import annotations

import time

import pytest

from kbroker.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.test_share_fetch_wire import Member, acquired, produce, setup

LOCK_MS = 60_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("share-fenced") / "data", "--num-partitions", "1",
                         "--group-share-record-lock-duration-ms", str(LOCK_MS),
                         "--group-share-session-timeout-ms", "1500", "--group-share-heartbeat-interval-ms", "300")
    yield proc
    proc.stop()


def heartbeat(member: Member, epoch: int, topic: str | None = None) -> int:
    answer = member.wire.call(76, 1, ShareGroupHeartbeatRequest(
        group_id=member.group, member_id=member.id, member_epoch=epoch, rack_id=None,
        subscribed_topic_names=[topic] if topic else None))
    assert answer.error_code == 0, answer
    return answer.member_epoch


def a_holds_five(broker) -> tuple[Member, Member, int]:
    """Member a holding records 0-4 under minute-long locks, and b (its epoch) in the same group."""
    topic, topic_id, group = setup(broker, 0)
    a = Member(broker, group, topic, topic_id)
    assert acquired(a.fetch()) == []
    produce(broker, topic, 5)
    assert acquired(a.fetch(max_wait_ms=5_000)) == [(0, 4, 1)]
    b = Member(broker, group, topic, topic_id)
    return a, b, heartbeat(b, 0, topic)  # joined again with the same id: its epoch, to keep heartbeating with


def what_b_gets(b: Member, b_epoch: int) -> list:
    """What b acquires once something comes back, b heartbeating meanwhile (well under the locks' minute)."""
    started = time.monotonic()
    got: list = []
    while not got and time.monotonic() - started < 20:
        b_epoch = heartbeat(b, b_epoch)
        got = acquired(b.fetch(max_wait_ms=300))
    return got


@pytest.mark.parametrize("how", ["fenced", "leaves"])
def test_a_gone_members_records_come_back_before_their_locks_expire(broker, how):
    a, b, b_epoch = a_holds_five(broker)
    if how == "leaves":  # leaves the group, then ends its share session (a client's close)
        heartbeat(a, -1)
        assert a.acknowledge([], epoch=-1).error_code == 0
    assert what_b_gets(b, b_epoch) == [(0, 4, 2)]  # fenced: a sends nothing and its session ends after 1.5 s


def test_a_leaving_members_last_acknowledgements_are_taken(broker):
    """The leave first, then the final ShareAcknowledge (epoch -1): the session is still the member's,
    its acknowledgements are answered NONE and the records are done (no one gets them again); what it
    did not acknowledge comes back when the session ends."""
    a, b, b_epoch = a_holds_five(broker)
    heartbeat(a, -1)
    last = a.acknowledge([(0, 2, [1])], epoch=-1)
    assert last.error_code == 0 and [p.error_code for t in last.responses for p in t.partitions] == [0], last
    assert what_b_gets(b, b_epoch) == [(3, 4, 2)]  # 0-2 accepted by a; 3-4 given back when its session ended
