"""OffsetCommit, OffsetFetch, OffsetDelete and offset retention.

Committed offsets change only through records: a handler emits OffsetCommitRecord or a tombstone,
and `GroupStateMachine.replay` (classic.py) applies it once appended (execute.py: commits are
PIPELINED, applied at append and answered once durable).
"""

from __future__ import annotations

from collections.abc import Callable

from ....protocol.errors import ErrorCode
from ....protocol.record_batch import HEADER_SIZE

from .. import commands as c
from .group import ClassicGroup, GroupState, OffsetAndMetadata
from .join import validate_current_member
from ...runtime.outcome import Durability, GroupRemoved, Outcome, Reply, WriteFailed
from .rebalance import Ctx, schedule_heartbeat
from ....protocol.records.classic_records import GroupMetadataTombstone, OffsetCommitRecord, OffsetCommitTombstone, Record
from ..results import (
    OffsetCommitResult,
    OffsetDeleteResult,
    OffsetFetchPartition,
    OffsetFetchResult,
    OffsetFetchTopic,
    PartitionError,
    TopicErrors,
)

E = ErrorCode
S = GroupState
_INT64_MAX = 2**63 - 1


def _utf16_length(text: str) -> int:
    # Kafka compares String.length(), which counts UTF-16 code units.
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _metadata_too_large(metadata: str, max_bytes: int) -> bool:
    # UTF-16 units are at most two per code point: only a long string needs counting.
    return 2 * len(metadata) > max_bytes and _utf16_length(metadata) > max_bytes


# What one OffsetCommit record adds to a __consumer_offsets batch at the least, besides the group,
# topic and metadata strings: its framing in the batch (length, attributes, timestamp and offset
# deltas, key and value lengths, header count: 7 bytes), its key (version, two string lengths,
# partition: 10) and its value in the smallest version (version, offset, metadata length, commit
# timestamp: 20). Characters stand for bytes: a string's UTF-8 form is never shorter.
_RECORD_FLOOR = 37


def cannot_fit(cmd: c.OffsetCommit, max_metadata: int, max_batch_bytes: int) -> bool:
    """True when the commit's records are certainly larger than one __consumer_offsets batch may be
    (its max.message.bytes). Kafka's runtime finds that only after building and sizing the records,
    and fails the commit (MESSAGE_TOO_LARGE, answered UNKNOWN_SERVER_ERROR); counted from the command
    here, a hostile commit of millions of partitions is refused without a record built. A commit
    this cannot prove too large takes the usual path, whose append makes the exact check."""
    group = len(cmd.group_id)
    floor = HEADER_SIZE
    for t in cmd.topics:  # per topic first: an ordinary commit costs no walk over its partitions
        floor += len(t.partitions) * (_RECORD_FLOOR + group + len(t.name))
    return floor > max_batch_bytes and commit_floor_bytes(cmd, max_metadata, max_batch_bytes) > max_batch_bytes


def commit_floor_bytes(cmd: c.OffsetCommit, max_metadata: int, stop_past: int = _INT64_MAX) -> int:
    """The fewest bytes the batch of the commit's records can have: partitions whose metadata is too
    long write nothing, the others at least `_RECORD_FLOOR` beside their strings. Counting stops once
    the floor is past `stop_past`: whether it is past is all `cannot_fit` needs to know."""
    group = len(cmd.group_id)
    floor = HEADER_SIZE
    for t in cmd.topics:
        fixed = _RECORD_FLOOR + group + len(t.name)
        for p in t.partitions:
            metadata = p.metadata or ""
            if not _metadata_too_large(metadata, max_metadata):
                floor += fixed + len(metadata)
                if floor > stop_past:
                    return floor
    return floor


