"""Offline migration from a streams group to a classic one (Kafka 4.4's classicGroupJoin and
maybeDeleteEmptyStreamsGroup): a classic JoinGroup for the id of an empty streams group deletes the
streams group (its records' tombstones; its committed offsets stay with the id), then the join is the
classic type's, as for a new group. A streams group with members refuses it with
INCONSISTENT_GROUP_PROTOCOL. (The other way, an empty classic group giving way to a streams member, is
streams_groups' _group.)"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ....protocol.errors import ErrorCode
from ...runtime.outcome import Outcome
from .. import commands as c
from ..results import JoinGroupResult
from . import streams_commands as sc
from .streams_group import StreamsGroup


@dataclass(frozen=True, slots=True)
class JoinAfterStreamsGroupDeleted:
    """Once the empty streams group's tombstones are durable, the JoinGroup goes to the classic type."""

    group_id: str
    join: c.JoinGroup


def classic_join(out: Outcome, group: StreamsGroup, cmd: c.JoinGroup) -> None:
    if not group.is_empty():
        out.reply(cmd.reply_to, JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, c.UNKNOWN_MEMBER_ID))
        return
    out.cancel(sc.initial_delay_key(group.group_id))
    out.write(group.tombstones(), then=JoinAfterStreamsGroupDeleted(group.group_id, cmd))


def after_deleted(follow_up: JoinAfterStreamsGroupDeleted, error: ErrorCode | None, now_ms: int,
                  dispatch: Callable[[c.JoinGroup, int], Outcome]) -> Outcome:
    if error is None:
        return dispatch(follow_up.join, now_ms)
    out = Outcome()
    out.reply(follow_up.join.reply_to, JoinGroupResult(error, follow_up.join.member_id))
    return out
