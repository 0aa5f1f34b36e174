"""A consumer group's (KIP-848) epochs in the rebalance history, as a classic group's generations are:
each new group epoch is one history entry with the epoch it left, who joined or went and why; the last
member leaving is one too (the group empties), and a fence by session expiry carries the timeout."""

from __future__ import annotations

from kbroker.coordinator.groups.consumer.consumer_heartbeat import AssignmentChanged
from kbroker.coordinator.groups.history import RebalanceHistory
from kbroker.tests.unit.test_consumer_group_heartbeat import SESSION_MS, beat, group, join, make, settle


def test_every_group_epoch_is_a_history_entry() -> None:
    h, _ = make()
    epochs = {"a": join(h, "a").member_epoch}
    epochs["b"] = join(h, "b").member_epoch
    settle(h, epochs)
    for _ in range(10):  # b goes silent: its session expires
        h.advance(5_000)
        beat(h, "a", group(h).members["a"].member_epoch, None)
    beat(h, "a", -1)  # a leaves: the group empties
    history = RebalanceHistory()
    for event in h.events:
        if isinstance(event, AssignmentChanged):
            history.record_epoch(event, 1_000)
    rows = [(e.group_type, e.old_generation, e.new_generation, e.reason, e.members_in, e.members_out, e.member_count,
             e.session_timeout_ms) for e in history.entries("g")]
    assert rows == [
        # a new group starts at epoch 1 and its first member makes it 2, as in Kafka 4.3+ (KAFKA-20268)
        ("consumer", 1, 2, "member joined", ("a",), (), 1, None),
        ("consumer", 2, 3, "member joined", ("b",), (), 2, None),
        ("consumer", 3, 4, "session expired", (), ("b",), 1, SESSION_MS),
        ("consumer", 4, 5, "member left", (), ("a",), 0, None),
    ]
    assert history.entries("g")[-1].to_json()["session_timeout_ms"] is None
