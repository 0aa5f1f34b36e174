"""The group shard of one `__consumer_offsets` partition (Kafka's GroupCoordinatorShard): one map of
groups (store.py), one offset store (offset_store.py) and the registered group types
(group_types.py, registry.py), behind the runtime's `Shard` protocol.

    shard.handle(command, now_ms) -> Outcome        decide (requests, timer expiries, test controls)
    shard.replay(record)                            apply a durable record to memory
    shard.on_write_done(follow_up, error, now_ms)   finish what waited on a write
    shard.begin_load(); replay...; finish_load()    rebuild from the log; unload() resigns

Who decides what:
- a type's own commands (its protocol's requests and timers) go to that type, with whatever group
  their id names; a group of another type that takes such a command (`also_handles`: a consumer
  group takes the classic protocol during a migration) gets it instead;
- offsets (OffsetCommit, OffsetFetch, OffsetDelete, retention) and DeleteGroups are decided here,
  once for every type, with the group's own answers (group_types.Group);
- a test control goes to its group's type;
- a record goes to the offset store or to the type that registered its class; a follow-up, to the
  type that registered its class (GroupRemoved is the shard's own).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ...protocol.errors import ErrorCode
from ...protocol.records.classic_records import OffsetCommitRecord, OffsetCommitTombstone
from ..config import GroupConfig, default_max_batch_bytes
from ..runtime.outcome import Outcome, Reply
from . import commands as c
from .classic.classic import random_member_id
from .context import Ctx
from .events import GroupRemoved, WriteFailed
from .group_types import GroupType, GroupTypeFactory, TypeContext
from .offset_store import OffsetStore
from .registry import GROUP_TYPES
from .results import ControlResult, DeletedGroup, ListedGroup, error_result_for
from .store import GroupStore

E = ErrorCode


def no_topics() -> Mapping[str, Any]:
    """The topics image of a shard that has none (unit tests, tools)."""
    return {}


class GroupCoordinatorShard:
    def __init__(
        self,
        partition: int,
        config: GroupConfig | None = None,
        *,
        new_member_id: Callable[[str], str] = random_member_id,
        topics: Callable[[], Mapping[str, Any]] = no_topics,
        max_batch_bytes: Callable[[], int] = default_max_batch_bytes,
        group_types: Iterable[GroupTypeFactory] = GROUP_TYPES,
        group_config: Callable[[str, str], str | None] | None = None,
    ) -> None:
        self.partition = partition
        self.config = config or GroupConfig()
        self.max_batch_bytes = max_batch_bytes  # the partition's largest batch (offset_store.cannot_fit)
        self.offsets = OffsetStore()
        self.groups = GroupStore(self.offsets.has)
        self.loading = False
        context = TypeContext(partition, self.config, self.groups, self.offsets, topics, max_batch_bytes,
                              new_member_id, self.handle)
        if group_config is not None:
            context.group_config = group_config
        self.types: tuple[GroupType, ...] = tuple(factory(context) for factory in group_types)
        # The first type makes the simple groups that hold offsets committed without group management.
        self.groups.simple_group = self.types[0].simple_group  # type: ignore[attr-defined]
        self._by_name: dict[str, GroupType] = {t.name: t for t in self.types}
        self._home: dict[type, GroupType] = {cls: t for t in self.types for cls in t.commands}
        self._also: dict[str, frozenset[type]] = {t.name: frozenset(t.also_handles) for t in self.types}
        self._record_owner: dict[type, GroupType] = {cls: t for t in self.types for cls in t.records}
        self._follow_up_owner: dict[type, GroupType] = {cls: t for t in self.types for cls in t.follow_ups}

    def type_of(self, group: Any) -> GroupType:
        return self._by_name[group.group_type]

    def group_type(self, name: str) -> GroupType:
        """The registered type called `name` ("classic", "consumer")."""
        return self._by_name[name]

    # -- the Shard protocol --------------------------------------------------------------------

    def key_of(self, cmd: Any) -> str:
        return cmd.group_id

    def error_result(self, cmd: Any, code: ErrorCode) -> Any:
        return error_result_for(cmd, code)

    def handle(self, cmd: Any, now_ms: int) -> Outcome:
        cls = cmd.__class__
        if cls is c.OffsetCommit:  # the commonest: every consumer commits
            ctx = Ctx(self.config, now_ms, Outcome())
            self.offsets.commit(ctx, cmd, self.groups.groups.get(cmd.group_id), self._new_simple_group,
                                self._committed, self.max_batch_bytes)
            return ctx.out
        home = self._home.get(cls)
        group = self.groups.groups.get(cmd.group_id)
        if home is not None:
            if group is not None:
                owner = group.group_type
                if owner != home.name and cls in self._also[owner]:
                    return self._by_name[owner].handle(cmd, group, now_ms)
            return home.handle(cmd, group, now_ms)
        ctx = Ctx(self.config, now_ms, Outcome())
        match cmd:
            case c.OffsetFetch():
                self.offsets.fetch(ctx, cmd, group)
            case c.OffsetDelete():
                self.offsets.delete(ctx, cmd, group)
            case c.DeleteTopicOffsets():
                self.offsets.delete_topics(ctx, cmd)
            case c.OffsetExpiryCheck():
                self._expire_offsets(ctx, group)
            case c.DeleteGroup():
                self._delete_group(ctx, cmd, group)
            case _ if getattr(cmd, "is_control", False):
                if group is not None:
                    return self.type_of(group).handle(cmd, group, now_ms)
                ctx.out.reply(cmd.reply_to, ControlResult(E.GROUP_ID_NOT_FOUND, f"group {cmd.group_id} does not exist"))
            case _:
                raise TypeError(f"unknown command {cls.__name__}")
        return ctx.out

    def replay(self, record: Any) -> None:
        cls = record.__class__
        if cls is OffsetCommitRecord:
            if record.group not in self.groups.groups:
                # Offsets without a group: a simple (offsets-only) group.
                self._new_simple_group(record.group, record.commit_timestamp)
            self.offsets.replay_commit(record)
            return
        if cls is OffsetCommitTombstone:
            self.offsets.replay_tombstone(record)
            if self.loading and not self.offsets.has(record.group):
                group = self.groups.get(record.group)
                if group is not None:
                    self.type_of(group).offsets_gone_while_loading(group)
            return
        owner = self._record_owner.get(cls)
        if owner is not None:
            owner.replay(record)

    def on_write_done(self, follow_up: Any, error: ErrorCode | None, now_ms: int) -> Outcome:
        if follow_up.__class__ is GroupRemoved:
            out = Outcome()
            group = self.groups.get(follow_up.group_id)
            # The tombstones are durable: the group is gone (a tombstone replayed first may already have
            # removed it).
            if error is None and group is not None and group.is_empty() and not self.offsets.has(group.group_id):
                self.type_of(group).drop(group)
        else:
            out = self._follow_up_owner[follow_up.__class__].on_write_done(follow_up, error, now_ms)
        if error is not None:
            out.events.append(WriteFailed(follow_up.group_id, type(follow_up).__name__, error))
        return out

    def begin_load(self) -> None:
        self.loading = True
        self.groups.clear()
        self.offsets.clear()
        for group_type in self.types:
            group_type.begin_load()

    def finish_load(self, now_ms: int) -> Outcome:
        self.loading = False
        out = Outcome()
        for group_type in self.types:
            out.merge(group_type.finish_load(now_ms))
        return out

    def load_partition(self, records: Iterable[Any], now_ms: int) -> Outcome:
        """Replay a whole partition (tombstones respected) and resume its groups."""
        self.begin_load()
        for record in records:
            self.replay(record)
        return self.finish_load(now_ms)

    def unload(self, now_ms: int) -> Outcome:
        """This broker no longer owns the partition: every type answers whoever waits and stops its
        timers; then every group and offset is forgotten."""
        out = Outcome()
        for group_type in self.types:
            out.merge(group_type.unload(now_ms))
        self.groups.clear()
        self.offsets.clear()
        return out

    # -- the shared commands -------------------------------------------------------------------

    def _new_simple_group(self, group_id: str, now_ms: int) -> Any:
        assert self.groups.simple_group is not None
        group = self.groups.simple_group(group_id, now_ms)
        self.groups.put(group)
        return group

    def _committed(self, ctx: Ctx, group: Any, cmd: c.OffsetCommit) -> None:
        self.type_of(group).offset_committed(ctx, group, cmd)

    def _delete_group(self, ctx: Ctx, cmd: c.DeleteGroup, group: Any) -> None:
        """Kafka's deleteGroups: the group's offsets and the group itself, tombstoned; the group stays
        as it is until the tombstones are durable, so a failed write changes nothing."""
        error = E.GROUP_ID_NOT_FOUND if group is None else group.validate_delete_group()
        if error is not None:
            ctx.out.reply(cmd.reply_to, DeletedGroup(cmd.group_id, error))
            return
        records = [*self.offsets.tombstones(cmd.group_id, cmd.pending), *group.tombstones()]
        if not records:  # nothing of it was ever written
            self.type_of(group).drop(group)
            ctx.out.reply(cmd.reply_to, DeletedGroup(cmd.group_id, E.NONE))
            return
        replies = [Reply(cmd.reply_to, DeletedGroup(cmd.group_id, E.NONE))] if cmd.reply_to is not None else []
        ctx.out.write(records, replies, then=GroupRemoved(cmd.group_id))

    def _expire_offsets(self, ctx: Ctx, group: Any) -> None:
        """The retention check of one group (Kafka's cleanupGroupMetadata): its expired offsets go,
        and an empty group whose last offset goes is deleted with them."""
        if group is None:
            return
        group_id = group.group_id
        expired = self.offsets.expired(group, ctx.now_ms, ctx.config.offsets_retention_ms)
        records: list[Any] = [OffsetCommitTombstone(group_id, t, p) for t, p in expired]
        dies = group.is_empty() and len(expired) == len(self.offsets.of(group_id))
        if dies:
            records += group.tombstones()
        if records:
            ctx.out.write(records, then=GroupRemoved(group_id) if dies else None)
        elif dies:
            self.type_of(group).drop(group)

    # -- views ---------------------------------------------------------------------------------

    def group(self, group_id: str) -> Any:
        return self.groups.get(group_id)

    def group_ids(self) -> list[str]:
        """Every group of the partition, whatever its type."""
        return list(self.groups)

    def list_groups(self, states_filter: Iterable[str] = (), types_filter: Iterable[str] = ()) -> list[ListedGroup]:
        """States and types filters are case-insensitive; Dead groups are not listed."""
        states = {s.lower() for s in states_filter}
        types = {t.lower() for t in types_filter}
        listed: list[ListedGroup] = []
        for group in self.groups.values():
            entry = group.listed()
            if entry is None:
                continue
            if types and entry.group_type.lower() not in types:
                continue
            if states and entry.state.lower() not in states:
                continue
            listed.append(entry)
        return listed

    def group_status(self, group_id: str, wall_ms: int) -> dict[str, Any] | None:
        group = self.groups.get(group_id)
        return None if group is None else self.type_of(group).status(group, wall_ms)
