"""What each group's recent rebalances were, kept by the coordinator for the CLI and the metrics.

A bounded ring per group (in memory, newest last) of completed rebalances with the fields of the
`rebalance_completed` event, plus the test controls applied to the group, so `kbroker group
history` reads it live from the broker instead of a log file. A rebalance that has not completed
is not in the ring: `in_progress` describes it from the group's current state (when it started,
who is still awaited, how much of the rebalance timeout is left), which is what "why is my group
stuck" needs.

Entries carry a `group_type` so that a second coordinator (KIP-848 consumer groups) records into
the same ring; listeners (the metrics) see every entry as it is recorded.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from .classic.group import ClassicGroup, GroupState
from .events import AssignmentChanged, RebalanceCompleted

DEFAULT_DEPTH = 50
# Groups come and go (a test suite makes a new group id per test): past this many, the history of
# the group that has gone longest without a rebalance is dropped, so memory stays bounded.
DEFAULT_MAX_GROUPS = 10_000
S = GroupState


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One line of a group's history: a completed rebalance (kind "rebalance") or a test control
    applied to the group (kind "control"; `reason` says which and with what arguments)."""

    time_ms: int
    group_id: str
    kind: str
    reason: str
    group_type: str = "classic"
    old_generation: int | None = None
    new_generation: int | None = None
    client_reason: str | None = None
    trigger_member: str | None = None
    members_in: tuple[str, ...] = ()
    members_out: tuple[str, ...] = ()
    member_count: int | None = None
    duration_ms: int | None = None
    session_timeout_ms: int | None = None  # a consumer group's member fenced by session expiry
    # A consumer, streams or share group's epoch: the members whose target assignment moved with it.
    members_moved: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["members_in"] = list(self.members_in)
        out["members_out"] = list(self.members_out)
        out["members_moved"] = list(self.members_moved)
        return out


Listener = Callable[[HistoryEntry], None]


@dataclass(slots=True)
class RebalanceHistory:
    depth: int = DEFAULT_DEPTH
    max_groups: int = DEFAULT_MAX_GROUPS
    _rings: OrderedDict[str, deque[HistoryEntry]] = field(default_factory=OrderedDict)
    _listeners: list[Listener] = field(default_factory=list)

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def record_event(self, event: object, now_ms: int) -> HistoryEntry | None:
        """Keep what an event of the group shard says about a group's rebalances (others: None)."""
        if isinstance(event, RebalanceCompleted):
            return self.record_rebalance(event, now_ms)
        if isinstance(event, AssignmentChanged):
            return self.record_epoch(event, now_ms)
        return None

    def record_rebalance(self, event: RebalanceCompleted, now_ms: int, group_type: str = "classic") -> HistoryEntry:
        return self._add(HistoryEntry(
            time_ms=now_ms, group_id=event.group_id, kind="rebalance", reason=event.reason,
            group_type=group_type, old_generation=event.old_generation, new_generation=event.new_generation,
            client_reason=event.client_reason, trigger_member=event.trigger_member,
            members_in=event.members_in, members_out=event.members_out, member_count=event.member_count,
            duration_ms=event.duration_ms,
        ))

    def record_epoch(self, event: AssignmentChanged, now_ms: int) -> HistoryEntry:
        """A consumer group (KIP-848), a streams group (KIP-1071) or a share group (KIP-932) moved to a new
        group epoch: its membership, subscriptions or topology changed. The epoch stands where a classic group's generation stands; there is no group-wide
        rebalance to time (members reconcile one by one), so there is no duration."""
        return self._add(HistoryEntry(
            time_ms=now_ms, group_id=event.group_id, kind="rebalance", reason=event.reason, group_type=event.group_type,
            old_generation=event.previous_epoch, new_generation=event.group_epoch,
            trigger_member=event.trigger_member, members_in=event.members_in, members_out=event.members_out,
            member_count=event.member_count, session_timeout_ms=event.session_timeout_ms,
            members_moved=event.members_moved,
        ))

    def record_control(self, group_id: str, what: str, now_ms: int) -> HistoryEntry:
        return self._add(HistoryEntry(time_ms=now_ms, group_id=group_id, kind="control", reason=what))

    def entries(self, group_id: str) -> list[HistoryEntry]:
        return list(self._rings.get(group_id, ()))

    def groups(self) -> list[str]:
        return sorted(self._rings)

    def forget(self, group_id: str | None = None) -> None:
        """Drop one group's history (the group was deleted) or every group's (a broker reset)."""
        if group_id is None:
            self._rings.clear()
        else:
            self._rings.pop(group_id, None)

    def _add(self, entry: HistoryEntry) -> HistoryEntry:
        ring = self._rings.get(entry.group_id)
        if ring is None:
            ring = self._rings[entry.group_id] = deque(maxlen=self.depth)
            if len(self._rings) > self.max_groups:
                self._rings.popitem(last=False)
        else:
            self._rings.move_to_end(entry.group_id)
        ring.append(entry)
        for listener in self._listeners:
            listener(entry)
        return entry


def in_progress(group: ClassicGroup | None, now_ms: int) -> dict[str, Any] | None:
    """The rebalance a classic group is in the middle of, and what it is waiting for; None when
    the group is not rebalancing."""
    if group is None or group.state not in (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE):
        return None
    info = group.rebalance
    started = info.started_ms if info is not None else group.current_state_timestamp or now_ms
    timeout_ms = group.rebalance_timeout_ms()
    elapsed_ms = max(now_ms - started, 0)
    left_s = max(timeout_ms - elapsed_ms, 0) / 1000
    total = len(group.members)
    if group.is_state(S.PREPARING_REBALANCE):
        waiting = sorted(m.member_id for m in group.not_yet_rejoined_members())
        phase = "join"
        if group.previous_state is S.EMPTY:
            why = (f"initial rebalance delay: {total} member(s) joined so far; the group completes when no "
                   f"new member arrives within group.initial.rebalance.delay.ms")
        else:
            why = (f"waiting for {len(waiting)} of {total} members to rejoin, {left_s:.0f} s of "
                   f"{timeout_ms / 1000:.0f} s rebalance timeout left")
    else:
        waiting = sorted(group.pending_sync_members)
        phase = "sync"
        leader_synced = group.leader_id is not None and group.leader_id not in group.pending_sync_members
        who = "the assignment from the leader" if not leader_synced else f"{len(waiting)} of {total} SyncGroups"
        why = f"waiting for {who}, {left_s:.0f} s of {timeout_ms / 1000:.0f} s rebalance timeout left"
    return {
        "group_id": group.group_id,
        "state": str(group.state),
        "phase": phase,
        "generation": group.generation_id,
        "started_ms": started,
        "elapsed_ms": elapsed_ms,
        "reason": info.reason if info is not None else "unknown",
        "client_reason": info.client_reason if info is not None else None,
        "trigger_member": info.trigger_member if info is not None else None,
        "members": total,
        "members_waiting": waiting,
        "rebalance_timeout_ms": timeout_ms,
        "why": why,
    }


# The coordinator's reasons name members ("member X joined"); metrics need a small fixed set.
_REASON_KINDS = (
    ("forced by test control", "test_control"),
    ("(test control)", "test_control"),
    ("updated its metadata", "metadata_changed"),
    ("session expired", "session_expired"),
    ("did not sync in time", "sync_timeout"),
    (" joined", "member_joined"),
    (" rejoined", "member_rejoined"),
    (" left", "member_left"),
)


def reason_kind(reason: str) -> str:
    for needle, kind in _REASON_KINDS:
        if needle in reason:
            return kind
    return "other"
