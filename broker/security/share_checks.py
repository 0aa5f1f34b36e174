"""ACL checks of the share group APIs (KIP-932), as KafkaApis makes them: GROUP READ to heartbeat, fetch,
acknowledge and alter offsets, GROUP DESCRIBE to describe a group or its offsets, GROUP DELETE to delete
its offsets, TOPIC DESCRIBE to see a topic's offsets and TOPIC READ to alter or delete them; a member subscribes only to topics it may DESCRIBE. A refused group refuses the request.
READ on each topic of a share fetch or acknowledgement is checked by the handlers themselves
(Security.topic_reader), since a share session's partitions outlive the request that named them."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from .acl import Operation as Op, ResourceType as RT
from .check_helpers import DENIED_MESSAGE, GROUP_DENIED, TOPIC_DENIED, Call, split
from .txn_group_admin_checks import check_consumer_group_heartbeat
from ..network.error_answers import refuse
from ..network.router import RequestContext, then

if TYPE_CHECKING:
    from .service import Security

check_share_group_heartbeat = check_consumer_group_heartbeat  # the same checks (KafkaApis)


def group_check(operation: Op):
    """The request's one group needs `operation`; refused, the API's own error answer."""
    async def check(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
        if sec.authorize(ctx, operation, RT.GROUP, request.group_id):
            return await call(request)
        return refuse(ctx, request, GROUP_DENIED, DENIED_MESSAGE[GROUP_DENIED])
    return check


async def check_share_group_describe(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    from ...protocol.messages.share_group_describe_response import DescribedGroup

    return await split(
        ctx, request, call, sec, items="group_ids", answer_list="groups",
        allowed=lambda g: sec.authorize(ctx, Op.DESCRIBE, RT.GROUP, g),
        denied_entry=lambda g: DescribedGroup(error_code=GROUP_DENIED, error_message=DENIED_MESSAGE[GROUP_DENIED],
                                              group_id=g, authorized_operations=-2147483648))


async def check_describe_share_group_offsets(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    """GROUP DESCRIBE per group; then, as KafkaApis.describeShareGroupOffsetsForGroup, a named topic the
    principal may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED (start offset and lag -1, no topic id),
    and with every topic asked for (topics null) the ones it may not describe are left out."""
    from ...protocol.messages import describe_share_group_offsets_response as r

    may_describe = lambda name: sec.authorize(ctx, Op.DESCRIBE, RT.TOPIC, name)  # noqa: E731
    refused: dict[str, list[Any]] = {}
    groups = []
    for g in request.groups:
        if g.topics is None or not sec.authorize(ctx, Op.DESCRIBE, RT.GROUP, g.group_id, audit_denial=False):
            groups.append(g)
            continue
        refused[g.group_id] = [t for t in g.topics if not may_describe(t.topic_name)]
        groups.append(dataclasses.replace(g, topics=[t for t in g.topics if t not in refused[g.group_id]]))
    result = await split(
        ctx, dataclasses.replace(request, groups=groups), call, sec, items="groups", answer_list="groups",
        allowed=lambda g: sec.authorize(ctx, Op.DESCRIBE, RT.GROUP, g.group_id),
        denied_entry=lambda g: r.DescribeShareGroupOffsetsResponseGroup(
            group_id=g.group_id, topics=[], error_code=GROUP_DENIED, error_message=DENIED_MESSAGE[GROUP_DENIED]))
    asked_all = {g.group_id for g in request.groups if g.topics is None}

    def hide(body):
        for group in body.groups:
            if group.error_code != 0:
                continue
            if group.group_id in asked_all:
                group.topics = [t for t in group.topics if may_describe(t.topic_name)]
            group.topics.extend(r.DescribeShareGroupOffsetsResponseTopic(topic_name=t.topic_name, partitions=[
                r.DescribeShareGroupOffsetsResponsePartition(
                    partition_index=i, start_offset=-1, leader_epoch=0, lag=-1, error_code=TOPIC_DENIED,
                    error_message=DENIED_MESSAGE[TOPIC_DENIED]) for i in t.partitions])
                for t in refused.get(group.group_id, ()))
        return body
    return then(result, hide)


def _group_then_topic_read(group_operation: Op, denied_topic):
    """The group needs `group_operation`; each topic named needs READ (KafkaApis' Alter- and
    DeleteShareGroupOffsets): a refused topic is answered by `denied_topic(ctx, topic)` among the
    others, unless the group's answer is an error of its own."""
    async def check(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
        if not sec.authorize(ctx, group_operation, RT.GROUP, request.group_id):
            return refuse(ctx, request, GROUP_DENIED, DENIED_MESSAGE[GROUP_DENIED])
        refused = [t for t in request.topics if not sec.authorize(ctx, Op.READ, RT.TOPIC, t.topic_name)]
        if not refused:
            return await call(request)
        result = await call(dataclasses.replace(request, topics=[t for t in request.topics if t not in refused]))

        def merge(body):
            if body.error_code == 0:
                body.responses[:0] = [denied_topic(ctx, t) for t in refused]
            return body
        return then(result, merge)
    return check


def _alter_denied(ctx: RequestContext, topic: Any) -> Any:
    from ...protocol.messages import alter_share_group_offsets_response as r

    info = ctx.broker.catalogue.topics().get(topic.topic_name)
    return r.AlterShareGroupOffsetsResponseTopic(
        topic_name=topic.topic_name, topic_id=info.topic_id if info is not None else r.ZERO_UUID, partitions=[
            r.AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index, error_code=TOPIC_DENIED,
                                                      error_message=DENIED_MESSAGE[TOPIC_DENIED])
            for p in topic.partitions])


def _delete_denied(_ctx: RequestContext, topic: Any) -> Any:
    from ...protocol.messages import delete_share_group_offsets_response as r

    return r.DeleteShareGroupOffsetsResponseTopic(topic_name=topic.topic_name, error_code=TOPIC_DENIED,
                                                  error_message=DENIED_MESSAGE[TOPIC_DENIED])


def _unless_off(check: Any) -> Any:
    """KafkaApis asks whether share groups are on (share.version 1 or more) before any ACL: when they are
    off the handler answers UNSUPPORTED_VERSION to everyone, authorized or not."""
    async def checked(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
        if ctx.broker.features.level("share.version") < 1:
            return await call(request)
        return await check(ctx, request, call, sec)
    return checked


CHECKS = {api_key: _unless_off(check) for api_key, check in {
    76: check_share_group_heartbeat, 77: check_share_group_describe,
    78: group_check(Op.READ), 79: group_check(Op.READ),
    90: check_describe_share_group_offsets, 91: _group_then_topic_read(Op.READ, _alter_denied),
    92: _group_then_topic_read(Op.DELETE, _delete_denied),
}.items()}