def refuse_too_large(out: Outcome, cmd: c.OffsetCommit, max_metadata: int) -> None:
    """Answer a commit `cannot_fit` refused as a failed append is answered: the partitions that would
    have been written carry UNKNOWN_SERVER_ERROR, the others OFFSET_METADATA_TOO_LARGE."""
    out.events.append(WriteFailed(cmd.group_id, "OffsetCommit", E.MESSAGE_TOO_LARGE))
    too_large, failed = E.OFFSET_METADATA_TOO_LARGE, E.UNKNOWN_SERVER_ERROR
    out.reply(cmd.reply_to, OffsetCommitResult(tuple(
        TopicErrors(t.name, tuple(
            PartitionError(p.partition, too_large if _metadata_too_large(p.metadata or "", max_metadata) else failed)
            for p in t.partitions))
        for t in cmd.topics)))


# -- OffsetCommit ---------------------------------------------------------------------------------


def handle_offset_commit(
    ctx: Ctx, cmd: c.OffsetCommit, lookup: Callable[[str], ClassicGroup | None],
    create: Callable[[str], ClassicGroup], max_batch_bytes: Callable[[], int],
) -> None:
    group = lookup(cmd.group_id)
    if cmd.validate_only:
        error = validate_txn_offset_commit(group, cmd)
        ctx.out.reply(cmd.reply_to, OffsetCommitResult.all_failed(cmd, error if error is not None else E.NONE))
        return
    if group is None:
        if cmd.generation_id < 0:
            # A "simple" consumer (assign() without group management) or an admin tool: the
            # group exists only to hold offsets.
            group = create(cmd.group_id)
        else:
            code = E.GROUP_ID_NOT_FOUND if cmd.api_version >= 9 else E.ILLEGAL_GENERATION
            ctx.out.reply(cmd.reply_to, OffsetCommitResult.all_failed(cmd, code))
            return

    error = validate_offset_commit(group, cmd)
    if error is not None:
        ctx.out.reply(cmd.reply_to, OffsetCommitResult.all_failed(cmd, error))
        return

    if group.state in (S.STABLE, S.PREPARING_REBALANCE) and not cmd.transactional:
        # Committing keeps a classic member alive, like a heartbeat.
        schedule_heartbeat(ctx, group, group.get(cmd.member_id))

    # v2-v4's retention: an int64 of ms, which a client may set to Long.MAX ("never"): capped, not overflowed
    expire_timestamp = None if cmd.retention_time_ms == -1 else min(ctx.now_ms + cmd.retention_time_ms, _INT64_MAX)
    max_bytes = ctx.config.offset_metadata_max_bytes
    if cannot_fit(cmd, max_bytes, max_batch_bytes()):
        refuse_too_large(ctx.out, cmd, max_bytes)
        return
    records: list[Record] = []
    topics: list[TopicErrors] = []
    for topic in cmd.topics:
        partitions: list[PartitionError] = []
        for p in topic.partitions:
            metadata = p.metadata or ""
            if _metadata_too_large(metadata, max_bytes):
                partitions.append(PartitionError(p.partition, E.OFFSET_METADATA_TOO_LARGE))
                continue
            partitions.append(PartitionError(p.partition, E.NONE))
            records.append(OffsetCommitRecord(
                group=cmd.group_id, topic=topic.name, partition=p.partition, offset=p.offset,
                leader_epoch=p.leader_epoch, metadata=metadata,
                commit_timestamp=ctx.now_ms if p.commit_timestamp == -1 else p.commit_timestamp,
                expire_timestamp=expire_timestamp,
            ))
        topics.append(TopicErrors(topic.name, tuple(partitions)))

    result = OffsetCommitResult(tuple(topics))
    if records:
        replies = [Reply(cmd.reply_to, result)] if cmd.reply_to is not None else []
        ctx.out.write(records, replies, durability=Durability.IN_LOG if cmd.transactional else Durability.PIPELINED)
    else:
        ctx.out.reply(cmd.reply_to, result)


