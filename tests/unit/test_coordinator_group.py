"""GroupMetadata's pieces: transitionTo, add/remove, votes, candidateProtocols, selectProtocol,
MemberMetadata, subscriptions."""

from __future__ import annotations

import itertools

import pytest

from kbroker.coordinator.groups.classic.group import (
    VALID_PREVIOUS_STATES,
    ClassicGroup,
    GroupState,
    IllegalStateTransition,
)
from kbroker.coordinator.groups.classic.member import Member
from kbroker.coordinator.groups.classic.subscription import (
    SubscriptionDecodeError,
    decode_subscription_topics,
    encode_subscription_topics,
)

S = GroupState


def member(member_id: str, protocols: tuple[tuple[str, bytes], ...] = (("range", b""),), **kw) -> Member:
    defaults = dict(
        group_instance_id=None, client_id="c", client_host="h", rebalance_timeout_ms=30_000,
        session_timeout_ms=10_000, protocol_type="consumer",
    )
    defaults.update(kw)
    return Member(member_id=member_id, protocols=protocols, **defaults)


def group_in(state: GroupState) -> ClassicGroup:
    g = ClassicGroup("g", 0)
    g.state = state
    return g


# -- transitionTo ---------------------------------------------------------------------------------

# The seeds' table: current state -> target state, with why.
SEED_TRANSITIONS = [
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),  # everyone rejoined or the join timed out
    (S.PREPARING_REBALANCE, S.EMPTY),  # all members left
    (S.PREPARING_REBALANCE, S.DEAD),  # metadata removed
    (S.COMPLETING_REBALANCE, S.STABLE),  # leader's assignment received
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),  # join/leave/metadata change/session expiry
    (S.COMPLETING_REBALANCE, S.DEAD),
    (S.STABLE, S.PREPARING_REBALANCE),  # join/leave/session expiry
    (S.STABLE, S.DEAD),
    (S.EMPTY, S.PREPARING_REBALANCE),  # a member joins
    (S.EMPTY, S.DEAD),  # offsets expired or metadata removed
    (S.DEAD, S.DEAD),
]


@pytest.mark.parametrize(("current", "target"), SEED_TRANSITIONS)
def test_transitionTo_accepts_every_row_of_the_seed_table(current: GroupState, target: GroupState) -> None:
    g = group_in(current)
    g.transition_to(target, 1234)
    assert g.state is target
    assert g.previous_state is current
    assert g.current_state_timestamp == 1234


ILLEGAL = [
    (cur, tgt) for cur, tgt in itertools.product(S, S) if (cur, tgt) not in SEED_TRANSITIONS
]


@pytest.mark.parametrize(("current", "target"), ILLEGAL)
def test_transitionTo_rejects_invalid_previous_state(current: GroupState, target: GroupState) -> None:
    g = group_in(current)
    g.current_state_timestamp = 7
    with pytest.raises(IllegalStateTransition):
        g.transition_to(target, 1234)
    assert g.state is current
    assert g.current_state_timestamp == 7


def test_transition_table_matches_the_seeds_exactly() -> None:
    allowed = {(p, t) for t, prevs in VALID_PREVIOUS_STATES.items() for p in prevs}
    assert allowed == set(SEED_TRANSITIONS)
    assert len(ILLEGAL) == 25 - len(SEED_TRANSITIONS)


@pytest.mark.parametrize("state", list(S))
def test_canRebalance_only_from_previous_states_of_preparing_rebalance(state: GroupState) -> None:
    assert group_in(state).can_rebalance() == (state in {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY})


# -- add / remove ---------------------------------------------------------------------------------


def test_add_first_member_sets_protocol_type_and_leader() -> None:
    g = ClassicGroup("g", 0)
    g.add(member("a", protocol_type="connect", protocols=(("p", b""),)), join_handle="h")
    assert g.protocol_type == "connect"
    assert g.leader_id == "a"
    assert g.num_members_awaiting_join == 1
    assert g.supported_protocols["p"] == 1


