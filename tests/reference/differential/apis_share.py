"""Share groups' APIs (KIP-932), every common version: ShareGroupHeartbeat (76), ShareGroupDescribe (77),
ShareFetch (78), ShareAcknowledge (79), DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91),
DeleteShareGroupOffsets (92). Each is sent well-formed and with the mistakes a client can make: an
empty or unknown group, a group of another type, a wrong member epoch, an unknown topic id, a share
session epoch that does not follow. The share coordinator's state RPCs (83-87, the inter-broker
persister's calls) likewise: a share-partition's state initialized, written, read, summarized and
deleted, epochs that are fenced, an unknown topic id, a negative partition and an empty group id, each
sent once FindCoordinator (key type SHARE) names a coordinator for its key, so that the state topic
exists and its partition is loaded on both.

Kafka initializes a share-partition's state through its share coordinator after the heartbeat that
subscribes (an RPC, so its member epochs and first assignment vary with that timing, 1 to 3 seen);
kbroker in the same heartbeat. The checks that join a member compare what does not depend on that
(errors, the heartbeat interval, what the member fetches once both have assigned it), not the epochs.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from .apis_data import DATA
from .apis_groups import GROUP
from .craft import (FIND_COORDINATOR, INCREMENTAL_ALTER_CONFIGS, UNKNOWN_TOPIC_ID, create_topic, make, produce, topic_id,
                    unique)
from .runner import Check, Session
from .versions import sweep

SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 77, 78, 79
DESCRIBE_SHARE_GROUP_OFFSETS, ALTER_SHARE_GROUP_OFFSETS, DELETE_SHARE_GROUP_OFFSETS = 90, 91, 92
INITIALIZE_STATE, READ_STATE, WRITE_STATE, DELETE_STATE, READ_STATE_SUMMARY = 83, 84, 85, 86, 87
MEMBER = "dw-share-member-a-0001"
TIMING = "(the share coordinator's timing)"
BELOW_OLDEST = "(the share APIs at v0, older than both brokers' oldest)"


def _heartbeat(group: str, epoch: int, topics: list[str] | None = None, member: str = MEMBER) -> Any:
    return make(SHARE_GROUP_HEARTBEAT, group_id=group, member_id=member, member_epoch=epoch, rack_id=None,
                subscribed_topic_names=topics)


def _without_epochs(plain: dict[str, Any]) -> dict[str, Any]:
    """A heartbeat's answer without what the share coordinator's timing decides on Kafka (see the
    module's doc): the member epoch and the assignment."""
    if plain.get("member_epoch", -1) > 0:
        plain["member_epoch"] = TIMING
    if plain.get("assignment") is not None:
        plain["assignment"] = TIMING
    return plain


async def _joined(s: Session, group: str, topic: str = DATA) -> int:
    """A member of `group` subscribed to `topic`, heartbeating (v1, the one version) until it is assigned
    (its epoch)."""
    v = 1
    answer = await s.call(SHARE_GROUP_HEARTBEAT, v, _heartbeat(group, 0, [topic]), "join", project=_without_epochs)
    epoch = answer.member_epoch if answer is not None else 0
    for _ in range(100):
        if answer is None or answer.error_code or answer.assignment is not None and answer.assignment.topic_partitions:
            break
        await asyncio.sleep(0.05)
        answer = await s.call(SHARE_GROUP_HEARTBEAT, v, _heartbeat(group, epoch), "join", record=False)
        epoch = answer.member_epoch if answer is not None else epoch
    return epoch


def heartbeat_checks() -> list[Check]:
    def heartbeat(group: str, epoch: int, topics: list[str] | None = None, member: str = MEMBER):
        return lambda s, v: _heartbeat(group, epoch, topics, member)

    async def join_and_leave(s: Session, v: int) -> None:
        group = unique(s, "dw")
        epoch = await _joined(s, group)
        await s.call(SHARE_GROUP_HEARTBEAT, v, _heartbeat(group, epoch + 7), "a wrong member epoch")
        await s.call(SHARE_GROUP_HEARTBEAT, v, _heartbeat(group, epoch, member="dw-share-stranger-0001"),
                     "another member's epoch, never joined")
        await s.call(SHARE_GROUP_HEARTBEAT, v, _heartbeat(group, -1), "leave")
        await s.call(SHARE_GROUP_HEARTBEAT, v, _heartbeat(group, epoch), "after leaving")

    async def unknown_topic(s: Session, v: int) -> None:
        group = unique(s, "dw")
        await s.call(SHARE_GROUP_HEARTBEAT, v, _heartbeat(group, 0, ["dw-share-nope"]), "join",
                     project=_without_epochs)
        await s.call(SHARE_GROUP_HEARTBEAT, v, _heartbeat(group, -1), "leave")

    return [
        *sweep(SHARE_GROUP_HEARTBEAT, "a member joins, is fenced by a wrong epoch and leaves", steps=join_and_leave),
        *sweep(SHARE_GROUP_HEARTBEAT, "a subscription to a topic that does not exist", steps=unknown_topic),
        *sweep(SHARE_GROUP_HEARTBEAT, "an empty group id", heartbeat("", 0, [DATA]), serial=True),
        *sweep(SHARE_GROUP_HEARTBEAT, "an empty member id", heartbeat("dw-share-nobody", 0, [DATA], member="")),
        *sweep(SHARE_GROUP_HEARTBEAT, "a member id of 37 characters",
               heartbeat("dw-share-nobody", 0, [DATA], member="m" * 37)),
        *sweep(SHARE_GROUP_HEARTBEAT, "the first heartbeat without a subscription",
               heartbeat("dw-share-nobody", 0, None)),
        *sweep(SHARE_GROUP_HEARTBEAT, "epoch 5 of an unknown group", heartbeat("dw-share-nobody", 5)),
        *sweep(SHARE_GROUP_HEARTBEAT, "a classic group's id", heartbeat(GROUP, 0, [DATA])),
    ]


def describe_checks() -> list[Check]:
    def describe(*groups: str):
        return lambda s, v: make(SHARE_GROUP_DESCRIBE, group_ids=list(groups), include_authorized_operations=False)

    return [
        *sweep(SHARE_GROUP_DESCRIBE, "an unknown group", describe("dw-share-nobody")),
        *sweep(SHARE_GROUP_DESCRIBE, "a classic group", describe(GROUP)),
        *sweep(SHARE_GROUP_DESCRIBE, "no group", describe()),
    ]


def _fetch(group: str | None, member: str | None, epoch: int, topics: list[dict], **more: Any) -> Any:
    fields = {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 100, "batch_size": 100, **more}
    return make(SHARE_FETCH, group_id=group, member_id=member, share_session_epoch=epoch, topics=topics,
                forgotten_topics_data=[], **fields)


def _acknowledge(group: str | None, member: str | None, epoch: int, topics: list[dict]) -> Any:
    return make(SHARE_ACKNOWLEDGE, group_id=group, member_id=member, share_session_epoch=epoch, topics=topics)


def _acks(tid: Any, first: int, last: int, kind: int = 1) -> list[dict]:
    return [{"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
        {"first_offset": first, "last_offset": last, "acknowledge_types": [kind]}]}]}]


