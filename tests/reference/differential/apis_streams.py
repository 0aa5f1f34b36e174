"""StreamsGroupHeartbeat (88) and StreamsGroupDescribe (89), KIP-1071: a member joining with a
topology whose source topic does not exist (the MISSING_SOURCE_TOPICS status, no tasks), its describe
and its leave; refusals (an empty group id, an unknown group, a group of another type)."""

from __future__ import annotations

from .apis_groups import GROUP
from .craft import STREAMS_GROUP_DESCRIBE, STREAMS_GROUP_HEARTBEAT, make, unique
from .runner import Check, Session
from .versions import sweep


def _join(group: str, member: str, source: str) -> object:
    return make(STREAMS_GROUP_HEARTBEAT, group_id=group, member_id=member, member_epoch=0,
                endpoint_information_epoch=0, rebalance_timeout_ms=30_000, process_id="dw-process",
                topology={"epoch": 0, "subtopologies": [
                    {"subtopology_id": "0", "source_topics": [source], "source_topic_regex": [],
                     "state_changelog_topics": [], "repartition_sink_topics": [], "repartition_source_topics": [],
                     "copartition_groups": []}]},
                active_tasks=[], standby_tasks=[], warmup_tasks=[])


def checks() -> list[Check]:
    async def round_trip(s: Session, v: int) -> None:
        group = unique(s, "dw")
        await s.call(STREAMS_GROUP_HEARTBEAT, v, _join(group, "dw-member-a-0001", group + "-missing"), "join")
        await s.call(STREAMS_GROUP_DESCRIBE, v, make(STREAMS_GROUP_DESCRIBE, group_ids=[group],
                                                     include_authorized_operations=False), "describe")
        await s.call(STREAMS_GROUP_HEARTBEAT, v, make(STREAMS_GROUP_HEARTBEAT, group_id=group,
                                                      member_id="dw-member-a-0001", member_epoch=-1), "leave")

    def heartbeat(group: str, epoch: int):
        return lambda s, v: make(STREAMS_GROUP_HEARTBEAT, group_id=group, member_id="dw-member-x-0001",
                                 member_epoch=epoch)

    def describe(*groups: str):
        return lambda s, v: make(STREAMS_GROUP_DESCRIBE, group_ids=list(groups), include_authorized_operations=False)

    return [
        *sweep(STREAMS_GROUP_HEARTBEAT, "a member joins with a missing source topic, is described and leaves",
               steps=round_trip),
        *sweep(STREAMS_GROUP_HEARTBEAT, "an unknown group", heartbeat("dw-streams-nobody", 5)),
        *sweep(STREAMS_GROUP_HEARTBEAT, "a classic group", heartbeat(GROUP, 5)),
        *sweep(STREAMS_GROUP_DESCRIBE, "unknown group", describe("dw-nobody")),
        *sweep(STREAMS_GROUP_DESCRIBE, "a classic group", describe(GROUP)),
    ]
