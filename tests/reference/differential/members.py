"""Group members for the checks, each on a connection of its own (a JoinGroup waits for the others):
a classic member (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit) and a KIP-848 consumer
(ConsumerGroupHeartbeat). Every call is recorded under the member's name, so a check reads as a
sequence: "a: join", "b: join", "a: heartbeat", ...
"""

from __future__ import annotations

import asyncio
from typing import Any

from kbroker.coordinator.groups.classic.subscription import encode_subscription_topics

from .craft import (
    CONSUMER_GROUP_HEARTBEAT,
    DESCRIBE_GROUPS,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    OFFSET_COMMIT,
    SYNC_GROUP,
    make,
)
from .runner import Conn, Session

MEMBER_ID_REQUIRED = 79
SESSION_MS = 30_000
REBALANCE_MS = 10_000


def subscription(*topics: str) -> bytes:
    return encode_subscription_topics(list(topics))


class Classic:
    """One member of a classic group. `member_id` and `generation` follow what the coordinator said."""

    def __init__(self, s: Session, group: str, name: str, conn: Conn, instance_id: str | None = None) -> None:
        self.s, self.group, self.name, self.conn, self.instance_id = s, group, name, conn, instance_id
        self.member_id = ""
        self.generation = -1
        self.leader = ""
        self.members: list[str] = []

    @classmethod
    async def connect(cls, s: Session, group: str, name: str, instance_id: str | None = None) -> Classic:
        return cls(s, group, name, await s.connect(f"dw-{name}"), instance_id)

    async def call(self, api_key: int, version: int, body: Any, what: str, **kwargs: Any) -> Any:
        return await self.s.call(api_key, version, body, f"{self.name}: {what}", conn=self.conn, **kwargs)

    async def join(self, version: int = 5, *, what: str = "join", session_ms: int = SESSION_MS,
                   rebalance_ms: int = REBALANCE_MS, protocol_type: str = "consumer",
                   protocols: tuple[str, ...] = ("range",), metadata: bytes | None = None,
                   member_id: str | None = None, follow_required: bool = True, **kwargs: Any) -> Any:
        """JoinGroup; a v4+ dynamic member's MEMBER_ID_REQUIRED round trip is followed (both recorded)."""
        meta = metadata if metadata is not None else subscription("dw-data")

        def body(mid: str) -> Any:
            return make(JOIN_GROUP, group_id=self.group, session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
                        member_id=mid, group_instance_id=self.instance_id, protocol_type=protocol_type,
                        protocols=[{"name": p, "metadata": meta} for p in protocols], reason=None)

        response = await self.call(JOIN_GROUP, version, body(self.member_id if member_id is None else member_id), what,
                                   **kwargs)
        if response is not None and response.error_code == MEMBER_ID_REQUIRED and follow_required:
            self.member_id = response.member_id
            response = await self.call(JOIN_GROUP, version, body(self.member_id), f"{what} with its member id", **kwargs)
        if response is not None and response.error_code == 0:
            self.member_id, self.generation, self.leader = response.member_id, response.generation_id, response.leader
            self.members = [m.member_id for m in response.members]
        return response

    async def sync(self, version: int = 3, assignments: dict[str, bytes] | None = None, *, what: str = "sync",
                   generation: int | None = None, protocol_type: str | None = "consumer",
                   protocol_name: str | None = "range", **kwargs: Any) -> Any:
        """SyncGroup; the leader (by default) hands every member it was told of `b"<name>-assignment"`."""
        if assignments is None and self.leader == self.member_id:
            assignments = {m: f"assignment-{i}".encode() for i, m in enumerate(sorted(self.members))}
        return await self.call(SYNC_GROUP, version, make(
            SYNC_GROUP, group_id=self.group, generation_id=self.generation if generation is None else generation,
            member_id=self.member_id, group_instance_id=self.instance_id, protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=[{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()]), what, **kwargs)

    async def heartbeat(self, version: int = 3, *, what: str = "heartbeat", generation: int | None = None,
                        member_id: str | None = None) -> Any:
        return await self.call(HEARTBEAT, version, make(
            HEARTBEAT, group_id=self.group, generation_id=self.generation if generation is None else generation,
            member_id=self.member_id if member_id is None else member_id, group_instance_id=self.instance_id), what)

    async def leave(self, version: int = 3, *, what: str = "leave", member_id: str | None = None) -> Any:
        mid = self.member_id if member_id is None else member_id
        return await self.call(LEAVE_GROUP, version, make(
            LEAVE_GROUP, group_id=self.group, member_id=mid,
            members=[{"member_id": mid, "group_instance_id": self.instance_id, "reason": None}]), what)

    async def commit(self, version: int = 8, offsets: dict[int, int] | None = None, *, what: str = "commit",
                     topic: str = "dw-data", generation: int | None = None, member_id: str | None = None) -> Any:
        return await self.call(OFFSET_COMMIT, version, make(
            OFFSET_COMMIT, group_id=self.group, generation_id_or_member_epoch=self.generation if generation is None
            else generation, member_id=self.member_id if member_id is None else member_id,
            group_instance_id=self.instance_id, topics=[{"name": topic, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_metadata": ""}
                for p, o in (offsets or {0: 1}).items()]}]), what)


