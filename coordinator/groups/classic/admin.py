"""DescribeGroups, ListGroups, DeleteGroups."""

from __future__ import annotations

from collections.abc import Iterable

from ....protocol.errors import ErrorCode

from .. import commands as c
from .group import ClassicGroup, GroupState
from ...runtime.outcome import GroupRemoved, Reply
from .rebalance import Ctx
from ....protocol.records.classic_records import GroupMetadataTombstone, OffsetCommitTombstone, Record
from ..results import DeletedGroup, DescribedGroup, DescribedMember, ListedGroup

E = ErrorCode
S = GroupState


def describe_group(group: ClassicGroup | None, cmd: c.DescribeGroup) -> DescribedGroup:
    """Stable groups show each member's metadata for the chosen protocol; other states show the
    members without metadata (assignment as currently held) and no protocol, like Kafka 4's
    coordinator."""
    if group is None or group.is_state(S.DEAD):
        if cmd.api_version >= 6:
            return DescribedGroup(cmd.group_id, E.GROUP_ID_NOT_FOUND, state=str(S.DEAD))
        return DescribedGroup(cmd.group_id, E.NONE, state=str(S.DEAD))
    stable = group.is_state(S.STABLE) and group.protocol_name is not None
    members = tuple(
        DescribedMember(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            metadata=m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
            assignment=m.assignment,
        )
        for m in group.members.values()
    )
    return DescribedGroup(
        group_id=group.group_id,
        error=E.NONE,
        state=str(group.state),
        protocol_type=group.protocol_type or "",
        protocol_data=(group.protocol_name or "") if stable else "",
        members=members,
    )


def handle_describe_group(ctx: Ctx, group: ClassicGroup | None, cmd: c.DescribeGroup) -> None:
    ctx.out.reply(cmd.reply_to, describe_group(group, cmd))


def list_groups(groups: Iterable[ClassicGroup], states_filter: Iterable[str],
                types_filter: Iterable[str]) -> list[ListedGroup]:
    """States and types filters are case-insensitive; every group here is of type "classic"."""
    states = {s.lower() for s in states_filter}
    types = {t.lower() for t in types_filter}
    if types and "classic" not in types:
        return []
    listed: list[ListedGroup] = []
    for group in groups:
        if group.is_state(S.DEAD):
            continue
        if states and str(group.state).lower() not in states:
            continue
        listed.append(ListedGroup(group.group_id, group.protocol_type or "", str(group.state)))
    return listed


def handle_delete_group(ctx: Ctx, group: ClassicGroup | None, cmd: c.DeleteGroup) -> None:
    if group is None or group.is_state(S.DEAD):
        ctx.out.reply(cmd.reply_to, DeletedGroup(cmd.group_id, E.GROUP_ID_NOT_FOUND))
        return
    if not group.is_state(S.EMPTY):
        ctx.out.reply(cmd.reply_to, DeletedGroup(cmd.group_id, E.NON_EMPTY_GROUP))
        return
    records: list[Record] = [
        OffsetCommitTombstone(group.group_id, topic, partition) for topic, partition in group.offsets
    ]
    records.append(GroupMetadataTombstone(group.group_id))
    # The group stays as it is until the tombstones are durable, so a failed write changes nothing.
    replies = [Reply(cmd.reply_to, DeletedGroup(cmd.group_id, E.NONE))] if cmd.reply_to is not None else []
    ctx.out.write(records, replies, then=GroupRemoved(group.group_id))
