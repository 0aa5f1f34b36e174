"""ShareFetch (78) v1-v2 (KIP-932): a share group member's fetch through its share session, with the
acknowledgements of what it fetched before piggybacked (the share-partition manager:
broker/coordinators/share_partitions.py).

Each partition of the session is read for what its share-partition can give the member: records
acquired under a lock (`AcquisitionLockTimeoutMs`) and the batches holding them; the client keeps
only the acquired offsets. When nothing is acquired and `max_wait_ms` > 0 the request waits in the
fetch purgatory, woken by new records or by records given back (a lock expiring, a release), as
Fetch's long poll. A partition of a topic the principal may not READ is answered
TOPIC_AUTHORIZATION_FAILED (its fetch and its acknowledgements) and stays in the session, as Kafka's
KafkaApis does: every request checks what the session holds, so a revoked ACL refuses the next fetch.
MaxRecords bounds the records acquired strictly in v2's record_limit mode (KIP-1206); in
batch_optimized mode (v1's, v2's default) the batch it falls in is acquired to its end, as Kafka
does. v2's Renew acknowledgements are served.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from ..coordinators.share_partitions import answered
from ..network.router import RequestContext
from .share_group_heartbeat import share_groups_off, valid_member_id
from ...protocol.errors import ErrorCode
from ...protocol.messages.share_fetch_request import ShareFetchRequest
from ...protocol.messages.share_fetch_response import (
    AcquiredRecords,
    LeaderIdAndEpoch,
    PartitionData,
    ShareFetchableTopicResponse,
    ShareFetchResponse,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..coordinators.share_partitions import PartitionAnswer

API_KEY = 78
VERSIONS = (1, 2)
# KIP-1206's ShareAcquireMode (v2): 0 batch_optimized (v1's, and the default: MaxRecords is soft, the
# batch it falls in is acquired whole), 1 record_limit (at most MaxRecords records acquired).
RECORD_LIMIT = 1
E = ErrorCode


def failed_response(_ctx: RequestContext, _request: ShareFetchRequest, error: ErrorCode,
                    message: str | None = None) -> ShareFetchResponse:
    return ShareFetchResponse(throttle_time_ms=0, error_code=error, error_message=message,
                              acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[])


def may_read(ctx: RequestContext) -> Callable[[str], bool]:
    """READ on a topic for the request's principal (everything without an authorizer)."""
    security = ctx.broker.security_if_built
    reader = None if security is None else security.topic_reader(ctx)
    return reader if reader is not None else (lambda _name: True)


def _partition(ctx: RequestContext, index: int, answer: PartitionAnswer | None, ack_error: ErrorCode | None
               ) -> PartitionData:
    return PartitionData(
        partition_index=index,
        error_code=answer.error if answer is not None else E.NONE,
        acknowledge_error_code=ack_error if ack_error is not None else E.NONE,
        current_leader=LeaderIdAndEpoch(leader_id=ctx.broker.node_id, leader_epoch=0),
        records=answer.records if answer is not None else b"",
        acquired_records=[AcquiredRecords(first_offset=a.first, last_offset=a.last, delivery_count=a.delivery_count)
                          for a in (answer.acquired if answer is not None else ())],
    )


