"""The proof that a group type is a seam (issue 39): a toy group type, defined here and nowhere else,
with its own commands, records, timers and follow-up, registered with the group coordinator service
(`group_types=`) without an edit to the service, the shard or the runtime, and driven through them:
its records go through the `__consumer_offsets` record codec (registered here too) into a byte log
that a second service loads back; the shard's one offset store serves its offsets with the toy
group's own validation; the other types refuse its group id as Kafka refuses a group of another
type; ListGroups, DeleteGroups and retention treat it like any group.

The toy protocol: a member joins a "room" (ToyJoin, answered once its record is durable, through a
follow-up), stays by pinging within the session (ToyPing re-arms its timer), and is dropped when the
timer fires (ToyMemberExpired). The room's record lists its members; only members commit offsets."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from kbroker.coordinator.config import GroupConfig
from kbroker.coordinator.groups import commands as c
from kbroker.coordinator.groups.consumer import consumer_commands as cc
from kbroker.coordinator.groups.context import Ctx
from kbroker.coordinator.groups.group_types import TypeContext
from kbroker.coordinator.groups.offset_store import OffsetAndMetadata
from kbroker.coordinator.groups.registry import GROUP_TYPES
from kbroker.coordinator.groups.results import ListedGroup
from kbroker.coordinator.groups.service import GroupCoordinatorService
from kbroker.coordinator.runtime.outcome import Outcome, Reply
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.records.codec import decode_record, encode_record, register_record_codec
from kbroker.purgatory.clock import ManualClock
from kbroker.purgatory.timers import KeyedTimers

E = ErrorCode
SESSION_MS = 10_000
TOY_RECORD_TYPE = 1000  # beyond Kafka's record types


# -- the toy type: commands, records, follow-up, group -------------------------------------------


@dataclass(slots=True)
class ToyJoin:
    group_id: str
    member_id: str
    reply_to: Any = None


@dataclass(slots=True)
class ToyPing:
    group_id: str
    member_id: str
    reply_to: Any = None


@dataclass(frozen=True, slots=True)
class ToyMemberExpired:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ToyAnswer:
    error: ErrorCode
    members: tuple[str, ...] = ()

    def failed(self, code: ErrorCode) -> ToyAnswer:
        return ToyAnswer(code)


@dataclass(frozen=True, slots=True)
class ToyRoomRecord:
    group: str
    members: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ToyRoomTombstone:
    group: str


@dataclass(frozen=True, slots=True)
class ToyJoined:
    """Follow-up: the member's record is durable; arm its session."""

    group_id: str
    member_id: str


def _encode(record: ToyRoomRecord | ToyRoomTombstone) -> tuple[bytes, bytes | None]:
    key = struct.pack(">h", TOY_RECORD_TYPE) + record.group.encode()
    return key, None if isinstance(record, ToyRoomTombstone) else ",".join(record.members).encode()


def _decode(key: bytes, value: bytes | None) -> ToyRoomRecord | ToyRoomTombstone:
    group = key[2:].decode()
    if value is None:
        return ToyRoomTombstone(group)
    return ToyRoomRecord(group, tuple(m for m in value.decode().split(",") if m))


register_record_codec(TOY_RECORD_TYPE, (ToyRoomRecord, ToyRoomTombstone), _encode, _decode)


class ToyGroup:
    group_type: ClassVar[str] = "toy"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.members: tuple[str, ...] = ()

    def validate_offset_commit(self, cmd: c.OffsetCommit) -> ErrorCode | None:
        return None if cmd.member_id in self.members else E.UNKNOWN_MEMBER_ID

    def validate_offset_fetch(self, cmd: c.OffsetFetch) -> ErrorCode | None:
        return None

    def validate_offset_delete(self) -> ErrorCode | None:
        return E.NON_EMPTY_GROUP if self.members else None

    def validate_delete_group(self) -> ErrorCode | None:
        return E.NON_EMPTY_GROUP if self.members else None

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return False

    def offset_expiration(self) -> Callable[[OffsetAndMetadata], int] | None:
        return lambda o: o.commit_timestamp

    def is_empty(self) -> bool:
        return not self.members

    def tombstones(self) -> list[Any]:
        return [ToyRoomTombstone(self.group_id)]

    def listed(self) -> ListedGroup | None:
        return ListedGroup(self.group_id, "", "Active" if self.members else "Empty", "toy")


def _key(group_id: str, member_id: str) -> str:
    return f"toy-session-{group_id}-{member_id}"


