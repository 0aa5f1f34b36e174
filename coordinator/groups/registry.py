"""The group types a `__consumer_offsets` partition's shard runs, in the order it asks them (the
first one also makes the simple groups that hold offsets committed without group management).

A new group type is a folder (its groups, commands, records, follow-ups: group_types.GroupType) and a
line here; the shard, the service and the runtime stay as they are. A service can be given its own
list too (GroupCoordinatorService(group_types=...)), as the toy type's test does.
"""

from __future__ import annotations

from .classic.classic import ClassicGroups
from .consumer.consumer_on_demand import ConsumerGroupsOnDemand
from .group_types import GroupTypeFactory

GROUP_TYPES: tuple[GroupTypeFactory, ...] = (
    ClassicGroups,  # the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup)
    ConsumerGroupsOnDemand,  # KIP-848 consumer groups (ConsumerGroupHeartbeat), imported with their first use
)