async def handle(ctx: RequestContext, request: ShareFetchRequest) -> ShareFetchResponse:
    broker = ctx.broker
    if share_groups_off(ctx):
        return failed_response(ctx, request, E.UNSUPPORTED_VERSION)
    # KafkaApis: a null group id or an invalid member id is INVALID_REQUEST (an empty group id is a
    # group's); its error answers carry no message
    if request.group_id is None or not valid_member_id(request.member_id):
        return failed_response(ctx, request, E.INVALID_REQUEST)
    member_id: str = request.member_id or ""
    manager = broker.share_partitions
    await manager.ready()  # the share coordinator has replayed its log
    epoch = request.share_session_epoch
    has_acks = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    if epoch == 0 and has_acks:  # "Acknowledge data present on initial fetch request" (its log only)
        return failed_response(ctx, request, E.INVALID_REQUEST)
    session, error = manager.session(request.group_id, member_id, epoch, broker.node_id,
                                     ctx.connection_id)
    if session is None:
        return failed_response(ctx, request, error)
    names = broker.catalogue.names_by_id()
    readable = may_read(ctx)
    acks: list[tuple[tuple[uuid.UUID, int], Awaitable[ErrorCode]]] = []  # applied in order, awaited together
    for topic in request.topics:
        name = names.get(topic.topic_id)
        for p in topic.partitions:
            key = (topic.topic_id, p.partition_index)
            if epoch != -1 and key not in session.partitions:
                session.partitions[key] = None
                session.must_answer.add(key)  # named in the next answer (this one), records or not
            if p.acknowledgement_batches:
                acks.append((key, answered(E.UNKNOWN_TOPIC_ID) if name is None else answered(
                    E.TOPIC_AUTHORIZATION_FAILED) if not readable(name) else manager.acknowledge(
                    request.group_id, member_id, name, p.partition_index,
                    [(b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in p.acknowledgement_batches])))
    ack_errors = dict(zip([key for key, _ in acks], await asyncio.gather(*(wait for _, wait in acks))))
    for forgotten in request.forgotten_topics_data:
        for index in forgotten.partitions:
            session.partitions.pop((forgotten.topic_id, index), None)
            session.must_answer.discard((forgotten.topic_id, index))
    answers: dict[tuple[uuid.UUID, int], PartitionAnswer] = {}
    if epoch == -1:
        manager.close(session)  # the last request: acknowledgements only, then what it holds goes back
    else:
        for topic_id, index in session.partitions:  # a share-partition with no state starts per the group's config
            if topic_id in names and readable(names[topic_id]):
                await manager.start_offset(request.group_id, names[topic_id], index)
        await _prepare_reads(ctx, request, list(session.partitions), names, readable)
        answers = _fetch_all(ctx, request, list(session.partitions), names, readable)
        if request.max_wait_ms > 0 and not any(a.acquired or a.error != E.NONE for a in answers.values()):
            keys = [(names[t], p) for t, p in session.partitions if t in names and readable(names[t])]
            group_id = request.group_id
            await broker.fetch_purgatory.wait(  # MaxBytes 0 acquires nothing: it waits out MaxWaitMs
                request.max_wait_ms,
                lambda: request.max_bytes > 0 and any(manager.can_acquire(group_id, t, p) for t, p in keys), keys)
            if share_groups_off(ctx):  # turned off while it waited: its session is gone
                return failed_response(ctx, request, E.UNSUPPORTED_VERSION)
            await _prepare_reads(ctx, request, list(session.partitions), names, readable)
            answers = _fetch_all(ctx, request, list(session.partitions), names, readable)
        session.acquired_from.update((names[t], p) for (t, p), a in answers.items() if a.acquired)
    responses: dict[uuid.UUID, ShareFetchableTopicResponse] = {}
    for key in dict.fromkeys([*answers, *ack_errors]):
        answer = answers.get(key)
        # Kafka's ShareSessionContext: a new session's answer names every partition it fetched; a later
        # one those with records or an error, and those it must (added, or erred last time)
        failed = answer is not None and answer.error != E.NONE
        if failed:
            session.must_answer.add(key)
        elif answer is not None and key in session.must_answer:
            session.must_answer.discard(key)
        elif epoch != 0 and key not in ack_errors and (answer is None or not answer.acquired):
            continue  # nothing to say about it
        topic_id, index = key
        responses.setdefault(topic_id, ShareFetchableTopicResponse(topic_id=topic_id, partitions=[])).partitions.append(
            _partition(ctx, index, answer, ack_errors.get(key)))
    return ShareFetchResponse(throttle_time_ms=0, error_code=E.NONE, error_message=None,
                              acquisition_lock_timeout_ms=manager.lock_ms_of(request.group_id), responses=list(responses.values()),
                              node_endpoints=[])


async def _prepare_reads(ctx: RequestContext, request: ShareFetchRequest, keys: list[tuple[uuid.UUID, int]],
                         names: dict[uuid.UUID, str], readable: Callable[[str], bool]) -> None:
    """What `_fetch_all` will read that the engine keeps outside memory (PostgreSQL's old batches) is
    read in first, asynchronously, as Fetch does (broker/apis/fetch.py)."""
    manager = ctx.broker.share_partitions
    budget = max(1, min(request.max_bytes, ctx.broker.config.fetch_max_bytes))
    reads = []
    for topic_id, index in keys:
        name = names.get(topic_id)
        if name is not None and readable(name):
            offset = manager.read_offset(request.group_id or "", name, index)
            if offset is not None:
                reads.append((name, index, offset, budget))
    await ctx.broker.partitions.prepare_reads(reads)


def _fetch_all(ctx: RequestContext, request: ShareFetchRequest, keys: list[tuple[uuid.UUID, int]],
               names: dict[uuid.UUID, str], readable: Callable[[str], bool]
               ) -> dict[tuple[uuid.UUID, int], PartitionAnswer]:
    from ..coordinators.share_partitions import PartitionAnswer

    manager = ctx.broker.share_partitions
    # MaxBytes 0 acquires no records, as Kafka answers it (librdkafka's 0180 and the Java client pin it)
    budget = min(request.max_bytes, ctx.broker.config.fetch_max_bytes)
    records_left = request.max_records if request.max_records > 0 else 500
    answers: dict[tuple[uuid.UUID, int], PartitionAnswer] = {}
    for topic_id, index in keys:
        name = names.get(topic_id)
        if name is None:
            answers[(topic_id, index)] = PartitionAnswer(error=E.UNKNOWN_TOPIC_ID)
            continue
        if not readable(name):
            answers[(topic_id, index)] = PartitionAnswer(error=E.TOPIC_AUTHORIZATION_FAILED)
            continue
        if records_left <= 0 or budget <= 0:
            break
        answer = manager.fetch(request.group_id or "", request.member_id or "", name, index, budget, records_left,
                               request.share_acquire_mode != RECORD_LIMIT)
        answers[(topic_id, index)] = answer
        budget -= len(answer.records)
        records_left -= sum(a.last - a.first + 1 for a in answer.acquired)
    return answers
