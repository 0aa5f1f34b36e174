"""Server-side assignors (UniformAssignor, RangeAssignor) and the consumer group record codec."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.coordinator.groups.consumer import consumer_records as r
from kbroker.coordinator.groups.consumer.assignors import MemberSubscription, range_assign, uniform_assign
from kbroker.coordinator.groups.consumer.consumer_group import ConsumerGroup, ConsumerGroupMember
from kbroker.protocol.records.codec import decode_record, encode_record

T = [uuid.UUID(int=i + 1) for i in range(4)]


def _owners(result):
    owners = {}
    for m, a in result.items():
        for t, ps in a.items():
            for p in ps:
                assert (t, p) not in owners
                owners[(t, p)] = m
    return owners


@settings(max_examples=200, deadline=None)
@given(
    subs=st.lists(st.sets(st.sampled_from(T[:3]), min_size=1), min_size=1, max_size=8),
    counts=st.lists(st.integers(0, 12), min_size=3, max_size=3),
)
def test_uniform_assign_covers_everything_once_and_is_balanced_when_homogeneous(subs, counts) -> None:
    topics = dict(zip(T[:3], counts))
    members = {f"m{i}": MemberSubscription(frozenset(s)) for i, s in enumerate(subs)}
    result = uniform_assign(members, topics)
    owners = _owners(result)
    wanted = {(t, p) for t, n in topics.items() for p in range(n) if any(t in s for s in subs)}
    assert set(owners) == wanted
    for (t, _p), m in owners.items():
        assert t in members[m].subscribed_topic_ids
    if len({frozenset(s) for s in subs}) == 1:
        sizes = [sum(len(ps) for ps in a.values()) for a in result.values()]
        assert max(sizes) - min(sizes) <= 1


def _load(result) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


@settings(max_examples=300, deadline=None)
@given(
    subs=st.lists(st.sets(st.sampled_from(T), max_size=4), min_size=1, max_size=10),
    counts=st.lists(st.integers(0, 14), min_size=4, max_size=4),
    kept=st.lists(st.booleans(), min_size=10, max_size=10),
    resubscribed=st.lists(st.sets(st.sampled_from(T), max_size=4), min_size=10, max_size=10),
)
def test_uniform_assign_leaves_no_move_that_would_even_out_heterogeneous_loads(subs, counts, kept, resubscribed) -> None:
    """Whatever the subscriptions, before and after members leave or change theirs: every
    partition of a subscribed topic goes to one of its subscribers, and no member holds a
    partition that a subscriber with two or more partitions fewer could take (one such move would
    bring their loads closer). Computed again from its own result, nothing moves."""
    topics = dict(zip(T, counts))
    members = {f"m{i}": MemberSubscription(frozenset(s)) for i, s in enumerate(subs)}
    first = uniform_assign(members, topics)
    later = {m: MemberSubscription(frozenset(resubscribed[i]) if not kept[i] and i % 2 else s.subscribed_topic_ids,
                                   current=first[m])
             for i, (m, s) in enumerate(members.items()) if kept[i] or i % 2}
    for group in (members, later):
        result = uniform_assign(group, topics)
        owners = _owners(result)
        wanted = {(t, p) for t, n in topics.items() for p in range(n)
                  if any(t in s.subscribed_topic_ids for s in group.values())}
        assert set(owners) == wanted
        load = _load(result)
        for (t, _p), m in owners.items():
            assert t in group[m].subscribed_topic_ids
            assert all(load[o] > load[m] - 2 for o, s in group.items() if t in s.subscribed_topic_ids), (t, m, load)
        again = {m: MemberSubscription(s.subscribed_topic_ids, current=result[m]) for m, s in group.items()}
        assert uniform_assign(again, topics) == result


def test_uniform_assign_keeps_heterogeneous_targets_that_stay_valid() -> None:
    """A member subscribed to one more topic than the others joins: what the others held of the
    shared topic stays with them except what balance moves to the newcomer."""
    topics = {T[0]: 12, T[1]: 6}
    base = {m: MemberSubscription(frozenset({T[0]})) for m in "abc"}
    first = uniform_assign(base, topics)
    members = {m: MemberSubscription(frozenset({T[0]}), current=first[m]) for m in "abc"}
    members["d"] = MemberSubscription(frozenset({T[0], T[1]}))
    second = uniform_assign(members, topics)
    assert second["d"][T[1]] == frozenset(range(6))
    for m in "abc":
        assert second[m][T[0]] <= first[m][T[0]]
    load = _load(second)
    assert max(load[m] for m in "abc") - min(load[m] for m in "abc") <= 1


def test_uniform_assign_is_sticky() -> None:
    topics = {T[0]: 12}
    first = uniform_assign({m: MemberSubscription(frozenset({T[0]})) for m in "abc"}, topics)
    members = {m: MemberSubscription(frozenset({T[0]}), current=first[m]) for m in "abc"}
    members["d"] = MemberSubscription(frozenset({T[0]}))
    second = uniform_assign(members, topics)
    assert [len(second[m][T[0]]) for m in "abcd"] == [3, 3, 3, 3]
    for m in "abc":
        assert second[m][T[0]] <= first[m][T[0]]
    # and with nothing changed nothing moves
    again = uniform_assign({m: MemberSubscription(frozenset({T[0]}), current=second[m]) for m in "abcd"}, topics)
    assert again == second


def test_range_assign_co_partitions() -> None:
    topics = {T[0]: 3, T[1]: 3}
    result = range_assign({m: MemberSubscription(frozenset(T[:2])) for m in ("b", "a")}, topics)
    assert result["a"] == {T[0]: frozenset({0, 1}), T[1]: frozenset({0, 1})}
    assert result["b"] == {T[0]: frozenset({2}), T[1]: frozenset({2})}


def test_every_consumer_group_record_round_trips_through_kafkas_format() -> None:
    a = {T[0]: frozenset({0, 2}), T[1]: frozenset({1})}
    records = [
        r.ConsumerGroupMetadataRecord("g", 7, -12345),
        r.ConsumerGroupMetadataTombstone("g"),
        r.ConsumerGroupMemberMetadataRecord("g", "m", "inst", None, "cid", "/1.2.3.4", ("a", "b"), "^x.*", 30000,
                                            "uniform"),
        r.ConsumerGroupMemberMetadataTombstone("g", "m"),
        r.ConsumerGroupTargetAssignmentMetadataRecord("g", 7, 123),
        r.ConsumerGroupTargetAssignmentMetadataTombstone("g"),
        r.ConsumerGroupTargetAssignmentMemberRecord("g", "m", a),
        r.ConsumerGroupTargetAssignmentMemberTombstone("g", "m"),
        r.ConsumerGroupCurrentMemberAssignmentRecord("g", "m", 7, 6, 1, a, {T[2]: frozenset({3})}),
        r.ConsumerGroupCurrentMemberAssignmentTombstone("g", "m"),
        r.ConsumerGroupRegularExpressionRecord("g", "^x.*", ("x1", "x2"), 0, 99),
        r.ConsumerGroupRegularExpressionTombstone("g", "^x.*"),
    ]
    for record in records:
        key, value = encode_record(record)
        assert decode_record(key, value) == record
    # Kafka's key layout: int16 record type, then the key struct v0
    key, value = encode_record(records[0])
    assert key[:2] == b"\x00\x03" and value[:2] == b"\x00\x00"
    assert encode_record(records[8])[0][:2] == b"\x00\x08"
    assert encode_record(records[10])[0][:2] == b"\x00\x10"


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(st.tuples(
    st.sampled_from(["a", "b", "c", "d"]),
    st.one_of(st.none(), st.tuples(st.sets(st.sampled_from(["t1", "t2", "t3"])),
                                   st.sampled_from([None, "r.*", "s.*"]),
                                   st.sampled_from([None, "uniform", "range"])))), max_size=30),
    leaving=st.sets(st.sampled_from(["a", "b", "x"])), joining=st.sampled_from([None, "a", "e"]))
def test_a_groups_subscription_counts_follow_its_members(steps, leaving, joining) -> None:
    """The counts put_member and remove_member keep answer what a walk over the members would:
    the subscribed names and regexes with some members out and one in, and the preferred assignor."""
    group = ConsumerGroup("g")
    for member_id, subscription in steps:
        if subscription is None:
            group.remove_member(member_id)
        else:
            names, regex, assignor = subscription
            group.put_member(ConsumerGroupMember(member_id, subscribed_topic_names=tuple(sorted(names)),
                                                 subscribed_topic_regex=regex, server_assignor=assignor))
    new = ConsumerGroupMember(joining, subscribed_topic_names=("t9",), subscribed_topic_regex="n.*",
                              server_assignor="range") if joining else None
    staying = [m for m in group.members.values() if m.member_id not in leaving] + ([new] if new else [])
    assert group.subscriptions(leaving, new) == (
        {n for m in staying for n in m.subscribed_topic_names},
        {m.subscribed_topic_regex for m in staying if m.subscribed_topic_regex})
    old = group.members.get(joining) if joining else None
    named = [m.server_assignor for m in group.members.values()
             if m.server_assignor and (old is None or m.member_id != old.member_id)]
    if new is not None:
        named.append(new.server_assignor)
    expected = max(sorted(set(named)), key=named.count) if named else None
    assert group.preferred_server_assignor(old or new, new) == expected
