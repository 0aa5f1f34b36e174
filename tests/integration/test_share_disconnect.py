"""A share session ends when the connection that opened it closes, as Kafka 4.4's ShareSessionCache
does (its ClientConnectionDisconnectListener calls SharePartitionManager.releaseSession): what the
member acquired through it is available again at once, not when its locks expire. The locks here
last a minute and the group's session timeout 45 s, so a broker that waited for either would fail the
bound below (20 s). A session the connection no longer owns (replaced by the member's epoch 0 on
another connection) is not ended by its close."""

from __future__ import annotations

import time

import pytest

from kbroker.protocol.errors import ErrorCode as E
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.test_share_fenced_member import a_holds_five, what_b_gets
from kbroker.tests.integration.wire import Wire

LOCK_MS = 60_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """Minute-long locks, and the group session timeout's default (45 s): only the disconnect frees."""
    with BrokerProcess(tmp_path_factory.mktemp("share-disconnect") / "data", "--num-partitions", "1",
                       "--group-share-record-lock-duration-ms", str(LOCK_MS)) as proc:
        yield proc


def test_a_dropped_connection_gives_back_what_its_session_acquired(broker):
    a, b, b_epoch = a_holds_five(broker)
    a.wire.close()  # no final epoch, no leave: the connection is simply gone
    assert what_b_gets(b, b_epoch) == [(0, 4, 2)]
    # the session went with the connection: the member, reconnected, must open a new one
    a.wire = Wire(broker.bootstrap, client_id="share-fetch")
    assert a.fetch().error_code == E.SHARE_SESSION_NOT_FOUND


def test_the_close_of_a_connection_whose_session_was_replaced_ends_nothing(broker):
    """a opens a session on one connection, then again (epoch 0) on a second and acquires there; the
    first connection's close leaves the second's session and its records alone: a acknowledges them
    through it afterwards."""
    a, _, _ = a_holds_five(broker)
    first = a.wire
    a.wire, a.epoch = Wire(broker.bootstrap, client_id="share-fetch"), 0
    assert a.fetch().error_code == 0  # epoch 0 again: 0-4 stay a's (Kafka's newContext only drops the old session)
    first.close()
    # a sentinel's session closed after it: once the broker logs that one's end it has seen the
    # first close too (one event loop, closes taken in the order they came)
    sentinel, _, _ = a_holds_five(broker)
    sentinel.wire.close()
    deadline = time.monotonic() + 20
    while not any(e.get("member_id") == sentinel.id for e in broker.events("share_session_disconnected")):
        assert time.monotonic() < deadline, "the sentinel's session never ended"
        time.sleep(0.05)
    assert not any(e.get("member_id") == a.id for e in broker.events("share_session_disconnected"))
    answer = a.acknowledge([(0, 4, [1])])
    assert answer.error_code == 0 and [p.error_code for t in answer.responses for p in t.partitions] == [0], answer
    assert a.fetch().error_code == 0  # the session is a's still, at the next epoch
