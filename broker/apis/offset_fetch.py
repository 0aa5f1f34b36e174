"""OffsetFetch (9) v0-v10 onto `GroupCoordinatorService.fetch_offsets`.

- v0 (Kafka 3.9; removed in 4.0) is answered as v1, from the coordinator.
- v1: one group, the partitions are required; there is no top-level error, so a group-level error
  is put on every requested partition (offset -1, metadata "").
- v2-v7: one group; `topics = null` means every committed partition; a group-level error is the
  top-level `error_code` (and no topics). v5+ carry the leader epoch, v7 `require_stable`.
- v8+: a batch of groups, each answered on its own (asked concurrently). v9's member id and epoch
  only matter to KIP-848 groups (STALE_MEMBER_EPOCH); for classic groups Kafka ignores them.
  v10 names topics by id; an id this broker does not know is answered UNKNOWN_TOPIC_ID.
- `require_stable` (v7+): a partition with a transactional offset not yet committed or aborted
  (TxnOffsetCommit of an open transaction) answers UNSTABLE_OFFSET_COMMIT, offset -1; clients retry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import group_wire
from .repeats import charge, in_request_order
from ..network.router import RequestContext
from ...coordinator.groups import commands as c
from ...coordinator.groups.results import OffsetFetchResult
from ...protocol.errors import ErrorCode
from ...protocol.wire import ZERO_UUID
from ...protocol.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from ...protocol.messages.offset_fetch_response import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)

if TYPE_CHECKING:
    from ...coordinator.groups.service import GroupCoordinatorService

API_KEY = 9
VERSIONS = (0, 10)
TOPIC_IDS_FROM = 10
# Groups of one request fetched concurrently (v8+).
_FETCHES_AT_ONCE = 256

E = ErrorCode


def _command(group_id: str, topics: Sequence[OffsetFetchRequestTopic | OffsetFetchRequestTopics] | None,
             require_stable: bool, member_id: str | None = None,
             member_epoch: int = -1) -> c.OffsetFetch:
    wanted = None if topics is None else tuple(
        c.TopicPartitions(t.name, tuple(t.partition_indexes)) for t in topics
    )
    return c.OffsetFetch(group_id=group_id, topics=wanted, require_stable=require_stable,
                         member_id=member_id, member_epoch=member_epoch)


async def _fetch(ctx: RequestContext, cmd: c.OffsetFetch) -> OffsetFetchResult:
    """The coordinator's OffsetFetchResult, or (error, ()) when it cannot answer."""

    async def call(coordinator: GroupCoordinatorService) -> OffsetFetchResult:
        return await coordinator.fetch_offsets(cmd)

    result = await group_wire.answer(ctx, call, lambda e: OffsetFetchResult(e))
    return _mark_unstable(ctx, cmd, result) if cmd.require_stable else result


def _mark_unstable(ctx: RequestContext, cmd: c.OffsetFetch, result: OffsetFetchResult) -> OffsetFetchResult:
    from ...coordinator.groups.results import OffsetFetchPartition, OffsetFetchTopic

    if result.error != E.NONE:
        return result
    pending = ctx.broker.transactions.pending_partitions(cmd.group_id)
    if not pending:
        return result
    unstable = OffsetFetchPartition
    topics = tuple(
        OffsetFetchTopic(t.name, tuple(
            unstable(p.partition, error=E.UNSTABLE_OFFSET_COMMIT) if (t.name, p.partition) in pending else p
            for p in t.partitions))
        for t in result.topics
    )
    return OffsetFetchResult(result.error, topics)


def _error_topics_v1(cmd: c.OffsetFetch, error: ErrorCode) -> list[OffsetFetchResponseTopic]:
    return [
        OffsetFetchResponseTopic(name=t.name, partitions=[
            OffsetFetchResponsePartition(partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                                         metadata="", error_code=error)
            for p in t.partitions
        ])
        for t in cmd.topics or ()
    ]


def failed_response(ctx: RequestContext, request: OffsetFetchRequest, error: ErrorCode) -> OffsetFetchResponse:
    v = ctx.api_version
    if v >= 8:
        return OffsetFetchResponse(throttle_time_ms=0, groups=[
            OffsetFetchResponseGroup(group_id=g.group_id, error_code=error, topics=[]) for g in request.groups])
    if v < 2:
        cmd = _command(request.group_id, request.topics or [], False)
        return OffsetFetchResponse(throttle_time_ms=0, topics=_error_topics_v1(cmd, error))
    return OffsetFetchResponse(throttle_time_ms=0, error_code=error, topics=[])


