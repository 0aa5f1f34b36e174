"""Classic group state (Kafka's GroupMetadata / ClassicGroup): states, members, votes, and the
answers every group type gives the group shard (group_types.Group: who may commit, fetch and delete
offsets, when offsets expire, how the group is listed and deleted).

Nothing here does I/O or reads a clock; times come in as arguments.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar, cast

from ....protocol.errors import ErrorCode
from ....protocol.records.classic_records import GroupMetadataTombstone
from .. import commands as c
from ..offset_store import OffsetAndMetadata
from ..results import ListedGroup
from .member import Handle, Member, Protocols
from .subscription import SubscriptionDecodeError, decode_subscription_topics

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


S = GroupState
# Target state -> the states it may be entered from (the seeds' validPreviousStates table).
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.DEAD: frozenset({S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD}),
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
}


class IllegalStateTransition(RuntimeError):
    pass


TopicPartition = tuple[str, int]
# Every group's members until its first member joins (read-only: a write to it fails loudly).
_NO_MEMBERS: dict[str, Member] = cast("dict[str, Member]", MappingProxyType({}))


@dataclass(slots=True)
class RebalanceInProgress:
    """Why and when the current rebalance started; reported once the generation completes."""

    started_ms: int
    reason: str
    trigger_member: str | None
    client_reason: str | None


E = ErrorCode
CLASSIC_GROUP_TYPE = "classic"


class ClassicGroup:
    group_type: ClassVar[str] = CLASSIC_GROUP_TYPE
    __slots__ = (
        "group_id", "state", "previous_state", "current_state_timestamp", "generation_id",
        "protocol_type", "protocol_name", "leader_id", "members", "_pending_members",
        "_pending_sync_members", "_static_members", "_supported_protocols",
        "num_members_awaiting_join", "new_member_added", "subscribed_topics",
        "rebalance", "generation_members",
    )

    def __init__(
        self,
        group_id: str,
        now_ms: int,
        state: GroupState = GroupState.EMPTY,
        *,
        current_state_timestamp: int | None = None,
    ) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state = state
        self.current_state_timestamp: int | None = (
            now_ms if current_state_timestamp is None else current_state_timestamp
        )
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        # Insertion order matters: leader re-election takes the first remaining member. A read-only
        # empty mapping until the first member joins: most groups only hold committed offsets.
        self.members: dict[str, Member] = _NO_MEMBERS
        # Made on first use (the properties below): most groups only hold committed offsets, and
        # these four empty containers would be about 600 bytes of each such group.
        self._pending_members: set[str] | None = None
        self._pending_sync_members: set[str] | None = None
        self._static_members: dict[str, str] | None = None
        self._supported_protocols: Counter[str] | None = None
        self.num_members_awaiting_join = 0
        # Set when a member joins a brand-new group during its initial delay, which extends it.
        self.new_member_added = False
        # For "consumer" groups: topics the members subscribe to; None when unknown.
        self.subscribed_topics: frozenset[str] | None = None
        self.rebalance: RebalanceInProgress | None = None
        self.generation_members: tuple[str, ...] = ()

    @property
    def pending_members(self) -> set[str]:
        """Ids handed out with MEMBER_ID_REQUIRED whose owners have not joined with them yet."""
        found = self._pending_members
        if found is None:
            found = self._pending_members = set()
        return found

    @property
    def pending_sync_members(self) -> set[str]:
        found = self._pending_sync_members
        if found is None:
            found = self._pending_sync_members = set()
        return found

    @property
    def static_members(self) -> dict[str, str]:
        """group.instance.id -> member id"""
        found = self._static_members
        if found is None:
            found = self._static_members = {}
        return found

    @property
    def supported_protocols(self) -> Counter[str]:
        found = self._supported_protocols
        if found is None:
            found = self._supported_protocols = Counter()
        return found

    # -- state -------------------------------------------------------------------------------

    def is_state(self, state: GroupState) -> bool:
        return self.state is state

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            allowed = ", ".join(sorted(str(s) for s in VALID_PREVIOUS_STATES[target]))
            raise IllegalStateTransition(
                f"group {self.group_id} must be in one of [{allowed}] to move to {target}, "
                f"but it is {self.state}"
            )
        self.previous_state = self.state
        self.state = target
        self.current_state_timestamp = now_ms

    # -- members -----------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> Member:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def add(self, member: Member, join_handle: Handle | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise ValueError(f"static member {member.group_instance_id} is already in the group")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise ValueError("member protocol type differs from the group's")
        if not self.supports_protocols(member.protocol_type, member.protocol_names):
            raise ValueError("member supports none of the group's candidate protocols")
        if self.leader_id is None:
            self.leader_id = member.member_id
        if self.members is _NO_MEMBERS:
            self.members = {}
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names)
        member.awaiting_join = join_handle
        if member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None) if self.members else None
        if member is not None:
            self.supported_protocols.subtract(member.protocol_names)
            if member.is_awaiting_join:
                self.num_members_awaiting_join -= 1
            if member.group_instance_id is not None:
                if self.static_members.get(member.group_instance_id) == member_id:
                    del self.static_members[member.group_instance_id]
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def update_member(
        self,
        member: Member,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_handle: Handle | None,
    ) -> None:
        self.supported_protocols.subtract(member.protocol_names)
        member.set_protocols(protocols)
        self.supported_protocols.update(member.protocol_names)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if join_handle is not None and not member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        elif join_handle is None and member.is_awaiting_join:
            self.num_members_awaiting_join -= 1
        member.awaiting_join = join_handle

    def take_join_handle(self, member: Member) -> Handle | None:
        """Detach the member's parked JoinGroup so it can be answered (once)."""
        handle = member.awaiting_join
        if handle is not None:
            member.awaiting_join = None
            self.num_members_awaiting_join -= 1
        return handle

    @staticmethod
    def take_sync_handle(member: Member) -> Handle | None:
        handle = member.awaiting_sync
        member.awaiting_sync = None
        return handle

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> Member:
        """Give a static member a new member id, keeping everything else; returns the member.

        Anything still parked under the old id must be fenced by the caller first.
        """
        if not self.members:
            raise KeyError(old_member_id)
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        self.generation_members = tuple(
            new_member_id if m == old_member_id else m for m in self.generation_members
        )
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def add_pending_member(self, member_id: str) -> None:
        if self.has(member_id):
            raise ValueError(f"{member_id} is already a member")
        self.pending_members.add(member_id)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_members

    def not_yet_rejoined_members(self) -> list[Member]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else promote the first member that did.

        False when there is no leader (no members) or nobody rejoined.
        """
        if self.leader_id is None:
            return False
        leader = self.members[self.leader_id]
        if leader.is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    # -- protocols ---------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports (vote count equals the member count)."""
        n = len(self.members)
        return {name for name, votes in self.supported_protocols.items() if votes == n and n > 0}

    def supports_protocols(self, protocol_type: str, protocol_names: frozenset[str] | set[str]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocol_names)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols.get(name, 0) == n for name in protocol_names
        )

    def select_protocol(self) -> str:
        """Each member votes for its favourite candidate; the most votes wins.

        Kafka leaves ties to hash-map order; here a tie goes to the protocol that got its first
        vote earliest in member order, so the outcome is reproducible.
        """
        if not self.members:
            raise ValueError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes.items(), key=lambda kv: kv[1])[0]

    # -- generations -------------------------------------------------------------------------

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        if not self.uses_consumer_protocol():
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics |= decode_subscription_topics(member.metadata(self.protocol_name))
        except (SubscriptionDecodeError, KeyError):
            return None
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Unknown subscriptions count as subscribed only for "consumer" groups (to be safe)."""
        if self.subscribed_topics is not None:
            return topic in self.subscribed_topics
        return self.uses_consumer_protocol()

    def validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode | None:
        """A static member's instance id must map to this member id; the member must exist."""
        if instance_id is not None:
            current = self.static_member_id(instance_id)
            if current is None:
                return E.UNKNOWN_MEMBER_ID
            if current != member_id:
                return E.FENCED_INSTANCE_ID
        if not self.has(member_id):
            return E.UNKNOWN_MEMBER_ID
        return None

    # -- what every group answers (group_types.Group) ----------------------------------------

    def validate_offset_commit(self, cmd: c.OffsetCommit) -> ErrorCode | None:
        if cmd.validate_only:
            return self._validate_txn_offset_commit(cmd)
        if self.is_state(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if cmd.transactional:
            return None
        if cmd.generation_id < 0 and self.is_state(S.EMPTY):
            return None  # simple commit into an empty group
        if cmd.generation_id >= 0 or cmd.member_id != c.UNKNOWN_MEMBER_ID or cmd.group_instance_id is not None:
            error = self.validate_member(cmd.member_id, cmd.group_instance_id)
            if error is not None:
                return error
            if cmd.generation_id != self.generation_id:
                return E.ILLEGAL_GENERATION
        elif not self.is_state(S.EMPTY):
            # Without member id and generation only an empty group takes commits.
            return E.UNKNOWN_MEMBER_ID
        if self.is_state(S.COMPLETING_REBALANCE):
            # The member has its new generation but not its assignment yet; let it retry after sync.
            return E.REBALANCE_IN_PROGRESS
        return None

    def _validate_txn_offset_commit(self, cmd: c.OffsetCommit) -> ErrorCode | None:
        """Kafka's validateOffsetCommit with isTransactional: without member id and generation anyone
        may commit (a producer that is not a member); with them, they must be the group's current ones."""
        if self.is_state(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if cmd.generation_id < 0 and self.is_state(S.EMPTY):
            return None
        if cmd.generation_id >= 0 or cmd.member_id != c.UNKNOWN_MEMBER_ID or cmd.group_instance_id is not None:
            error = self.validate_member(cmd.member_id, cmd.group_instance_id)
            if error is not None:
                return error
            if cmd.generation_id != self.generation_id:
                return E.ILLEGAL_GENERATION
        return None

    def validate_offset_fetch(self, cmd: c.OffsetFetch) -> ErrorCode | None:
        return None  # anyone may read a classic group's offsets

    def validate_offset_delete(self) -> ErrorCode | None:
        if self.is_state(S.DEAD):
            return E.GROUP_ID_NOT_FOUND
        if not self.is_state(S.EMPTY) and not self.uses_consumer_protocol():
            # Only the "consumer" protocol tells us which topics are in use.
            return E.NON_EMPTY_GROUP
        return None

    def validate_delete_group(self) -> ErrorCode | None:
        if self.is_state(S.DEAD):
            return E.GROUP_ID_NOT_FOUND
        if not self.is_state(S.EMPTY):
            return E.NON_EMPTY_GROUP
        return None

    def offset_expiration(self) -> Callable[[OffsetAndMetadata], int] | None:
        """removeExpiredOffsets / getExpiredOffsets:
        - a group with a protocol type that is Empty: from when it became Empty (or from the commit
          if that time is unknown);
        - a Stable "consumer" group whose subscriptions are known: commit time (for the topics nobody
          subscribes to: the store skips the others);
        - a simple group (no protocol type): commit time;
        - any other group keeps its offsets."""
        if self.protocol_type is None:
            return _commit_time
        if self.is_state(S.EMPTY):
            state_ts = self.current_state_timestamp
            return _commit_time if state_ts is None else (lambda o: state_ts)
        if self.uses_consumer_protocol() and self.subscribed_topics is not None and self.is_state(S.STABLE):
            return _commit_time
        return None

    def is_empty(self) -> bool:
        # Not while a member holds an id from MEMBER_ID_REQUIRED: it is about to join.
        return self.is_state(S.EMPTY) and not self.pending_members

    def tombstones(self) -> list[GroupMetadataTombstone]:
        # A group that never had a generation never wrote a GroupMetadata record: nothing to tombstone.
        return [GroupMetadataTombstone(self.group_id)] if self.generation_id > 0 else []

    def listed(self) -> ListedGroup | None:
        if self.is_state(S.DEAD):
            return None
        return ListedGroup(self.group_id, self.protocol_type or "", str(self.state))

    def __repr__(self) -> str:
        return (
            f"ClassicGroup({self.group_id!r}, {self.state}, generation={self.generation_id}, "
            f"members={list(self.members)})"
        )


def _commit_time(o: OffsetAndMetadata) -> int:
    return o.commit_timestamp