async def _open(s: Session, v: int, group: str, partitions: list[dict]) -> None:
    """A new share session (epoch 0) on `partitions`. Kafka answers a partition only once its share
    coordinator has initialized the share-partition's state (an RPC the first fetch starts), kbroker at
    once: opened again (each epoch 0 replaces the session) until the answer names the partition."""
    await s.call_until(lambda r: r.error_code or r.responses, SHARE_FETCH, v, _fetch(group, MEMBER, 0, partitions),
                       "open the session")


def fetch_checks() -> list[Check]:
    async def sessions(s: Session, v: int) -> None:
        """A member's session: opened (epoch 0) on DATA's partition 0, a fetch at the next epoch, one
        at an epoch that does not follow, acknowledgements of records never acquired, and the close."""
        group = unique(s, "dw")
        await _joined(s, group)
        tid = await topic_id(s, DATA)
        part = [{"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}]
        await _open(s, v, group, part)
        await s.call(SHARE_FETCH, v, _fetch(group, MEMBER, 1, []), "epoch 1")
        await s.call(SHARE_FETCH, v, _fetch(group, MEMBER, 5, []), "epoch 5, expected 2")
        await s.call(SHARE_FETCH, v, _fetch(group, MEMBER, 2, _acks(tid, 0, 0)), "accept a record not acquired")
        await s.call(SHARE_FETCH, v, _fetch(group, MEMBER, -1, []), "close")
        await s.call(SHARE_FETCH, v, _fetch(group, MEMBER, 3, []), "after the close")
        await s.call(SHARE_GROUP_HEARTBEAT, 1, _heartbeat(group, -1), "leave")

    async def reopened(s: Session, v: int) -> None:
        """A member holding records opens its session again (epoch 0, the same connection, as a client
        does after a session error): are the records still its own, to acknowledge in the new session?"""
        group, topic = unique(s, "dw"), unique(s, "dw-share")
        await create_topic(s, topic)
        await produce(s, topic, 0, "a", "b", "c")
        await s.call(INCREMENTAL_ALTER_CONFIGS, 1, make(INCREMENTAL_ALTER_CONFIGS, validate_only=False, resources=[{
            "resource_type": 32, "resource_name": group, "configs": [
                {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]}]), "earliest")
        await _joined(s, group, topic)
        tid = await topic_id(s, topic)
        part = [{"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}]
        runs: list[tuple[int, int, int]] = []
        for epoch in range(100):  # Kafka delivers once its share coordinator has initialized the state
            got = await s.call(SHARE_FETCH, v, _fetch(group, MEMBER, epoch, part if epoch == 0 else []),
                               "acquire", record=False)
            runs = [(a.first_offset, a.last_offset, a.delivery_count) for t in (got.responses if got else [])
                    for p in t.partitions for a in p.acquired_records]
            if runs or got is None or got.error_code:
                break
            await asyncio.sleep(0.05)
        s.note("acquired (first, last, delivery count)", runs)
        again = await s.call(SHARE_FETCH, v, _fetch(group, MEMBER, 0, part), "epoch 0 again")
        s.note("acquired again", [(a.first_offset, a.last_offset, a.delivery_count)
                                  for t in (again.responses if again else []) for p in t.partitions
                                  for a in p.acquired_records])
        await s.call(SHARE_ACKNOWLEDGE, v, _acknowledge(group, MEMBER, 1, [
            {"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": f, "last_offset": l, "acknowledge_types": [1]} for f, l, _ in runs]}]}]),
            "accept what the first session acquired")
        await s.call(SHARE_ACKNOWLEDGE, v, _acknowledge(group, MEMBER, -1, []), "close")
        await s.call(SHARE_GROUP_HEARTBEAT, 1, _heartbeat(group, -1), "leave")

    def fetch(group: str | None = None, member: str | None = MEMBER, epoch: int = 0, topics: Any = None):
        async def build(s: Session, v: int) -> Any:  # a group of the check's own unless named
            chosen = topics(await topic_id(s, DATA)) if callable(topics) else topics or []
            return _fetch(unique(s, "dw") if group is None else group, member, epoch, chosen)
        return build

    return [
        *sweep(SHARE_FETCH, "a session opened, fetched, broken and closed", steps=sessions),
        *sweep(SHARE_FETCH, "a member holding records opens its session again", steps=reopened),
        *sweep(SHARE_FETCH, "an unknown topic id in a new session", fetch(topics=lambda _: [
            {"topic_id": UNKNOWN_TOPIC_ID, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}])),
        *sweep(SHARE_FETCH, "acknowledgements in a new session", fetch(topics=lambda tid: _acks(tid, 0, 0))),
        *sweep(SHARE_FETCH, "epoch 3 of no session", fetch(epoch=3)),
        *sweep(SHARE_FETCH, "the final epoch of no session", fetch(epoch=-1)),
        *sweep(SHARE_FETCH, "an empty group id", fetch(group=""), serial=True),
        *sweep(SHARE_FETCH, "an empty member id", fetch(member="")),
        *sweep(SHARE_FETCH, "a member id of 37 characters", fetch(member="m" * 37)),
        *sweep(SHARE_FETCH, "a null group id", lambda s, v: _fetch(None, MEMBER, 0, [])),
    ]


def acknowledge_checks() -> list[Check]:
    def acknowledge(group: str | None = None, member: str | None = MEMBER, epoch: int = 1):
        async def build(s: Session, v: int) -> Any:  # a group of the check's own unless named
            return _acknowledge(unique(s, "dw") if group is None else group, member, epoch,
                                _acks(await topic_id(s, DATA), 0, 0))
        return build

    async def in_a_session(s: Session, v: int) -> None:
        group = unique(s, "dw")
        await _joined(s, group)
        tid = await topic_id(s, DATA)
        part = [{"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}]
        await _open(s, v, group, part)
        await s.call(SHARE_ACKNOWLEDGE, v, _acknowledge(group, MEMBER, 1, _acks(tid, 0, 0)), "a record not acquired")
        await s.call(SHARE_ACKNOWLEDGE, v, _acknowledge(group, MEMBER, 2, _acks(UNKNOWN_TOPIC_ID, 0, 0)),
                     "an unknown topic id")
        await s.call(SHARE_ACKNOWLEDGE, v, _acknowledge(group, MEMBER, 9, []), "epoch 9, expected 3")
        await s.call(SHARE_ACKNOWLEDGE, v, _acknowledge(group, MEMBER, -1, []), "close")
        await s.call(SHARE_GROUP_HEARTBEAT, 1, _heartbeat(group, -1), "leave")

    return [
        *sweep(SHARE_ACKNOWLEDGE, "acknowledgements in a session", steps=in_a_session),
        *sweep(SHARE_ACKNOWLEDGE, "epoch 0", acknowledge(epoch=0)),
        *sweep(SHARE_ACKNOWLEDGE, "epoch 1 of no session", acknowledge()),
        # a member of its own: the group "" fetch checks' sessions end with their connections, which Kafka
        # notices a moment after (a later check of the same member would race its disconnect listener)
        *sweep(SHARE_ACKNOWLEDGE, "an empty group id", acknowledge(group="", member="dw-share-member-b-0001"),
               serial=True),
        *sweep(SHARE_ACKNOWLEDGE, "an empty member id", acknowledge(member="")),
        *sweep(SHARE_ACKNOWLEDGE, "a null group id", lambda s, v: _acknowledge(None, MEMBER, 1, [])),
    ]


def offsets_checks() -> list[Check]:
    def describe(group: str, topics: list[tuple[str, list[int]]] | None):
        return lambda s, v: make(DESCRIBE_SHARE_GROUP_OFFSETS, groups=[{"group_id": group, "topics": None if topics is None
                                 else [{"topic_name": t, "partitions": ps} for t, ps in topics]}])

    def alter(group: str | None, topic: str = DATA, partition: int = 0, offset: int = 0):
        return lambda s, v: make(ALTER_SHARE_GROUP_OFFSETS, group_id=unique(s, "dw") if group is None else group,
                                 topics=[{"topic_name": topic, "partitions": [
                                     {"partition_index": partition, "start_offset": offset}]}])

    def delete(group: str, topic: str = DATA):
        return lambda s, v: make(DELETE_SHARE_GROUP_OFFSETS, group_id=group, topics=[{"topic_name": topic}])

    async def altered_described_deleted(s: Session, v: int) -> None:
        group = unique(s, "dw")
        await s.call(ALTER_SHARE_GROUP_OFFSETS, 0, alter(group, offset=1)(s, 0), "alter a new group's start")
        await s.call(DESCRIBE_SHARE_GROUP_OFFSETS, v, describe(group, [(DATA, [0, 1])])(s, v), "describe")
        await s.call(DELETE_SHARE_GROUP_OFFSETS, 0, delete(group)(s, 0), "delete")
        await s.call(DESCRIBE_SHARE_GROUP_OFFSETS, v, describe(group, [(DATA, [0])])(s, v), "describe after")

    async def with_a_member(s: Session, v: int) -> None:
        group = unique(s, "dw")
        await _joined(s, group)
        await s.call(ALTER_SHARE_GROUP_OFFSETS, 0, alter(group)(s, 0), "alter")
        await s.call(DELETE_SHARE_GROUP_OFFSETS, 0, delete(group)(s, 0), "delete")
        await s.call(SHARE_GROUP_HEARTBEAT, 1, _heartbeat(group, -1), "leave")

    return [
        *sweep(DESCRIBE_SHARE_GROUP_OFFSETS, "a group altered, described and deleted", steps=altered_described_deleted),
        *sweep(DESCRIBE_SHARE_GROUP_OFFSETS, "an unknown group, every topic", describe("dw-share-nobody", None)),
        *sweep(DESCRIBE_SHARE_GROUP_OFFSETS, "an unknown group and topic", describe("dw-share-nobody",
                                                                                    [("dw-share-nope", [0])])),
        *sweep(DESCRIBE_SHARE_GROUP_OFFSETS, "a classic group", describe(GROUP, [(DATA, [0])])),
        *sweep(ALTER_SHARE_GROUP_OFFSETS, "refused while the group has a member", steps=with_a_member),
        *sweep(ALTER_SHARE_GROUP_OFFSETS, "an unknown topic", alter(None, topic="dw-share-nope")),
        *sweep(ALTER_SHARE_GROUP_OFFSETS, "a partition out of range", alter(None, partition=99)),
        *sweep(ALTER_SHARE_GROUP_OFFSETS, "a classic group", alter(GROUP)),
        *sweep(ALTER_SHARE_GROUP_OFFSETS, "an empty group id", alter(""), serial=True),
        *sweep(DELETE_SHARE_GROUP_OFFSETS, "an unknown group", delete("dw-share-nobody")),
        *sweep(DELETE_SHARE_GROUP_OFFSETS, "a classic group", delete(GROUP)),
        *sweep(DELETE_SHARE_GROUP_OFFSETS, "an empty group id", delete(""), serial=True),
    ]


async def _state_coordinator(s: Session, group: str, tid: Any, partition: int) -> None:
    """Wait (unrecorded) until FindCoordinator v6 names a coordinator for the share key: both brokers
    create `__share_group_state` on the first such request and load its partitions a moment after."""
    from kbroker.broker.coordinators.share_state import kafka_uuid

    key = f"{group}:{kafka_uuid(tid)}:{partition}"
    await s.call_until(lambda r: r.coordinators and r.coordinators[0].error_code == 0, FIND_COORDINATOR, 6,
                       make(FIND_COORDINATOR, key_type=2, coordinator_keys=[key]), "find the state coordinator",
                       tries=300, record=False)


def _partitions(api_key: int, group: str, tid: Any, **partition: Any) -> Any:
    return make(api_key, group_id=group, topics=[{"topic_id": tid, "partitions": [partition]}])


def _write(group: str, tid: Any, state_epoch: int, leader_epoch: int, start: int,
           batches: list[tuple[int, int, int, int]], partition: int = 0) -> Any:
    return _partitions(WRITE_STATE, group, tid, partition=partition, state_epoch=state_epoch,
                       leader_epoch=leader_epoch, start_offset=start, delivery_complete_count=-1, state_batches=[
                           {"first_offset": f, "last_offset": l, "delivery_state": d, "delivery_count": c}
                           for f, l, d, c in batches])


def state_checks() -> list[Check]:
    """The share coordinator's state RPCs (83-87): what a node's persister sends the node leading the
    key's `__share_group_state` partition (on one node, itself)."""

    def request(api_key: int, group: str, tid: Any, partition: int, v: int) -> Any:
        if api_key == INITIALIZE_STATE:
            return _partitions(api_key, group, tid, partition=partition, state_epoch=0, start_offset=0)
        if api_key == WRITE_STATE:
            return _write(group, tid, 0, 0, 0, [(0, 1, 0, 1)], partition)
        if api_key == DELETE_STATE:
            return _partitions(api_key, group, tid, partition=partition)
        return _partitions(api_key, group, tid, partition=partition, leader_epoch=0)

    def mistake(api_key: int, case: str):
        async def steps(s: Session, v: int) -> None:
            group = "" if case == "empty" else unique(s, "dw")
            tid = UNKNOWN_TOPIC_ID if case == "topic" else await topic_id(s, DATA)
            partition = -1 if case == "partition" else 0
            await _state_coordinator(s, group or "dw-share-state-any", tid, max(partition, 0))
            await s.call(api_key, v, request(api_key, group, tid, partition, v), case)
        return steps

    async def lifecycle(s: Session, v: int) -> None:
        """Initialized (state epoch 1), written (leader epoch 5), read, written with a fenced leader epoch
        and a fenced state epoch, summarized, deleted, read after."""
        group, tid = unique(s, "dw"), await topic_id(s, DATA)
        await _state_coordinator(s, group, tid, 0)
        await s.call(READ_STATE, 0, request(READ_STATE, group, tid, 0, 0), "read before initialized")
        await s.call(INITIALIZE_STATE, 0, _partitions(INITIALIZE_STATE, group, tid, partition=0, state_epoch=1,
                                                      start_offset=0), "initialize")
        await s.call(INITIALIZE_STATE, 0, _partitions(INITIALIZE_STATE, group, tid, partition=0, state_epoch=1,
                                                      start_offset=0), "initialize again, the same state epoch")
        await s.call(WRITE_STATE, v, _write(group, tid, 1, 5, 0, [(0, 1, 2, 1), (2, 4, 0, 2)]), "write")
        await s.call(READ_STATE, 0, _partitions(READ_STATE, group, tid, partition=0, leader_epoch=5), "read")
        await s.call(WRITE_STATE, v, _write(group, tid, 1, 3, 0, [(5, 5, 2, 1)]), "a fenced leader epoch")
        await s.call(WRITE_STATE, v, _write(group, tid, 0, 5, 0, [(5, 5, 2, 1)]), "a fenced state epoch")
        await s.call(READ_STATE, 0, _partitions(READ_STATE, group, tid, partition=0, leader_epoch=4),
                     "read with a fenced leader epoch")
        await s.call(READ_STATE_SUMMARY, 0, _partitions(READ_STATE_SUMMARY, group, tid, partition=0, leader_epoch=5),
                     "summary")
        await s.call(DELETE_STATE, 0, _partitions(DELETE_STATE, group, tid, partition=0), "delete")
        await s.call(READ_STATE, 0, _partitions(READ_STATE, group, tid, partition=0, leader_epoch=5),
                     "read after delete")

    async def summarized(s: Session, v: int) -> None:
        group, tid = unique(s, "dw"), await topic_id(s, DATA)
        await _state_coordinator(s, group, tid, 0)
        await s.call(INITIALIZE_STATE, 0, _partitions(INITIALIZE_STATE, group, tid, partition=0, state_epoch=0,
                                                      start_offset=3), "initialize")
        await s.call(WRITE_STATE, 1, _write(group, tid, 0, 2, 3, [(3, 3, 2, 1)]), "write")
        await s.call(READ_STATE_SUMMARY, v, _partitions(READ_STATE_SUMMARY, group, tid, partition=0, leader_epoch=2),
                     "summary")
        await s.call(READ_STATE_SUMMARY, v, _partitions(READ_STATE_SUMMARY, group, tid, partition=0, leader_epoch=1),
                     "summary with a fenced leader epoch")

    checks = [*sweep(WRITE_STATE, "a share-partition's state initialized, written, fenced and deleted", steps=lifecycle),
              *sweep(READ_STATE_SUMMARY, "a summary of a written state", steps=summarized)]
    for api_key in (INITIALIZE_STATE, READ_STATE, WRITE_STATE, DELETE_STATE, READ_STATE_SUMMARY):
        checks += [
            *sweep(api_key, "a share-partition never initialized", steps=mistake(api_key, "new")),
            *sweep(api_key, "an unknown topic id", steps=mistake(api_key, "topic")),
            *sweep(api_key, "a negative partition", steps=mistake(api_key, "partition")),
            *sweep(api_key, "an empty group id", steps=mistake(api_key, "empty"), serial=True),
        ]
    return checks


def below_oldest_checks() -> list[Check]:
    """Version 0 of the four APIs whose oldest is 1 on both (KIP-932's early access spoke v0, which Kafka
    4.x removed): what a broker does with a request of it, as kbroker's codec encodes it."""
    from .runner import CLOSED, Closed

    def check(api_key: int) -> Check:
        name = {SHARE_GROUP_HEARTBEAT: "ShareGroupHeartbeat", SHARE_GROUP_DESCRIBE: "ShareGroupDescribe",
                SHARE_FETCH: "ShareFetch", SHARE_ACKNOWLEDGE: "ShareAcknowledge"}[api_key]

        async def run(s: Session) -> None:
            conn = await s.connect()
            header = struct.pack(">hhi", api_key, 0, 1) + struct.pack(">h", 12) + b"differential"
            await conn.send_raw(header + bytes(16))
            try:
                await conn.read_frame(15)
                outcome: dict = {"outcome": "answered"}
            except Closed:
                outcome = CLOSED
            s.note(f"{name} v0", outcome)
        return Check(f"{name} v0: a version older than both brokers' oldest", run, api=BELOW_OLDEST)

    return [check(k) for k in (SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE, SHARE_FETCH, SHARE_ACKNOWLEDGE)]


def checks() -> list[Check]:
    return [*heartbeat_checks(), *describe_checks(), *fetch_checks(), *acknowledge_checks(), *offsets_checks(),
            *state_checks(), *below_oldest_checks()]

