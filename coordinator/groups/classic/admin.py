"""DescribeGroups (ListGroups and DeleteGroups are the group shard's, for every type)."""

from __future__ import annotations

from ....protocol.errors import ErrorCode

from .. import commands as c
from .group import ClassicGroup, GroupState
from .rebalance import Ctx
from ..results import DescribedGroup, DescribedMember

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