class ToyGroups:
    name = "toy"
    commands: tuple[type, ...] = (ToyJoin, ToyPing, ToyMemberExpired)
    also_handles: tuple[type, ...] = ()
    records: tuple[type, ...] = (ToyRoomRecord, ToyRoomTombstone)
    follow_ups: tuple[type, ...] = (ToyJoined,)

    def __init__(self, ctx: TypeContext) -> None:
        self.store = ctx.groups
        self.rooms = ctx.groups.of_type(ToyGroup)
        self.config = ctx.config

    def handle(self, cmd: Any, group: Any, now_ms: int) -> Outcome:
        out = Outcome()
        if group is not None and group.__class__ is not ToyGroup:
            out.reply(getattr(cmd, "reply_to", None), ToyAnswer(E.GROUP_ID_NOT_FOUND))  # not a toy group
            return out
        match cmd:
            case ToyJoin():
                members = (group.members if group is not None else ()) + (cmd.member_id,)
                out.write([ToyRoomRecord(cmd.group_id, members)], [Reply(cmd.reply_to, ToyAnswer(E.NONE, members))],
                          then=ToyJoined(cmd.group_id, cmd.member_id))
            case ToyPing() if group is not None and cmd.member_id in group.members:
                out.schedule(_key(cmd.group_id, cmd.member_id), SESSION_MS, ToyMemberExpired(cmd.group_id, cmd.member_id))
                out.reply(cmd.reply_to, ToyAnswer(E.NONE, group.members))
            case ToyPing():
                out.reply(cmd.reply_to, ToyAnswer(E.UNKNOWN_MEMBER_ID))
            case ToyMemberExpired() if group is not None and cmd.member_id in group.members:
                out.write([ToyRoomRecord(cmd.group_id, tuple(m for m in group.members if m != cmd.member_id))])
        return out

    def replay(self, record: Any) -> None:
        if isinstance(record, ToyRoomTombstone):
            if record.group in self.rooms:
                del self.rooms[record.group]
            return
        room = self.rooms.get(record.group)
        if room is None:
            room = ToyGroup(record.group)
            self.store.put(room)  # takes the id over (a simple group that held its offsets)
        room.members = record.members

    def on_write_done(self, follow_up: Any, error: ErrorCode | None, now_ms: int) -> Outcome:
        out = Outcome()
        if error is None:
            out.schedule(_key(follow_up.group_id, follow_up.member_id), SESSION_MS,
                         ToyMemberExpired(follow_up.group_id, follow_up.member_id))
        return out

    def offset_committed(self, ctx: Ctx, group: Any, cmd: c.OffsetCommit) -> None:
        return None

    def offsets_gone_while_loading(self, group: Any) -> None:
        return None

    def drop(self, group: Any) -> None:
        if self.store.get(group.group_id) is group:
            self.store.remove(group.group_id)

    def status(self, group: ToyGroup, wall_ms: int) -> dict[str, Any]:
        return {"group_id": group.group_id, "group_type": "toy", "members": list(group.members)}

    def begin_load(self) -> None:
        return None

    def finish_load(self, now_ms: int) -> Outcome:
        out = Outcome()
        for room in self.rooms.values():  # as Kafka's onLoaded: every member gets a fresh session
            for member in room.members:
                out.schedule(_key(room.group_id, member), SESSION_MS, ToyMemberExpired(room.group_id, member))
        return out

    def unload(self, now_ms: int) -> Outcome:
        out = Outcome()
        for room in self.rooms.values():
            for member in room.members:
                out.cancel(_key(room.group_id, member))
        return out


# -- driving it through the real service and runtime ----------------------------------------------


class ByteLog:
    """`append_records` of the service: every record through the `__consumer_offsets` codec, as the
    broker's writer stores it."""

    def __init__(self) -> None:
        self.entries: list[tuple[bytes, bytes | None]] = []

    async def __call__(self, partition: int, records: list[Any]) -> None:
        self.entries.extend(encode_record(r) for r in records)

    def records(self) -> list[Any]:
        return [decode_record(k, v) for k, v in self.entries]


async def started(log: ByteLog, clock: ManualClock) -> GroupCoordinatorService:
    service = GroupCoordinatorService(log, clock=clock, timers=KeyedTimers(clock), config=GroupConfig(),
                                      group_types=(*GROUP_TYPES, ToyGroups))
    await service.start()
    return service


def commit(group: str, member: str, offset: int) -> c.OffsetCommit:
    return c.OffsetCommit(group, -1 if not member else 1, member,
                          (c.OffsetCommitTopic("t", (c.OffsetCommitPartition(0, offset),)),))


def commit_error(result: Any) -> ErrorCode:
    return result.topics[0].partitions[0].error


