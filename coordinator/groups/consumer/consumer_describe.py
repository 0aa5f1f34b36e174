"""ConsumerGroupDescribe (KIP-848). A consumer group's offsets, deletion and retention are the group
shard's, for every type (groups/offset_store.py), with the answers the group gives
(consumer_group.ConsumerGroup.validate_offset_*)."""

from __future__ import annotations

from typing import Any

from ....protocol.errors import ErrorCode

from . import consumer_commands as cc
from .consumer_group import ConsumerGroup, TopicImage
from .consumer_heartbeat import CCtx

E = ErrorCode


# -- ConsumerGroupDescribe ------------------------------------------------------------------------


def _described(assignment, by_id: dict) -> tuple[cc.DescribedTopicPartitions, ...]:
    out = []
    for topic_id, partitions in sorted(assignment.items(), key=lambda kv: str(kv[0])):
        topic: TopicImage | None = by_id.get(topic_id)
        if topic is not None and partitions:
            out.append(cc.DescribedTopicPartitions(topic_id, topic.name, tuple(sorted(partitions))))
    return tuple(out)


def consumer_group_describe(ctx: CCtx, group: ConsumerGroup | None, other: Any,
                            group_id: str) -> cc.DescribedConsumerGroup:
    """`other`: the group of another type the id names, if any ("not a consumer group")."""
    if group is None:
        message = (f"Group {group_id} is not a consumer group." if other is not None
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
