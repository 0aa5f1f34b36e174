"""Offsets, DeleteGroups, retention and ConsumerGroupDescribe for consumer groups.

The member epoch stands where the classic generation stood (Kafka's ConsumerGroup.validateOffset*):
a commit or fetch from a member must carry its current epoch, else STALE_MEMBER_EPOCH; without a
member (epoch -1) only an empty group takes commits, and anyone may fetch.
"""

from __future__ import annotations

from collections.abc import Callable

from ....protocol.errors import ErrorCode

from .. import commands as c
from . import consumer_commands as cc
from .consumer_group import ConsumerGroup, ConsumerGroupState, TopicImage
from .consumer_heartbeat import CCtx, _subscribed_names
from .consumer_records import group_tombstones
from ..classic.group import ClassicGroup
from ..classic.offsets import _fetched, _metadata_too_large, cannot_fit, refuse_too_large
from ...runtime.outcome import Durability, Reply
from ....protocol.records.classic_records import OffsetCommitRecord, OffsetCommitTombstone, Record
from ..results import (
    DeletedGroup,
    OffsetCommitResult,
    OffsetDeleteResult,
    OffsetFetchResult,
    OffsetFetchTopic,
    PartitionError,
    TopicErrors,
)

E = ErrorCode


def validate_offset_commit(group: ConsumerGroup, cmd: c.OffsetCommit) -> ErrorCode | None:
    if cmd.transactional:
        return None  # a committed transaction's offsets: checked when TxnOffsetCommit sent them
    if cmd.generation_id < 0 and not group.members:
        return None  # admin tools and consumers without group management
    member = group.members.get(cmd.member_id)
    if member is None:
        return E.UNKNOWN_MEMBER_ID
    if member.classic is not None:
        # A classic member inside the group (migration): its generation is its member epoch.
        return None if cmd.generation_id == member.member_epoch else E.ILLEGAL_GENERATION
    if cmd.validate_only:
        # TxnOffsetCommit's check (KIP-447): any version, and a stale epoch is ILLEGAL_GENERATION,
        # the error a transactional producer knows (Kafka's validateTransactionalOffsetCommit).
        return None if cmd.generation_id == member.member_epoch else E.ILLEGAL_GENERATION
    if cmd.api_version < 9:
        return E.UNSUPPORTED_VERSION  # members of the new protocol commit with v9+
    if cmd.generation_id != member.member_epoch:
        return E.STALE_MEMBER_EPOCH
    return None


def handle_consumer_offset_commit(ctx: CCtx, group: ConsumerGroup | None, cmd: c.OffsetCommit,
                                  max_batch_bytes: Callable[[], int]) -> None:
    assert group is not None
    error = validate_offset_commit(group, cmd)
    if error is not None or cmd.validate_only:  # a check writes nothing
        ctx.out.reply(cmd.reply_to, OffsetCommitResult.all_failed(cmd, error if error is not None else E.NONE))
        return
    max_metadata = ctx.config.offset_metadata_max_bytes
    if cannot_fit(cmd, max_metadata, max_batch_bytes()):
        refuse_too_large(ctx.out, cmd, max_metadata)
        return
    records: list[Record] = []
    topics: list[TopicErrors] = []
    for topic in cmd.topics:
        partitions: list[PartitionError] = []
        for p in topic.partitions:
            metadata = p.metadata or ""
            if _metadata_too_large(metadata, max_metadata):
                partitions.append(PartitionError(p.partition, E.OFFSET_METADATA_TOO_LARGE))
                continue
            partitions.append(PartitionError(p.partition, E.NONE))
            records.append(OffsetCommitRecord(
                group=cmd.group_id, topic=topic.name, partition=p.partition, offset=p.offset,
                leader_epoch=p.leader_epoch, metadata=metadata, commit_timestamp=ctx.now_ms))
        topics.append(TopicErrors(topic.name, tuple(partitions)))
    result = OffsetCommitResult(tuple(topics))
    if records:
        ctx.out.write(records, [Reply(cmd.reply_to, result)] if cmd.reply_to is not None else [],
                      durability=Durability.IN_LOG if cmd.transactional else Durability.PIPELINED)
    else:
        ctx.out.reply(cmd.reply_to, result)


def handle_consumer_offset_fetch(ctx: CCtx, group: ConsumerGroup | None, cmd: c.OffsetFetch) -> None:
    assert group is not None
    member_id = getattr(cmd, "member_id", None)
    member_epoch = getattr(cmd, "member_epoch", -1)
    if not (member_id is None and member_epoch < 0):
        member = group.members.get(member_id or "")
        if member is None:
            ctx.out.reply(cmd.reply_to, OffsetFetchResult(E.UNKNOWN_MEMBER_ID))
            return
        if member_epoch != member.member_epoch:
            code = E.ILLEGAL_GENERATION if member.classic is not None else E.STALE_MEMBER_EPOCH
            ctx.out.reply(cmd.reply_to, OffsetFetchResult(code))
            return
    offsets = group.offsets
    if cmd.topics is None:
        by_topic: dict[str, list] = {}
        for (topic, partition), o in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(_fetched(partition, o))
        topics = tuple(OffsetFetchTopic(t, tuple(ps)) for t, ps in by_topic.items())
    else:
        topics = tuple(OffsetFetchTopic(t.name, tuple(_fetched(p, offsets.get((t.name, p))) for p in t.partitions))
                       for t in cmd.topics)
    ctx.out.reply(cmd.reply_to, OffsetFetchResult(E.NONE, topics))