def test_add_rejects_different_protocol_type() -> None:
    g = ClassicGroup("g", 0)
    g.add(member("a"))
    g.state = S.PREPARING_REBALANCE
    with pytest.raises(ValueError):
        g.add(member("b", protocol_type="connect"))


def test_remove_leader_elects_first_remaining_member() -> None:
    g = ClassicGroup("g", 0)
    for mid in ("a", "b", "c"):
        g.add(member(mid))
    g.remove("a")
    assert g.leader_id == "b"
    g.remove("c")
    assert g.leader_id == "b"
    g.remove("b")
    assert g.leader_id is None


def test_remove_updates_votes_awaiting_count_and_static_map() -> None:
    g = ClassicGroup("g", 0)
    g.add(member("a", protocols=(("x", b""), ("y", b""))), join_handle=1)
    g.add(member("b", protocols=(("y", b""),), group_instance_id="i-b"), join_handle=2)
    assert g.static_members == {"i-b": "b"}
    g.remove("b")
    assert g.supported_protocols["y"] == 1
    assert g.num_members_awaiting_join == 1
    assert g.static_members == {}


def test_update_member_maintains_votes_and_awaiting_count() -> None:
    g = ClassicGroup("g", 0)
    m = member("a", protocols=(("x", b""),))
    g.add(m)
    g.update_member(m, (("y", b"1"), ("z", b"2")), 1_000, 7_000, join_handle="h")
    assert g.supported_protocols["x"] == 0
    assert (g.supported_protocols["y"], g.supported_protocols["z"]) == (1, 1)
    assert g.num_members_awaiting_join == 1
    assert (m.rebalance_timeout_ms, m.session_timeout_ms) == (1_000, 7_000)
    g.update_member(m, m.protocols, 1_000, 7_000, join_handle=None)
    assert g.num_members_awaiting_join == 0


def test_maybe_elect_new_joined_leader_prefers_a_rejoined_member() -> None:
    g = ClassicGroup("g", 0)
    g.add(member("a"))
    g.add(member("b"), join_handle=1)
    assert g.maybe_elect_new_joined_leader() is True
    assert g.leader_id == "b"


def test_maybe_elect_new_joined_leader_false_when_nobody_rejoined() -> None:
    g = ClassicGroup("g", 0)
    g.add(member("a"))
    assert g.maybe_elect_new_joined_leader() is False
    assert ClassicGroup("empty", 0).maybe_elect_new_joined_leader() is False


# -- protocols ------------------------------------------------------------------------------------


def _seed_example_group() -> ClassicGroup:
    """candidates [A, B]; member1 [B, A]; member2 [A, B, C]; member3 [D, B, A]."""
    g = ClassicGroup("g", 0)
    g.add(member("m1", protocols=(("B", b""), ("A", b""))))
    g.state = S.PREPARING_REBALANCE
    g.add(member("m2", protocols=(("A", b""), ("B", b""), ("C", b""))))
    g.add(member("m3", protocols=(("D", b""), ("B", b""), ("A", b""))))
    return g


def test_candidateProtocols_are_supported_by_every_member() -> None:
    assert _seed_example_group().candidate_protocols() == {"A", "B"}


def test_selectProtocol_seed_example_B_wins() -> None:
    g = _seed_example_group()
    assert [m.vote(g.candidate_protocols()) for m in g.members.values()] == ["B", "A", "B"]
    assert g.select_protocol() == "B"


def test_selectProtocol_member_order_of_preference_matters() -> None:
    g = ClassicGroup("g", 0)
    g.add(member("m1", protocols=(("A", b""), ("B", b""))))
    g.state = S.PREPARING_REBALANCE
    g.add(member("m2", protocols=(("A", b""), ("B", b""))))
    assert g.select_protocol() == "A"


def test_selectProtocol_on_empty_group_fails() -> None:
    with pytest.raises(ValueError):
        ClassicGroup("g", 0).select_protocol()


