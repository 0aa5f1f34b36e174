"""What the three share group offsets APIs (90-92) share: whether a group may have its share-partitions
changed (it exists and has no member), asked of the group coordinator."""

from __future__ import annotations

from . import group_wire
from ..network.router import RequestContext
from ...coordinator.groups.share import share_commands as sc
from ...protocol.errors import ErrorCode

E = ErrorCode


async def describe_group(ctx: RequestContext, group_id: str) -> sc.DescribedShareGroup:
    async def call(coordinator) -> sc.DescribedShareGroup:  # type: ignore[no-untyped-def]
        return await coordinator.submit(sc.ShareGroupDescribe(group_id))

    return await group_wire.answer(ctx, call, lambda e: sc.DescribedShareGroup(group_id, e))


async def refusal_to_change(ctx: RequestContext, group_id: str, *, must_exist: bool = False
                            ) -> tuple[ErrorCode, str | None] | None:
    """None when the group's share-partitions may change; else the group-level error Kafka answers.
    A group of another type is GROUP_ID_NOT_FOUND ("Group g is not a share group."), never made a
    share group. A group that does not exist has nothing in flight either: its state may be set (Kafka 4.4 does,
    and makes the group so), but not deleted (`must_exist`: Kafka's initiateDeleteShareGroupOffsets
    asks for the share group; one whose offsets were only altered has share-partition states here)."""
    if not group_id:  # the coordinator service's own check, with the error's default words (Kafka's)
        return E.INVALID_GROUP_ID, "The group id is invalid."
    described = await describe_group(ctx, group_id)
    if described.other_type:  # Kafka's shareGroup(groupId) and getOrMaybeCreateShareGroup refuse it
        return E.GROUP_ID_NOT_FOUND, described.error_message
    if described.error == E.GROUP_ID_NOT_FOUND and must_exist and not ctx.broker.share_partitions.started(group_id):
        return E.GROUP_ID_NOT_FOUND, described.error_message
    if described.error == E.GROUP_ID_NOT_FOUND:
        return None
    if described.error != E.NONE:
        return ErrorCode(described.error), described.error_message
    if described.members:
        return E.NON_EMPTY_GROUP, "The group is not empty."
    return None