def subscribed_topics(ctx: CCtx, group: ConsumerGroup) -> set[str]:
    return _subscribed_names(group, None, None, group.resolved_regexes)


def handle_consumer_offset_delete(ctx: CCtx, group: ConsumerGroup | None, cmd: c.OffsetDelete) -> None:
    assert group is not None
    subscribed = subscribed_topics(ctx, group)
    records: list[Record] = []
    topics: list[TopicErrors] = []
    for topic in cmd.topics:
        if topic.name in subscribed:
            topics.append(TopicErrors(topic.name, tuple(
                PartitionError(p, E.GROUP_SUBSCRIBED_TO_TOPIC) for p in topic.partitions)))
            continue
        topics.append(TopicErrors(topic.name, tuple(PartitionError(p, E.NONE) for p in topic.partitions)))
        records += [OffsetCommitTombstone(group.group_id, topic.name, p) for p in topic.partitions
                    if (topic.name, p) in group.offsets]
    result = OffsetDeleteResult(E.NONE, tuple(topics))
    if records:
        ctx.out.write(records, [Reply(cmd.reply_to, result)] if cmd.reply_to is not None else [],
                      durability=Durability.PIPELINED)
    else:
        ctx.out.reply(cmd.reply_to, result)


def handle_consumer_delete_group(ctx: CCtx, group: ConsumerGroup | None, cmd: c.DeleteGroup) -> None:
    assert group is not None
    if group.state is not ConsumerGroupState.EMPTY:
        ctx.out.reply(cmd.reply_to, DeletedGroup(cmd.group_id, E.NON_EMPTY_GROUP))
        return
    records: list = [OffsetCommitTombstone(group.group_id, t, p) for t, p in group.offsets]
    records += group_tombstones(group)
    ctx.out.write(records, [Reply(cmd.reply_to, DeletedGroup(cmd.group_id, E.NONE))] if cmd.reply_to else [])


def handle_consumer_offset_expiry(ctx: CCtx, group: ConsumerGroup | None, check: c.OffsetExpiryCheck) -> None:
    """Offsets of topics nobody subscribes to expire `offsets.retention.minutes` after their
    commit; an empty group whose last offset goes is deleted (Kafka's cleanupGroupMetadata)."""
    if group is None:
        return
    subscribed = subscribed_topics(ctx, group)
    retention = ctx.config.offsets_retention_ms
    expired = [(t, p) for (t, p), o in group.offsets.items()
               if t not in subscribed and ctx.now_ms - o.commit_timestamp >= retention]
    records: list = [OffsetCommitTombstone(group.group_id, t, p) for t, p in expired]
    if group.state is ConsumerGroupState.EMPTY and len(expired) == len(group.offsets):
        records += group_tombstones(group)
    if records:
        ctx.out.write(records)


# -- ConsumerGroupDescribe ------------------------------------------------------------------------


def _described(assignment, by_id: dict) -> tuple[cc.DescribedTopicPartitions, ...]:
    out = []
    for topic_id, partitions in sorted(assignment.items(), key=lambda kv: str(kv[0])):
        topic: TopicImage | None = by_id.get(topic_id)
        if topic is not None and partitions:
            out.append(cc.DescribedTopicPartitions(topic_id, topic.name, tuple(sorted(partitions))))
    return tuple(out)


def consumer_group_describe(ctx: CCtx, group: ConsumerGroup | None, classic: ClassicGroup | None,
                            group_id: str) -> cc.DescribedConsumerGroup:
    if group is None:
        message = (f"Group {group_id} is not a consumer group." if classic is not None
                   else f"Group {group_id} not found.")
        return cc.DescribedConsumerGroup(group_id, E.GROUP_ID_NOT_FOUND, message)
    by_id = {t.topic_id: t for t in ctx.image().values()}
    members = tuple(
        cc.DescribedConsumerMember(
            member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
            client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=m.subscribed_topic_names, subscribed_topic_regex=m.subscribed_topic_regex,
            assignment=_described(m.assigned_partitions, by_id),
            target_assignment=_described(group.target(m.member_id), by_id),
            member_type=0 if m.classic is not None else 1,
        )
        for m in group.members.values()
    )
    return cc.DescribedConsumerGroup(
        group_id, E.NONE, None, str(group.state), group.group_epoch, group.assignment_epoch,
        group.preferred_server_assignor() or ctx.config.consumer_assignors[0], members)