def validate_txn_offset_commit(group: ClassicGroup | None, cmd: c.OffsetCommit) -> ErrorCode | None:
    """Kafka's validateOffsetCommit with isTransactional: without member id and generation anyone may
    commit (a producer that is not a member); with them, they must be the group's current ones.
    An unknown group named with a generation is ILLEGAL_GENERATION (Kafka's mapping before TxnOffsetCommit
    v6); without one it is an empty group (Kafka creates it), so a member of it is unknown."""
    if group is not None and group.is_state(S.DEAD):
        return E.COORDINATOR_NOT_AVAILABLE
    if group is not None and cmd.generation_id < 0 and group.is_state(S.EMPTY):
        return None
    if cmd.generation_id >= 0 or cmd.member_id != c.UNKNOWN_MEMBER_ID or cmd.group_instance_id is not None:
        if group is None:
            return E.ILLEGAL_GENERATION if cmd.generation_id >= 0 else E.UNKNOWN_MEMBER_ID
        error = validate_current_member(group, cmd.member_id, cmd.group_instance_id)
        if error is not None:
            return error
        if cmd.generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
    return None


def validate_offset_commit(group: ClassicGroup, cmd: c.OffsetCommit) -> ErrorCode | None:
    if group.is_state(S.DEAD):
        return E.COORDINATOR_NOT_AVAILABLE
    if cmd.transactional:
        return None
    if cmd.generation_id < 0 and group.is_state(S.EMPTY):
        return None  # simple commit into an empty group
    if cmd.generation_id >= 0 or cmd.member_id != c.UNKNOWN_MEMBER_ID or cmd.group_instance_id is not None:
        error = validate_current_member(group, cmd.member_id, cmd.group_instance_id)
        if error is not None:
            return error
        if cmd.generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
    elif not group.is_state(S.EMPTY):
        # Without member id and generation only an empty group takes commits.
        return E.UNKNOWN_MEMBER_ID
    if group.is_state(S.COMPLETING_REBALANCE):
        # The member has its new generation but not its assignment yet; let it retry after sync.
        return E.REBALANCE_IN_PROGRESS
    return None


# -- OffsetFetch ----------------------------------------------------------------------------------


def handle_offset_fetch(ctx: Ctx, group: ClassicGroup | None, cmd: c.OffsetFetch) -> None:
    """Offsets are returned whatever the group's state: a group may use Kafka only to store
    offsets. Unknown groups and partitions answer offset -1 with no error. `require_stable` never
    finds an unstable offset here: commits become visible only once durable, and the group's
    commands run one at a time, so there is no pending commit to wait for."""
    offsets = group.offsets if group is not None else {}
    if cmd.topics is None:
        by_topic: dict[str, list[OffsetFetchPartition]] = {}
        for (topic, partition), o in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(_fetched(partition, o))
        topics = tuple(OffsetFetchTopic(t, tuple(ps)) for t, ps in by_topic.items())
    else:
        topics = tuple(
            OffsetFetchTopic(t.name, tuple(_fetched(p, offsets.get((t.name, p))) for p in t.partitions))
            for t in cmd.topics
        )
    ctx.out.reply(cmd.reply_to, OffsetFetchResult(E.NONE, topics))


def _fetched(partition: int, o: OffsetAndMetadata | None) -> OffsetFetchPartition:
    if o is None:
        return OffsetFetchPartition(partition)
    return OffsetFetchPartition(partition, o.offset, o.leader_epoch, o.metadata)


# -- OffsetDelete ---------------------------------------------------------------------------------