async def handle(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    v = ctx.api_version
    if v >= 8:
        return await _groups(ctx, request)

    topics = request.topics if v >= 2 else (request.topics or [])
    cmd = _command(request.group_id, topics, request.require_stable if v >= 7 else False)
    r = await _fetch(ctx, cmd)
    if r.error != E.NONE:
        if v < 2:
            return OffsetFetchResponse(throttle_time_ms=0, topics=_error_topics_v1(cmd, r.error))
        return OffsetFetchResponse(throttle_time_ms=0, error_code=r.error, topics=[])
    return OffsetFetchResponse(
        throttle_time_ms=0,
        error_code=E.NONE,
        topics=[
            OffsetFetchResponseTopic(name=t.name, partitions=[
                OffsetFetchResponsePartition(
                    partition_index=p.partition, committed_offset=p.offset,
                    committed_leader_epoch=p.leader_epoch if v >= 5 else -1, metadata=p.metadata,
                    error_code=p.error,
                )
                for p in t.partitions
            ])
            for t in r.topics
        ],
    )


async def _groups(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    """v8+: each group asked for is answered in its place; a group asked for twice the same way is
    fetched once and answered by the same entry (broker/apis/repeats.py)."""
    v = ctx.api_version
    ids_by_name = {name: info.topic_id for name, info in ctx.broker.catalogue.topics().items()}
    names_by_id = {topic_id: name for name, topic_id in ids_by_name.items()} if v >= TOPIC_IDS_FROM else {}
    keys: list[tuple] = []
    asked: dict[tuple, tuple[c.OffsetFetch, tuple]] = {}
    for g in request.groups:
        missing: list[tuple] = []
        if v >= TOPIC_IDS_FROM and g.topics is not None:
            known = []
            for t in g.topics:
                name = names_by_id.get(t.topic_id)
                if name is None:
                    missing.append((t.topic_id, tuple(t.partition_indexes)))
                else:
                    t.name = name
                    known.append(t)
            g.topics = known
        unknown = tuple(missing)
        cmd = _command(g.group_id, g.topics, request.require_stable,
                       g.member_id if v >= 9 else None, g.member_epoch if v >= 9 else -1)
        key = (cmd.group_id, cmd.topics, cmd.member_id, cmd.member_epoch, unknown)
        keys.append(key)
        asked.setdefault(key, (cmd, unknown))
    # A group asked for again with another member id or epoch is fetched again (the epoch is checked
    # for KIP-848 groups) but counts as a repeat, and the fetches go in slices so that a request of
    # such repeats is refused before it has built more than the bound.
    answers: dict[tuple, OffsetFetchResponseGroup] = {}
    answered: set[str] = set()
    added = 0
    pending = list(asked.items())
    for at in range(0, len(pending), _FETCHES_AT_ONCE):
        part = pending[at:at + _FETCHES_AT_ONCE]
        results = await asyncio.gather(*(_fetch(ctx, cmd) for _, (cmd, _) in part))
        for (key, (cmd, unknown)), r in zip(part, results):
            answer = answers[key] = _group(cmd, unknown, r, ids_by_name)
            if cmd.group_id in answered:
                added = charge(added, answer)
            answered.add(cmd.group_id)
    return OffsetFetchResponse(throttle_time_ms=0, groups=in_request_order(keys, answers, added))


def _group(cmd: c.OffsetFetch, unknown: tuple, r: OffsetFetchResult,
           ids_by_name: dict[str, Any]) -> OffsetFetchResponseGroup:
    if r.error != E.NONE:
        return OffsetFetchResponseGroup(group_id=cmd.group_id, error_code=r.error, topics=[])
    topics = [OffsetFetchResponseTopics(topic_id=topic_id, partitions=[OffsetFetchResponsePartitions(
        partition_index=p, committed_offset=-1, committed_leader_epoch=-1, metadata="",
        error_code=E.UNKNOWN_TOPIC_ID) for p in partitions]) for topic_id, partitions in unknown]
    topics += [
        OffsetFetchResponseTopics(name=t.name, topic_id=ids_by_name.get(t.name, ZERO_UUID), partitions=[
            OffsetFetchResponsePartitions(
                partition_index=p.partition, committed_offset=p.offset,
                committed_leader_epoch=p.leader_epoch, metadata=p.metadata, error_code=p.error,
            )
            for p in t.partitions
        ])
        for t in r.topics
    ]
    return OffsetFetchResponseGroup(group_id=cmd.group_id, error_code=r.error, topics=topics)
