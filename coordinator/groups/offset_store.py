"""One offset store for every group type (Kafka's OffsetMetadataManager).

Committed offsets are kept by group id, beside the groups (store.py) rather than inside them, so a
group id keeps its offsets whatever its type becomes (an upgrade to a consumer group, a downgrade,
an empty group giving way to another type). What differs between group types is who may commit,
fetch and delete, which topics are in use and when offsets may expire: each group answers that
through the `Group` protocol (group_types.py; Kafka's Group.validateOffsetCommit/Fetch/Delete,
isSubscribedToTopic, offsetExpirationCondition). Everything else is done here, once: the records,
the answers, the size checks, retention.

Committed offsets change only through records: a handler emits OffsetCommitRecord or a tombstone,
and `replay` applies it once appended (commits and deletes are PIPELINED: applied at append,
answered once durable; readers answer only once the writes they could see are durable).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from sys import intern
from types import MappingProxyType
from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from ...protocol.fast_init import fast_init
from ...protocol.record_batch import HEADER_SIZE
from ...protocol.records.classic_records import OffsetCommitRecord, OffsetCommitTombstone
from ..runtime.outcome import Durability, Outcome, Reply
from . import commands as c
from .context import Ctx
from .events import WriteFailed
from .results import (
    OffsetCommitResult,
    OffsetDeleteResult,
    OffsetFetchPartition,
    OffsetFetchResult,
    OffsetFetchTopic,
    PartitionError,
    TopicErrors,
)

if TYPE_CHECKING:
    from .group_types import Group

E = ErrorCode
_INT64_MAX = 2**63 - 1
TopicPartition = tuple[str, int]


@fast_init
@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None = None


Offsets = Mapping[TopicPartition, OffsetAndMetadata]
_NONE: Offsets = MappingProxyType({})


class OffsetStore:
    """The committed offsets of one partition's groups, by group id."""

    __slots__ = ("by_group",)

    def __init__(self) -> None:
        self.by_group: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}

    def of(self, group_id: str) -> Offsets:
        return self.by_group.get(group_id, _NONE)

    def has(self, group_id: str) -> bool:
        return group_id in self.by_group

    def clear(self) -> None:
        self.by_group.clear()

    # -- records -------------------------------------------------------------------------------

    def replay_commit(self, record: OffsetCommitRecord) -> None:
        offsets = self.by_group.get(record.group)
        if offsets is None:
            offsets = self.by_group[record.group] = {}
        # Interned: every group committing on a topic would otherwise keep its own copy of the name,
        # as decoded from its request or its record.
        offsets[(intern(record.topic), record.partition)] = OffsetAndMetadata(
            record.offset, record.leader_epoch, record.metadata, record.commit_timestamp, record.expire_timestamp)

    def replay_tombstone(self, record: OffsetCommitTombstone) -> None:
        offsets = self.by_group.get(record.group)
        if offsets is not None:
            offsets.pop((record.topic, record.partition), None)
            if not offsets:
                del self.by_group[record.group]

    def tombstones(self, group_id: str, pending: Iterable[TopicPartition] = ()) -> list[OffsetCommitTombstone]:
        """Kafka's deleteAllOffsets: a tombstone per committed offset of the group, and per partition
        with only a pending transactional offset (`pending`: the tombstone ends it)."""
        offsets = self.of(group_id)
        return [OffsetCommitTombstone(group_id, t, p) for t, p in [*offsets, *(k for k in pending if k not in offsets)]]

    # -- OffsetCommit --------------------------------------------------------------------------

    def commit(self, ctx: Ctx, cmd: c.OffsetCommit, group: Group | None, simple_group: Callable[[str, int], Group],
               committed: Callable[[Ctx, Group, c.OffsetCommit], None], max_batch_bytes: Callable[[], int]) -> None:
        """`simple_group` makes the group a commit without group management creates (Kafka's
        simple consumer group); `committed` is the group type's say once a commit is accepted (a
        classic member's commit keeps it alive)."""
        if cmd.validate_only:
            # TxnOffsetCommit's group check (KIP-447): nothing written. An unknown group named with a
            # generation is ILLEGAL_GENERATION (Kafka's mapping before TxnOffsetCommit v6); without one
            # it is an empty group (Kafka creates it), so a member of it is unknown.
            error = group.validate_offset_commit(cmd) if group is not None else _unknown_group_member(cmd)
            ctx.out.reply(cmd.reply_to, OffsetCommitResult.all_failed(cmd, error if error is not None else E.NONE))
            return
        if group is None:
            if cmd.generation_id < 0:
                # A "simple" consumer (assign() without group management) or an admin tool: the
                # group exists only to hold offsets.
                group = simple_group(cmd.group_id, ctx.now_ms)
            else:
                code = E.GROUP_ID_NOT_FOUND if cmd.api_version >= 9 else E.ILLEGAL_GENERATION
                ctx.out.reply(cmd.reply_to, OffsetCommitResult.all_failed(cmd, code))
                return
        error = group.validate_offset_commit(cmd)
        if error is not None:
            ctx.out.reply(cmd.reply_to, OffsetCommitResult.all_failed(cmd, error))
            return
        committed(ctx, group, cmd)
        # v2-v4's retention: an int64 of ms, which a client may set to Long.MAX ("never"): capped, not overflowed
        expire_timestamp = None if cmd.retention_time_ms == -1 else min(ctx.now_ms + cmd.retention_time_ms, _INT64_MAX)
        max_bytes = ctx.config.offset_metadata_max_bytes
        if cannot_fit(cmd, max_bytes, max_batch_bytes()):
            refuse_too_large(ctx.out, cmd, max_bytes)
            return
        records: list[OffsetCommitRecord] = []
        topics: list[TopicErrors] = []
        for topic in cmd.topics:
            partitions: list[PartitionError] = []
            for p in topic.partitions:
                metadata = p.metadata or ""
                if metadata_too_large(metadata, max_bytes):
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
            # A committed transaction's offsets are in the log already (its TxnOffsetCommit batch and
            # COMMIT marker): applied to memory, written again nowhere (Durability.IN_LOG).
            ctx.out.write(records, replies, durability=Durability.IN_LOG if cmd.transactional else Durability.PIPELINED)
        else:
            ctx.out.reply(cmd.reply_to, result)

    # -- OffsetFetch ---------------------------------------------------------------------------

    def fetch(self, ctx: Ctx, cmd: c.OffsetFetch, group: Group | None) -> None:
        """Offsets are returned whatever the group's state: a group may use Kafka only to store
        offsets. Unknown groups and partitions answer offset -1 with no error. Only durable offsets
        are served: the answer waits for the pipelined writes before it (`after_pipelined`)."""
        if group is not None:
            error = group.validate_offset_fetch(cmd)
            if error is not None:
                ctx.out.reply(cmd.reply_to, OffsetFetchResult(error))
                return
        offsets = self.of(cmd.group_id)
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
        ctx.out.after_pipelined = True
        ctx.out.reply(cmd.reply_to, OffsetFetchResult(E.NONE, topics))

    # -- OffsetDelete --------------------------------------------------------------------------

    def delete(self, ctx: Ctx, cmd: c.OffsetDelete, group: Group | None) -> None:
        if group is None:
            ctx.out.reply(cmd.reply_to, OffsetDeleteResult(E.GROUP_ID_NOT_FOUND))
            return
        error = group.validate_offset_delete()
        if error is not None:
            ctx.out.reply(cmd.reply_to, OffsetDeleteResult(error))
            return
        offsets = self.of(cmd.group_id)
        records: list[OffsetCommitTombstone] = []
        topics: list[TopicErrors] = []
        for topic in cmd.topics:
            if group.is_subscribed_to_topic(topic.name):
                topics.append(TopicErrors(topic.name, tuple(
                    PartitionError(p, E.GROUP_SUBSCRIBED_TO_TOPIC) for p in topic.partitions
                )))
                continue
            topics.append(TopicErrors(topic.name, tuple(PartitionError(p, E.NONE) for p in topic.partitions)))
            records += [OffsetCommitTombstone(cmd.group_id, topic.name, p) for p in topic.partitions
                        if (topic.name, p) in offsets]
        result = OffsetDeleteResult(E.NONE, tuple(topics))
        if records:
            ctx.out.write(records, [Reply(cmd.reply_to, result)] if cmd.reply_to is not None else [],
                          durability=Durability.PIPELINED)
        else:
            ctx.out.reply(cmd.reply_to, result)

    # -- deleted topics ------------------------------------------------------------------------

    def groups_with(self, topics: frozenset[str]) -> list[str]:
        """The groups with a committed offset of one of `topics`."""
        return [g for g, offsets in self.by_group.items() if any(t in topics for t, _ in offsets)]

    def delete_topics(self, ctx: Ctx, cmd: c.DeleteTopicOffsets) -> None:
        """Kafka's onTopicsDeleted for one group: a tombstone per offset of the deleted topics, committed
        or pending in an open transaction, whatever the group's state or subscriptions (the topic is gone;
        one created again under its name is another). STRICT: the offsets are forgotten once their
        tombstones are durable, so what a reader is answered is what a restart replays."""
        keys = [key for key in self.of(cmd.group_id) if key[0] in cmd.topics]
        known = set(keys)
        keys += [key for key in cmd.pending if key not in known and key[0] in cmd.topics]
        result = OffsetDeleteResult(E.NONE, tuple(
            TopicErrors(t, tuple(PartitionError(p, E.NONE) for tt, p in keys if tt == t)) for t in sorted(cmd.topics)))
        if keys:
            ctx.out.write([OffsetCommitTombstone(cmd.group_id, t, p) for t, p in keys],
                          [Reply(cmd.reply_to, result)] if cmd.reply_to is not None else [])
        else:
            ctx.out.reply(cmd.reply_to, result)

    # -- retention -----------------------------------------------------------------------------

    def expired(self, group: Group, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        """Kafka's cleanupExpiredOffsets: the offsets of topics the group does not use whose time
        is up. An offset written with an explicit expire timestamp (OffsetCommit v2-4 retention)
        expires then; any other `retention_ms` after the group's base time for it (its
        `offset_expiration`; None: the group keeps every offset for now)."""
        base = group.offset_expiration()
        if base is None:
            return []
        expired: list[TopicPartition] = []
        in_use: dict[str, bool] = {}  # per topic: asked once, not per partition
        for (topic, partition), o in self.of(group.group_id).items():
            subscribed = in_use.get(topic)
            if subscribed is None:
                subscribed = in_use[topic] = group.is_subscribed_to_topic(topic)
            if subscribed:
                continue
            if o.expire_timestamp is not None:
                due = now_ms >= o.expire_timestamp
            else:
                due = now_ms - base(o) >= retention_ms
            if due:
                expired.append((topic, partition))
        return expired


def _unknown_group_member(cmd: c.OffsetCommit) -> ErrorCode | None:
    if cmd.generation_id >= 0:
        return E.ILLEGAL_GENERATION
    if cmd.member_id != c.UNKNOWN_MEMBER_ID or cmd.group_instance_id is not None:
        return E.UNKNOWN_MEMBER_ID
    return None


def _fetched(partition: int, o: OffsetAndMetadata | None) -> OffsetFetchPartition:
    if o is None:
        return OffsetFetchPartition(partition)
    return OffsetFetchPartition(partition, o.offset, o.leader_epoch, o.metadata)


# -- the size of a commit ---------------------------------------------------------------------------


def _utf16_length(text: str) -> int:
    # Kafka compares String.length(), which counts UTF-16 code units.
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def metadata_too_large(metadata: str, max_bytes: int) -> bool:
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
            if not metadata_too_large(metadata, max_metadata):
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
            PartitionError(p.partition, too_large if metadata_too_large(p.metadata or "", max_metadata) else failed)
            for p in t.partitions))
        for t in cmd.topics)))