def handle_offset_delete(ctx: Ctx, group: ClassicGroup | None, cmd: c.OffsetDelete) -> None:
    if group is None or group.is_state(S.DEAD):
        ctx.out.reply(cmd.reply_to, OffsetDeleteResult(E.GROUP_ID_NOT_FOUND))
        return
    if not group.is_state(S.EMPTY) and not group.uses_consumer_protocol():
        # Only the "consumer" protocol tells us which topics are in use.
        ctx.out.reply(cmd.reply_to, OffsetDeleteResult(E.NON_EMPTY_GROUP))
        return
    records: list[Record] = []
    topics: list[TopicErrors] = []
    for topic in cmd.topics:
        if group.is_subscribed_to_topic(topic.name):
            topics.append(TopicErrors(topic.name, tuple(
                PartitionError(p, E.GROUP_SUBSCRIBED_TO_TOPIC) for p in topic.partitions
            )))
            continue
        topics.append(TopicErrors(topic.name, tuple(PartitionError(p, E.NONE) for p in topic.partitions)))
        for p in topic.partitions:
            if (topic.name, p) in group.offsets:
                records.append(OffsetCommitTombstone(group.group_id, topic.name, p))
    result = OffsetDeleteResult(E.NONE, tuple(topics))
    if records:
        ctx.out.write(records, [Reply(cmd.reply_to, result)] if cmd.reply_to is not None else [],
                      durability=Durability.PIPELINED)
    else:
        ctx.out.reply(cmd.reply_to, result)


# -- retention ------------------------------------------------------------------------------------


def expired_offsets(group: ClassicGroup, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
    """Which offsets the retention rules let go (removeExpiredOffsets / getExpiredOffsets).

    - group with a protocol type that is Empty: measured from when it became Empty (or from the
      commit if that time is unknown);
    - Stable "consumer" group whose subscriptions are known: commit time, for topics nobody
      subscribes to;
    - simple group (no protocol type): commit time;
    - any other group keeps its offsets.
    An offset written with an explicit expire timestamp (OffsetCommit v2-4 retention) expires then.
    """
    if group.protocol_type is not None:
        if group.is_state(S.EMPTY):
            state_ts = group.current_state_timestamp

            def base(o: OffsetAndMetadata) -> int:
                return o.commit_timestamp if state_ts is None else state_ts
        elif group.uses_consumer_protocol() and group.subscribed_topics is not None and group.is_state(S.STABLE):
            def base(o: OffsetAndMetadata) -> int:
                return o.commit_timestamp
        else:
            return []
    else:
        def base(o: OffsetAndMetadata) -> int:
            return o.commit_timestamp

    expired: list[tuple[str, int]] = []
    for (topic, partition), o in group.offsets.items():
        if group.is_subscribed_to_topic(topic):
            continue
        if o.expire_timestamp is not None:
            due = now_ms >= o.expire_timestamp
        else:
            due = now_ms - base(o) >= retention_ms
        if due:
            expired.append((topic, partition))
    return expired


def handle_offset_expiry_check(ctx: Ctx, group: ClassicGroup | None, check: c.OffsetExpiryCheck,
                               drop_group: Callable[[ClassicGroup], None]) -> None:
    if group is None or group.is_state(S.DEAD):
        return
    expired = expired_offsets(group, ctx.now_ms, ctx.config.offsets_retention_ms)
    records: list[Record] = [OffsetCommitTombstone(group.group_id, t, p) for t, p in expired]
    # An Empty group whose last offsets go becomes Dead. (Not while a member holds an id from
    # MEMBER_ID_REQUIRED: it is about to join.)
    dies = (
        group.is_state(S.EMPTY) and len(expired) == len(group.offsets) and not group.pending_members
    )
    if dies and group.generation_id > 0:
        # A group that never had a generation never wrote a GroupMetadata record.
        records.append(GroupMetadataTombstone(group.group_id))
    if records:
        ctx.out.write(records, then=GroupRemoved(group.group_id) if dies else None)
    elif dies:
        drop_group(group)


def on_group_removed(ctx: Ctx, group: ClassicGroup | None, done: GroupRemoved, error: ErrorCode | None,
                     drop_group: Callable[[ClassicGroup], None]) -> None:
    """The tombstones are durable: the group is Dead and forgotten (a GroupMetadata tombstone
    replayed first may already have dropped it)."""
    if error is not None or group is None:
        return
    if group.is_state(S.EMPTY) and not group.offsets:
        drop_group(group)
