"""A coordinator for one partition driven by hand: manual clock, real keyed timers, an in-memory
log. Tests (ours and the broker's) use it to walk through rebalances in milliseconds.

It runs the same executor as the asyncio service, so a reply that waits on a write is only seen
after the (in-memory) append "succeeded"; `fail_next_append` makes the next append fail.
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import Any

from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.purgatory.clock import ManualClock
from kbroker.purgatory.timers import KeyedTimers, TimerFired

from kbroker.coordinator.groups import commands as c
from kbroker.coordinator.groups.shard import GroupCoordinatorShard
from kbroker.coordinator.config import GroupConfig
from kbroker.coordinator.runtime.execute import execute_outcome, run_now
from kbroker.coordinator.runtime.outcome import CancelTimer, Reply, TimerOp
from kbroker.protocol.records.classic_records import Record


class Harness:
    def __init__(self, config: GroupConfig | None = None, *, start_ms: int = 1_000_000, partition: int = 0,
                 topics: Any = None, max_batch_bytes: int | None = None, group_types: Any = None,
                 group_config: Any = None) -> None:
        self.clock = ManualClock(start_ms)
        self.timers = KeyedTimers(self.clock)
        self._ids = itertools.count(1)
        self.machine = GroupCoordinatorShard(
            partition, config, new_member_id=lambda prefix: f"{prefix}-{next(self._ids)}",
            **({"topics": topics} if topics is not None else {}),
            **({"max_batch_bytes": lambda: max_batch_bytes} if max_batch_bytes is not None else {}),
            **({"group_types": group_types} if group_types is not None else {}),
            **({"group_config": group_config} if group_config is not None else {}),
        )
        self.log: list[Record] = []
        self.events: list[Any] = []
        self.replies: dict[Any, list[Any]] = {}
        self.fail_next_append: ErrorCode | None = None
        self.stale_expiries = 0
        self._handles = itertools.count(1)
        self._fired: deque[tuple[c.TimerExpiry, TimerFired]] = deque()

    @property
    def config(self) -> GroupConfig:
        return self.machine.config

    def set_config(self, config: GroupConfig) -> None:
        """The settings changed under a live shard (an operator's new limits): the shard and its types."""
        self.machine.config = config
        for group_type in self.machine.types:
            group_type.config = config  # type: ignore[misc]

    def group(self, group_id: str):  # noqa: ANN201 - the group, of whatever type, or None
        return self.machine.group(group_id)

    def offsets(self, group_id: str = "g") -> dict:
        """The group's committed offsets: (topic, partition) -> OffsetAndMetadata."""
        return dict(self.machine.offsets.of(group_id))

    # -- driving -------------------------------------------------------------------------------

    def send(self, cmd: c.Command) -> int:
        """Submit a command; returns the handle its answer will be addressed to."""
        handle = next(self._handles)
        if hasattr(cmd, "reply_to"):
            cmd.reply_to = handle  # type: ignore[union-attr]
        self._process(cmd)
        return handle

    def call(self, cmd: c.Command) -> Any:
        """Submit and return the answer if it came at once (None if it is parked)."""
        return self.take(self.send(cmd))

    def take(self, handle: int) -> Any:
        answers = self.replies.get(handle)
        if not answers:
            return None
        answer = answers.pop(0)
        if not answers:
            del self.replies[handle]
        return answer

    def advance(self, ms: int) -> None:
        """Move time forward, stopping at every timer deadline on the way so that each expiry
        is handled at its own time (a timer armed by an expiry then starts from the right
        moment), and deliver expiries as the runtime would."""
        target = self.clock.now_ms() + ms
        while True:
            due = self.timers.next_deadline_ms()
            if due is None or due > target:
                break
            self.clock.advance(max(0, due - self.clock.now_ms()))
            self._fire_due()
        self.clock.advance(target - self.clock.now_ms())
        self._fire_due()

    def _fire_due(self) -> None:
        while True:
            self.timers.advance_to(self.clock.now_ms())
            if not self._fired:
                return
            while self._fired:
                expiry, fired = self._fired.popleft()
                if not self.timers.claim(fired.key, fired.token):
                    self.stale_expiries += 1
                    continue
                self._process(expiry)

    def load(self, records: list[Record]) -> None:
        self.machine.begin_load()
        for record in records:
            self.machine.replay(record)
        self._execute(self.machine.finish_load(self.clock.wall_ms()))

    def unload(self) -> None:
        self._execute(self.machine.unload(self.clock.wall_ms()))

    def armed(self, key: str) -> bool:
        return key in self.timers

    def deadline(self, key: str) -> int | None:
        return self.timers.deadline_ms(key)

    # -- common walks ---------------------------------------------------------------------

    def new_member_id(self, group_id: str = "g", client_id: str = "client", **kw: Any) -> str:
        """Do the MEMBER_ID_REQUIRED round trip and return the id the coordinator handed out."""
        result = self.call(join_request(group_id, client_id=client_id, **kw))
        if result is None or result.error is not ErrorCode.MEMBER_ID_REQUIRED:
            raise AssertionError(f"expected MEMBER_ID_REQUIRED, got {result}")
        return result.member_id

    def stable_group(self, group_id: str = "g", members: int = 2, **kw: Any) -> list[str]:
        """Bring a new group to Stable with `members` dynamic members; returns their ids, leader first."""
        ids = [self.new_member_id(group_id, client_id=f"client{i}", **kw) for i in range(members)]
        handles = [self.send(join_request(group_id, mid, client_id=f"client{i}", **kw)) for i, mid in enumerate(ids)]
        for _ in range(100):
            if all(h in self.replies for h in handles):
                break
            self.advance(self.config.group_initial_rebalance_delay_ms)
        results = [self.take(h) for h in handles]
        if any(r is None or r.error is not ErrorCode.NONE for r in results):
            raise AssertionError(f"join did not complete: {results}")
        leader = results[0].leader_id
        generation = results[0].generation_id
        ordered = [leader] + [m for m in ids if m != leader]
        followers = [self.send(c.SyncGroup(group_id, generation, m)) for m in ordered[1:]]
        assignment = tuple((m, f"assignment-{m}".encode()) for m in ordered)
        lead = self.send(c.SyncGroup(group_id, generation, leader, assignments=assignment))
        for h in [lead, *followers]:
            result = self.take(h)
            if result is None or result.error is not ErrorCode.NONE:
                raise AssertionError(f"sync did not complete: {result}")
        return ordered

    # -- plumbing ------------------------------------------------------------------------------

    def _process(self, cmd: c.Command) -> None:
        self._execute(self.machine.handle(cmd, self.clock.wall_ms()))

    def _execute(self, outcome) -> None:  # noqa: ANN001
        run_now(execute_outcome(
            self.machine, outcome,
            now_ms=self.clock.wall_ms,
            append=self._append,
            deliver=self._deliver,
            apply_timer=self._apply_timer,
            on_event=self.events.append,
        ))

    async def _append(self, partition: int, records: list[Record]) -> None:
        if self.fail_next_append is not None:
            code, self.fail_next_append = self.fail_next_append, None
            raise KafkaError("append failed", code)
        self.log.extend(records)

    def _deliver(self, reply: Reply) -> None:
        self.replies.setdefault(reply.to, []).append(reply.result)

    def _apply_timer(self, op: TimerOp) -> None:
        if isinstance(op, CancelTimer):
            self.timers.cancel(op.key)
            return
        expiry = op.expiry
        self.timers.schedule(op.key, op.delay_ms, lambda fired: self._fired.append((expiry, fired)))


# -- request builders -----------------------------------------------------------

DEFAULT_PROTOCOLS: tuple[tuple[str, bytes], ...] = (("range", b"range-meta"),)


def join_request(
    group_id: str = "g",
    member_id: str = c.UNKNOWN_MEMBER_ID,
    *,
    instance_id: str | None = None,
    require_known_member_id: bool | None = None,
    client_id: str = "client",
    client_host: str = "/10.0.0.1",
    session_timeout_ms: int = 10_000,
    rebalance_timeout_ms: int = 30_000,
    protocol_type: str = "consumer",
    protocols: tuple[tuple[str, bytes], ...] = DEFAULT_PROTOCOLS,
    reason: str | None = None,
    supports_skip_assignment: bool = False,
) -> c.JoinGroup:
    """A JoinGroup as the broker would build it for v4+ (dynamic members must know their id)."""
    if require_known_member_id is None:
        require_known_member_id = instance_id is None
    return c.JoinGroup(
        group_id, member_id, instance_id, require_known_member_id, client_id, client_host,
        rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, reason,
        supports_skip_assignment,
    )
