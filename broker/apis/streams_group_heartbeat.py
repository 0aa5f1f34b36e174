"""StreamsGroupHeartbeat (88) v0-v1 (KIP-1071) onto the group coordinator: join with the topology
(epoch 0), heartbeat with the tasks owned, leave (epoch -1, -2 for a static member).

As Kafka's KafkaApis does, the broker creates the internal topics (repartition, changelog) that the
coordinator found missing, after answering MISSING_INTERNAL_TOPICS; the member's next heartbeat
finds them and the group gets its tasks.
"""

from __future__ import annotations

import dataclasses

import structlog

from . import group_wire
from ..network.router import RequestContext
from ...coordinator.groups.streams import streams_commands as sc
from ...coordinator.groups.streams.streams_group import topology_of
from ...coordinator.groups.streams.topology import TaskSet
from ...protocol.errors import ErrorCode
from ...protocol.messages.streams_group_heartbeat_request import StreamsGroupHeartbeatRequest, TaskIds
from ...protocol.messages.streams_group_heartbeat_response import (
    Endpoint,
    EndpointToPartitions,
    Status,
    StreamsGroupHeartbeatResponse,
    TopicPartition,
)
from ...protocol.messages.streams_group_heartbeat_response import TaskIds as OutTaskIds

API_KEY = 88
VERSIONS = (0, 1)
log = structlog.get_logger("kbroker.streams")


def failed_response(_ctx: RequestContext | None, _request: StreamsGroupHeartbeatRequest | None, error: ErrorCode,
                    message: str | None = None) -> StreamsGroupHeartbeatResponse:
    return StreamsGroupHeartbeatResponse(throttle_time_ms=0, error_code=error, error_message=message, member_id="",
                                         member_epoch=0, heartbeat_interval_ms=0)


def _tasks(items: list[TaskIds] | None) -> TaskSet | None:
    return None if items is None else tuple((t.subtopology_id, tuple(t.partitions)) for t in items)


def command(ctx: RequestContext, r: StreamsGroupHeartbeatRequest) -> sc.StreamsGroupHeartbeat:
    return sc.StreamsGroupHeartbeat(
        group_id=r.group_id, member_id=r.member_id, member_epoch=r.member_epoch,
        endpoint_information_epoch=r.endpoint_information_epoch, instance_id=r.instance_id, rack_id=r.rack_id,
        rebalance_timeout_ms=r.rebalance_timeout_ms,
        topology=None if r.topology is None else topology_of(r.topology),
        active_tasks=_tasks(r.active_tasks), standby_tasks=_tasks(r.standby_tasks),
        warmup_tasks=_tasks(r.warmup_tasks), process_id=r.process_id,
        user_endpoint=None if r.user_endpoint is None else (r.user_endpoint.host, r.user_endpoint.port),
        client_tags=None if r.client_tags is None else tuple((kv.key, kv.value) for kv in r.client_tags),
        shutdown_application=r.shutdown_application,
        client_id=ctx.client_id or "", client_host=group_wire.client_host(ctx.peer))


def _out(tasks: TaskSet | None) -> list[OutTaskIds] | None:
    return None if tasks is None else [OutTaskIds(subtopology_id=s, partitions=list(ps)) for s, ps in tasks]


def _response(r: sc.StreamsGroupHeartbeatResult) -> StreamsGroupHeartbeatResponse:
    if r.error is not ErrorCode.NONE:
        return failed_response(None, None, r.error, r.error_message)
    return StreamsGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=0, error_message=None, member_id=r.member_id or "",
        member_epoch=r.member_epoch, heartbeat_interval_ms=r.heartbeat_interval_ms,
        acceptable_recovery_lag_legacy=0, acceptable_recovery_lag=r.acceptable_recovery_lag,  # v0's: 0, as Kafka 4.4
        task_offset_interval_ms=r.task_offset_interval_ms,
        status=None if r.statuses is None else [Status(status_code=code, status_detail=detail)
                                                for code, detail in r.statuses],
        active_tasks=_out(r.active_tasks), standby_tasks=_out(r.standby_tasks), warmup_tasks=_out(r.warmup_tasks),
        endpoint_information_epoch=r.endpoint_information_epoch,
        partitions_by_user_endpoint=None if r.partitions_by_endpoint is None else [
            EndpointToPartitions(
                user_endpoint=Endpoint(host=host, port=port),
                active_partitions=[TopicPartition(topic=t, partitions=list(ps)) for t, ps in active],
                standby_partitions=[TopicPartition(topic=t, partitions=list(ps)) for t, ps in standby])
            for (host, port), active, standby in r.partitions_by_endpoint])


def _create_refused(ctx: RequestContext, names: list[str]) -> list[str]:
    """The topics the principal may not create: Kafka asks CREATE on the cluster once, else CREATE on
    each topic (KafkaApis.handleStreamsGroupHeartbeat); with any refused, it creates none of them."""
    security = ctx.broker.security_if_built
    if security is None:
        return []
    from ..security.acl import Operation, ResourceType

    if security.authorize(ctx, Operation.CREATE, ResourceType.CLUSTER, audit_denial=False):
        return []
    return [n for n in names if not security.authorize(ctx, Operation.CREATE, ResourceType.TOPIC, n)]


def _with_status(result: sc.StreamsGroupHeartbeatResult, detail: str) -> sc.StreamsGroupHeartbeatResult:
    """The refusal told in the MISSING_INTERNAL_TOPICS status, as Kafka appends it to that status' detail."""
    statuses = list(result.statuses or ())
    for i, (code, text) in enumerate(statuses):
        if code == sc.MISSING_INTERNAL_TOPICS:
            statuses[i] = (code, f"{text} {detail}" if text else detail)
            break
    else:
        statuses.append((sc.MISSING_INTERNAL_TOPICS, detail))
    return dataclasses.replace(result, statuses=tuple(statuses))


async def _create_internal_topics(ctx: RequestContext, group_id: str, result: sc.StreamsGroupHeartbeatResult
                                  ) -> sc.StreamsGroupHeartbeatResult:
    """Kafka creates a streams group's missing internal topics on the heartbeat that found them, if the
    principal may create them."""
    catalogue = ctx.broker.catalogue
    wanted = [t for t in result.creatable_topics if t.name not in catalogue.topics()]
    refused = _create_refused(ctx, sorted(t.name for t in wanted))
    if refused:
        log.warning("streams_internal_topics_refused", group=group_id, topics=refused,
                    principal=ctx.principal)
        return _with_status(result, f"Unauthorized to CREATE on topics {', '.join(refused)}.")
    for topic in wanted:
        try:
            await catalogue.create_topic_async(topic.name, topic.partitions, dict(topic.configs))
            log.info("streams_internal_topic_created", topic=topic.name, partitions=topic.partitions)
        except Exception as exc:  # noqa: BLE001 - reported, and the next heartbeat reports it missing again
            log.warning("streams_internal_topic_not_created", topic=topic.name, error=str(exc))
    return result


async def handle(ctx: RequestContext, request: StreamsGroupHeartbeatRequest) -> StreamsGroupHeartbeatResponse:
    if not request.group_id:
        # Kafka validates the request before routing it to a group: INVALID_REQUEST, not INVALID_GROUP_ID.
        return failed_response(ctx, request, ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    cmd = command(ctx, request)
    result = await group_wire.answer(ctx, lambda coordinator: coordinator.submit(cmd),
                                     lambda e: sc.StreamsGroupHeartbeatResult(e))
    if result.creatable_topics:
        result = await _create_internal_topics(ctx, request.group_id, result)
    return _response(result)