async def test_a_toy_group_type_registers_itself_and_is_driven_through_the_service_and_the_runtime() -> None:
    clock, log = ManualClock(1_000_000), ByteLog()
    service = await started(log, clock)
    room = "room"
    await service.load(service.partition_for(room), [])
    try:
        # its own command, answered once its record is durable; its follow-up armed its timer
        joined = await service.submit(ToyJoin(room, "alice"))
        assert joined == ToyAnswer(E.NONE, ("alice",))
        assert service.timers.deadline_ms(_key(room, "alice")) == clock.now_ms() + SESSION_MS
        assert (await service.submit(ToyJoin(room, "bob"))).members == ("alice", "bob")
        # the one offset store, with the toy group's own validation
        assert commit_error(await service.commit_offsets(commit(room, "mallory", 5))) is E.UNKNOWN_MEMBER_ID
        assert commit_error(await service.commit_offsets(commit(room, "alice", 7))) is E.NONE
        fetched = await service.fetch_offsets(c.OffsetFetch(room))
        assert fetched.topics[0].partitions[0].offset == 7
        # the other types refuse its id as Kafka refuses a group of another type
        from kbroker.tests.coordinator_harness import join_request

        refused = await service.join_group(join_request(room))
        assert (refused.error, refused.member_id) == (E.INCONSISTENT_GROUP_PROTOCOL, "")
        assert (await service.heartbeat(c.Heartbeat(room, 1, "alice"))).error is E.UNKNOWN_MEMBER_ID
        heartbeat = await service.submit(cc.ConsumerGroupHeartbeat(room, "m1", 0, rebalance_timeout_ms=30_000,
                                                                   subscribed_topic_names=("t",), owned_topic_partitions=()))
        assert (heartbeat.error, heartbeat.error_message) == (E.GROUP_ID_NOT_FOUND, f"Group {room} is not a consumer group.")
        described = (await service.describe_groups([room], api_version=6))[0]
        assert (described.error, described.state) == (E.GROUP_ID_NOT_FOUND, "Dead")
        # ListGroups shows it as the type says, and its type filter works
        listed = (await service.list_groups(c.ListGroups(types_filter=("toy",)))).groups
        assert [(g.group_id, g.group_type, g.state) for g in listed] == [(room, "toy", "Active")]
        assert (await service.list_groups(c.ListGroups(types_filter=("classic",)))).groups == ()
        assert service.group_status(room) == {"group_id": room, "group_type": "toy", "members": ["alice", "bob"]}
        # its timers: bob pings and stays, alice's session ends (her record is written)
        clock.advance(SESSION_MS // 2)
        assert (await service.submit(ToyPing(room, "bob"))).error is E.NONE
        clock.advance(SESSION_MS // 2)
        await service.advance_timers()
        assert (await service.submit(ToyPing(room, "alice"))).error is E.UNKNOWN_MEMBER_ID
        assert service.machine(service.partition_for(room)).group(room).members == ("bob",)
    finally:
        await service.stop()

    # a second coordinator loads the bytes back: the room, its members' sessions, its offsets
    again = await started(log, clock)
    try:
        await again.load(again.partition_for(room), log.records())
        assert again.group_status(room)["members"] == ["bob"]
        assert again.timers.deadline_ms(_key(room, "bob")) == clock.now_ms() + SESSION_MS
        assert (await again.fetch_offsets(c.OffsetFetch(room))).topics[0].partitions[0].offset == 7
        # a non-empty room is not deleted; once bob's session ends it is, with its offsets
        assert (await again.delete_groups([room]))[0].error is E.NON_EMPTY_GROUP
        clock.advance(SESSION_MS)
        await again.advance_timers()
        assert (await again.delete_groups([room]))[0].error is E.NONE
        assert again.group_status(room) is None
        assert (await again.fetch_offsets(c.OffsetFetch(room))).topics == ()
        assert log.records()[-2:] == [c_tombstone(room), ToyRoomTombstone(room)]
    finally:
        await again.stop()


def c_tombstone(group: str) -> Any:
    from kbroker.protocol.records.classic_records import OffsetCommitTombstone

    return OffsetCommitTombstone(group, "t", 0)


async def test_a_toy_group_whose_offsets_expire_is_deleted_by_the_shards_retention() -> None:
    clock, log = ManualClock(1_000_000), ByteLog()
    service = await started(log, clock)
    room = "quiet-room"
    await service.load(service.partition_for(room), [])
    try:
        await service.submit(ToyJoin(room, "carol"))
        assert commit_error(await service.commit_offsets(commit(room, "carol", 3))) is E.NONE
        clock.advance(SESSION_MS)
        await service.advance_timers()  # carol's session ends: the room is empty, its offset stays
        assert service.group_status(room)["members"] == []
        clock.advance(GroupConfig().offsets_retention_ms)
        assert await service.run_offsets_retention() == 1
        await asyncio.sleep(0)
        assert service.group_status(room) is None
        assert log.records()[-2:] == [c_tombstone(room), ToyRoomTombstone(room)]
    finally:
        await service.stop()