def test_supportsProtocols_empty_group_needs_type_and_protocols() -> None:
    g = ClassicGroup("g", 0)
    assert g.supports_protocols("consumer", {"range"})
    assert not g.supports_protocols("", {"range"})
    assert not g.supports_protocols("consumer", set())


def test_supportsProtocols_non_empty_group_needs_a_common_protocol() -> None:
    g = _seed_example_group()
    assert g.supports_protocols("consumer", {"A", "Z"})
    assert not g.supports_protocols("consumer", {"C", "D"})
    assert not g.supports_protocols("connect", {"A"})


# -- MemberMetadata -------------------------------------------------------------------------------


def test_member_matches_requires_same_order_and_metadata() -> None:
    m = member("a", protocols=(("x", b"1"), ("y", b"2")))
    assert m.matches((("x", b"1"), ("y", b"2")))
    assert not m.matches((("y", b"2"), ("x", b"1")))
    assert not m.matches((("x", b"other"), ("y", b"2")))


def test_hasSatisfiedHeartbeat() -> None:
    m = member("a")
    assert not m.has_satisfied_heartbeat()
    m.awaiting_join = "h"
    assert m.has_satisfied_heartbeat()
    m.is_new = True
    assert not m.has_satisfied_heartbeat()  # new members can expire while awaiting join
    m.is_new, m.awaiting_join, m.awaiting_sync = False, None, "s"
    assert m.has_satisfied_heartbeat()


# -- subscriptions --------------------------------------------------------------------------------


def test_decode_subscription_topics_reads_every_version_prefix() -> None:
    for version in (0, 1, 3):
        data = encode_subscription_topics(["orders", "payments"], version=version) + b"\x00\x01trailing"
        assert decode_subscription_topics(data) == {"orders", "payments"}


def test_decode_subscription_topics_rejects_garbage() -> None:
    with pytest.raises(SubscriptionDecodeError):
        decode_subscription_topics(b"\x00")
    with pytest.raises(SubscriptionDecodeError):
        decode_subscription_topics(b"\x00\x00\x00\x00\x00\x01\x00\x09ab")


def test_compute_subscribed_topics_for_consumer_group() -> None:
    g = ClassicGroup("g", 0)
    g.add(member("a", protocols=(("range", encode_subscription_topics(["t1"])),)))
    g.state = S.PREPARING_REBALANCE
    g.add(member("b", protocols=(("range", encode_subscription_topics(["t2", "t1"])),)))
    g.init_next_generation(10)
    assert g.subscribed_topics == {"t1", "t2"}
    assert g.is_subscribed_to_topic("t2")
    assert not g.is_subscribed_to_topic("t3")


def test_unparseable_subscription_makes_consumer_group_subscribed_to_everything() -> None:
    g = ClassicGroup("g", 0)
    g.add(member("a", protocols=(("range", b"junk"),)))
    g.state = S.PREPARING_REBALANCE
    g.init_next_generation(10)
    assert g.subscribed_topics is None
    assert g.is_subscribed_to_topic("anything")


def test_non_consumer_group_has_no_known_subscriptions() -> None:
    g = ClassicGroup("g", 0)
    g.add(member("a", protocol_type="connect"))
    g.state = S.PREPARING_REBALANCE
    g.init_next_generation(10)
    assert g.subscribed_topics is None
    assert not g.is_subscribed_to_topic("t")


def test_initNextGeneration_bumps_generation_and_picks_protocol() -> None:
    g = _seed_example_group()
    g.init_next_generation(55)
    assert (g.generation_id, g.protocol_name, g.state) == (1, "B", S.COMPLETING_REBALANCE)
    assert g.current_state_timestamp == 55


def test_initNextGeneration_of_empty_group_goes_empty() -> None:
    g = group_in(S.PREPARING_REBALANCE)
    g.protocol_name = "range"
    g.init_next_generation(55)
    assert (g.generation_id, g.protocol_name, g.state) == (1, None, S.EMPTY)