async def stable(s: Session, group: str, name: str = "a", *, join_version: int = 5, sync_version: int = 3,
                 instance_id: str | None = None, **join_args: Any) -> Classic:
    """A group of one member, Stable."""
    member = await Classic.connect(s, group, name, instance_id)
    await member.join(join_version, **join_args)
    await member.sync(sync_version)
    return member


async def group_state(s: Session, group: str) -> str:
    described = await s.call(DESCRIBE_GROUPS, 5, make(DESCRIBE_GROUPS, groups=[group]), record=False)
    return described.groups[0].group_state


async def wait_state(s: Session, group: str, *states: str, tries: int = 400) -> str:
    """Poll DescribeGroups (unrecorded) until the group is in one of `states`; the state it ended in."""
    state = ""
    for _ in range(tries):
        state = await group_state(s, group)
        if state in states:
            return state
        await asyncio.sleep(0.025)
    return state


class Consumer:
    """One member of a KIP-848 consumer group, on its own connection."""

    def __init__(self, s: Session, group: str, name: str, conn: Conn, member_id: str = "",
                 instance_id: str | None = None) -> None:
        self.s, self.group, self.name, self.conn = s, group, name, conn
        self.member_id, self.instance_id = member_id, instance_id
        self.epoch = 0
        self.assigned: list[tuple[Any, list[int]]] = []

    @classmethod
    async def connect(cls, s: Session, group: str, name: str, member_id: str = "",
                      instance_id: str | None = None) -> Consumer:
        return cls(s, group, name, await s.connect(f"dw-{name}"), member_id, instance_id)

    async def heartbeat(self, version: int = 1, *, what: str = "heartbeat", epoch: int | None = None,
                        topics: list[str] | None = None, regex: str | None = None, owned: list | None = None,
                        rebalance_ms: int = -1, assignor: str | None = None, member_id: str | None = None,
                        record: bool = True, **fields: Any) -> Any:
        body = make(CONSUMER_GROUP_HEARTBEAT, **{
            "group_id": self.group, "member_id": self.member_id if member_id is None else member_id,
            "member_epoch": self.epoch if epoch is None else epoch, "instance_id": self.instance_id, "rack_id": None,
            "rebalance_timeout_ms": rebalance_ms, "subscribed_topic_names": topics, "subscribed_topic_regex": regex,
            "server_assignor": assignor, "topic_partitions": owned, **fields})
        response = await self.s.call(CONSUMER_GROUP_HEARTBEAT, version, body, f"{self.name}: {what}", conn=self.conn,
                                     record=record)
        if response is not None and response.error_code == 0:
            if response.member_id:
                self.member_id = response.member_id
            self.epoch = response.member_epoch
            if response.assignment is not None:
                self.assigned = [(t.topic_id, sorted(t.partitions)) for t in response.assignment.topic_partitions]
        return response

    def owned(self) -> list[dict]:
        return [{"topic_id": t, "partitions": p} for t, p in self.assigned]

    async def join(self, version: int = 1, topics: list[str] | None = None, **kwargs: Any) -> Any:
        return await self.heartbeat(version, what="join", epoch=0, topics=topics or ["dw-data"], rebalance_ms=30000,
                                    owned=[], **kwargs)

    async def until(self, done: Any, version: int = 1, *, what: str = "heartbeat until assigned",
                    tries: int = 100, **kwargs: Any) -> Any:
        """Heartbeat, reporting what it owns, until `done(response)` (unrecorded but the last): the
        assignment comes when the coordinator has computed it, which neither broker promises by a
        given heartbeat."""
        response = None
        for _ in range(tries):
            response = await self.heartbeat(version, owned=self.owned(), record=False, **kwargs)
            if response is None or done(response):
                break
            await asyncio.sleep(0.05)
        return await self.heartbeat(version, what=what, owned=self.owned(), **kwargs)
