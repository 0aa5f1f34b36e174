"""The authorization each API gets, as Kafka's KafkaApis does it, wrapped around the API handlers.

`install(router)` wraps the routes of the APIs below; with no authorizer configured a wrapped call
goes straight to the handler. A check either refuses the whole request (the handler's usual answer
with Kafka's error code: GROUP_AUTHORIZATION_FAILED for JoinGroup, CLUSTER_AUTHORIZATION_FAILED for
DescribeCluster, ...), or removes the resources the principal may not touch from the request, lets
the handler serve the rest and adds one error entry per removed resource (TOPIC_AUTHORIZATION_FAILED
for Produce, Fetch, ...), or filters what the answer shows (Metadata and ListGroups list only what the
principal may Describe). Keeping this table here leaves the handlers free of security code; the
checks of the transaction, KIP-848 and admin APIs live in txn_group_admin_checks.py, what all share in
check_helpers.py.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import TYPE_CHECKING, Any, Callable

from ..network.error_answers import refuse
from ..network.router import RequestContext, Route, Router, then
from . import txn_group_admin_checks as more
from . import share_checks
from .acl import Operation as Op, ResourceType as RT
from .authorized_operations import with_operations
from .check_helpers import (
    CLUSTER_DENIED, DENIED_MESSAGE, GROUP_DENIED, TOPIC_DENIED, TXN_DENIED, Call, LazyModule, split,
    topic_names_by_id,
)

if TYPE_CHECKING:
    from .service import Security

# The responses the checks build their refusals from, each module imported with its first use (with
# an authorizer configured): a broker without one never loads them (a megabyte of idle memory).
alter_cfg = LazyModule("alter_configs_response")
create_parts = LazyModule("create_partitions_response")
create_topics = LazyModule("create_topics_response")
delete_groups = LazyModule("delete_groups_response")
delete_topics = LazyModule("delete_topics_response")
describe_cfg = LazyModule("describe_configs_response")
describe_groups = LazyModule("describe_groups_response")
fetch = LazyModule("fetch_response")
find_coord = LazyModule("find_coordinator_response")
inc_alter_cfg = LazyModule("incremental_alter_configs_response")
list_offsets = LazyModule("list_offsets_response")
metadata = LazyModule("metadata_response")
offset_commit = LazyModule("offset_commit_response")
offset_delete = LazyModule("offset_delete_response")
offset_fetch = LazyModule("offset_fetch_response")
produce = LazyModule("produce_response")
describe_cluster = LazyModule("describe_cluster_response")
init_producer_id = LazyModule("init_producer_id_response")

CONFIG_TOPIC, CONFIG_BROKER = 2, 4  # ConfigResource types


# APIs that check in their own handler (the ACL and SCRAM APIs) or that Kafka never checks
# Describe/Create/DeleteAcls, Describe/AlterUserScramCredentials, the delegation token APIs
CHECKED_IN_HANDLER = frozenset({29, 30, 31, 38, 39, 40, 41, 50, 51})
NO_CHECK_IN_KAFKA = frozenset({17, 18, 36, 71, 72})  # SaslHandshake, ApiVersions, SaslAuthenticate, KIP-714


def install(router: Router) -> None:
    """Wrap every route, loaded now or later: its Kafka check from CHECKS, or, for an API served
    here whose check is not written yet, fail closed (only super users pass while an authorizer is
    configured)."""
    router.wrap_routes(checked)


def checked(route: Route) -> Route:
    """`route` with its check (CHECKS, or fail closed), unless the API checks in its handler or Kafka
    has no check for it."""
    api_key = route.api_key
    if api_key in CHECKED_IN_HANDLER or api_key in NO_CHECK_IN_KAFKA:
        return route
    check = CHECKS.get(api_key) or _fail_closed(route)
    # KIP-430's operations are filled into whatever the guarded handler answers, as without an authorizer
    return with_operations(dataclasses.replace(route, handler=_guarded(route.handler, check)))


def _fail_closed(route: Route) -> Callable:
    async def check(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
        if sec.is_super_user(ctx):
            return await call(request)
        sec.authorize(ctx, Op.ALL, RT.CLUSTER)  # not allowed here: the audit event says who and which api
        answer = route.failed_response(ctx, request, CLUSTER_DENIED)
        if answer is None:
            from ..network.server import CloseConnection

            raise CloseConnection(f"api {ctx.api_key} is open to super users only while its ACL check is missing")
        return answer
    return check


def _guarded(handler: Callable, check: Callable) -> Callable:
    if not inspect.iscoroutinefunction(handler):
        return _guarded_plain(handler, check)

    @functools.wraps(handler)  # keeps the API's module and name (the metrics label requests by them)
    async def guarded(ctx: RequestContext, request: Any) -> Any:
        security = ctx.broker.security_if_built
        if security is None or security.authorizer is None:
            return await handler(ctx, request)
        return await check(ctx, request, lambda req: handler(ctx, req), security)
    return guarded


def _guarded_plain(handler: Callable, check: Callable) -> Callable:
    """A plain handler stays plain (the server runs it inline) unless an authorizer is configured:
    then the (async) check runs, and the server runs the wrapper's coroutine as a task."""
    async def checked(ctx: RequestContext, request: Any, security: Security) -> Any:
        async def call(req: Any) -> Any:
            return handler(ctx, req)

        return await check(ctx, request, call, security)

    @functools.wraps(handler)
    def guarded(ctx: RequestContext, request: Any) -> Any:
        security = ctx.broker.security_if_built  # None: no authorizer (see Broker.security)
        if security is not None and security.authorizer is not None:
            return checked(ctx, request, security)
        return handler(ctx, request)
    return guarded


async def check_produce(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    if request.transactional_id is not None and not sec.authorize(ctx, Op.WRITE, RT.TRANSACTIONAL_ID,
                                                                   request.transactional_id):
        if request.acks == 0:
            return None
        return produce.ProduceResponse(responses=[
            produce.TopicProduceResponse(name=t.name, topic_id=t.topic_id, partition_responses=[
                produce.PartitionProduceResponse(index=p.index, error_code=TXN_DENIED) for p in t.partition_data])
            for t in request.topic_data])
    names = topic_names_by_id(ctx) if any(not t.name for t in request.topic_data) else {}
    errors: dict[int, int] = {}

    def allowed(t) -> bool:
        name = t.name or names.get(t.topic_id, "")
        if not sec.authorize(ctx, Op.WRITE, RT.TOPIC, name):
            errors[id(t)] = TOPIC_DENIED
        return id(t) not in errors

    return await split(
        ctx, request, call, sec, items="topic_data", answer_list="responses", allowed=allowed,
        denied_entry=lambda t: produce.TopicProduceResponse(name=t.name, topic_id=t.topic_id, partition_responses=[
            produce.PartitionProduceResponse(index=p.index, error_code=errors[id(t)]) for p in t.partition_data]))


def _fetch_error(partition: int) -> Any:
    return fetch.PartitionData(partition_index=partition, error_code=TOPIC_DENIED, high_watermark=-1,
                               last_stable_offset=-1, log_start_offset=-1, records=None)


async def check_fetch(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    if request.replica_id >= 0 or request.replica_state.replica_id >= 0:  # a follower: ClusterAction
        if not sec.authorize(ctx, Op.CLUSTER_ACTION, RT.CLUSTER):
            return fetch.FetchResponse(error_code=0, session_id=0, responses=[
                fetch.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id,
                                             partitions=[_fetch_error(p.partition) for p in t.partitions])
                for t in request.topics])
        return await call(request)
    names = topic_names_by_id(ctx) if ctx.api_version >= 13 else {}
    refused_any = []

    def allowed(t) -> bool:
        name = names.get(t.topic_id) if ctx.api_version >= 13 else t.topic
        ok = name is None or sec.authorize(ctx, Op.READ, RT.TOPIC, name)  # unknown ids: the handler's answer
        if not ok:
            refused_any.append(t)
        return ok

    kept = [t for t in request.topics if allowed(t)]
    if not refused_any:
        return await call(request)
    # Kafka answers at once when nothing authorized is left to wait for
    changes = {"topics": kept, **({"max_wait_ms": 0} if not kept else {})}
    result = await call(dataclasses.replace(request, **changes))

    def merge(body):
        body.responses.extend(fetch.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id,
                                                           partitions=[_fetch_error(p.partition) for p in t.partitions])
                              for t in refused_any)
        return body
    return then(result, merge)


async def check_list_offsets(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    return await split(
        ctx, request, call, sec, items="topics", answer_list="topics",
        allowed=lambda t: sec.authorize(ctx, Op.DESCRIBE, RT.TOPIC, t.name),
        denied_entry=lambda t: list_offsets.ListOffsetsTopicResponse(name=t.name, partitions=[
            list_offsets.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=TOPIC_DENIED)
            for p in t.partitions]))


async def check_metadata(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    topics = ctx.broker.catalogue.topics()
    all_topics = request.topics is None or (ctx.api_version == 0 and not request.topics)
    if all_topics:
        result = await call(request)

        def visible(body):
            body.topics = [t for t in body.topics
                           if t.name is None or sec.authorize(ctx, Op.DESCRIBE, RT.TOPIC, t.name, audit_denial=False)]
            return body
        return then(result, visible)
    auto = (request.allow_auto_topic_creation if ctx.api_version >= 4 else True) \
        and ctx.broker.config.auto_create_topics_enable
    may_create_any = None

    def allowed(t) -> bool:
        nonlocal may_create_any
        if t.name is None:
            return True  # by topic id: the handler answers
        if not sec.authorize(ctx, Op.DESCRIBE, RT.TOPIC, t.name):
            return False
        if t.name not in topics and auto:  # auto-creation needs Create on the cluster or the topic
            if may_create_any is None:
                may_create_any = sec.authorize(ctx, Op.CREATE, RT.CLUSTER, audit_denial=False)
            return may_create_any or sec.authorize(ctx, Op.CREATE, RT.TOPIC, t.name)
        return True

    async def brokers_only():  # v0 reads an empty list as "all topics": ask for all, show none
        body = await call(dataclasses.replace(request, topics=None))
        body.topics = []
        return body

    decided = {id(t): allowed(t) for t in request.topics}  # once each: one audit event per denial
    no_topics_left = None
    if ctx.api_version == 0 and not any(decided.values()):
        no_topics_left = await brokers_only()
    result = await split(ctx, request, call, sec, items="topics", answer_list="topics",
                          allowed=lambda t: decided[id(t)],
                          denied_entry=lambda t: metadata.MetadataResponseTopic(error_code=TOPIC_DENIED, name=t.name),
                          when_none_left=(lambda: no_topics_left) if no_topics_left is not None else None)
    if not any(t.name is None for t in request.topics):
        return result

    def by_id(body):  # topics asked for by id: only those the principal may Describe are shown
        for i, t in enumerate(body.topics):
            if t.error_code == 0 and t.name and not sec.authorize(ctx, Op.DESCRIBE, RT.TOPIC, t.name):
                body.topics[i] = metadata.MetadataResponseTopic(error_code=TOPIC_DENIED, name=None,
                                                                topic_id=t.topic_id)
        return body
    return then(result, by_id)


def _group_check(operation: Op):
    """The whole request needs `operation` on its group; refused, it gets the API's own error answer."""
    async def check(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
        if not sec.authorize(ctx, operation, RT.GROUP, request.group_id):
            return refuse(ctx, request, GROUP_DENIED)
        return await call(request)
    return check


check_join_group = _group_check(Op.READ)
check_sync_group = _group_check(Op.READ)
check_heartbeat = _group_check(Op.READ)
check_leave_group = _group_check(Op.READ)


async def check_offset_commit(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    if not sec.authorize(ctx, Op.READ, RT.GROUP, request.group_id):
        return offset_commit.OffsetCommitResponse(topics=[
            offset_commit.OffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=[
                offset_commit.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=GROUP_DENIED)
                for p in t.partitions]) for t in request.topics])
    return await split(
        ctx, request, call, sec, items="topics", answer_list="topics",
        allowed=lambda t: sec.authorize(ctx, Op.READ, RT.TOPIC, t.name),
        denied_entry=lambda t: offset_commit.OffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=[
            offset_commit.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=TOPIC_DENIED)
            for p in t.partitions]))


async def check_offset_fetch(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    if ctx.api_version >= 8:
        # Each group id decided once; kept and refused split in one pass (not `g not in refused`,
        # which is quadratic in a request naming many groups).
        may: dict[str, bool] = {}
        for g in request.groups:
            if g.group_id not in may:
                may[g.group_id] = sec.authorize(ctx, Op.DESCRIBE, RT.GROUP, g.group_id)
        refused = [g for g in request.groups if not may[g.group_id]]
        kept = [g for g in request.groups if may[g.group_id]]
        result = await call(dataclasses.replace(request, groups=kept)) if kept else offset_fetch.OffsetFetchResponse()

        def merge(body):
            for group in body.groups:
                group.topics = [t for t in group.topics
                                if sec.authorize(ctx, Op.DESCRIBE, RT.TOPIC, t.name, audit_denial=False)]
            body.groups.extend(offset_fetch.OffsetFetchResponseGroup(group_id=g.group_id, error_code=GROUP_DENIED)
                               for g in refused)
            return body
        return then(result, merge)
    if not sec.authorize(ctx, Op.DESCRIBE, RT.GROUP, request.group_id):
        return offset_fetch.OffsetFetchResponse(error_code=GROUP_DENIED, topics=[])
    result = await call(request)

    def strip(body):
        explicit = request.topics is not None
        for t in body.topics:
            if not sec.authorize(ctx, Op.DESCRIBE, RT.TOPIC, t.name, audit_denial=explicit):
                for p in t.partitions:
                    p.committed_offset, p.metadata, p.error_code = -1, "", TOPIC_DENIED
        if not explicit:  # "all topics": only those the principal may see
            body.topics = [t for t in body.topics if not t.partitions or t.partitions[0].error_code != TOPIC_DENIED]
        return body
    return then(result, strip)


async def check_offset_delete(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    if not sec.authorize(ctx, Op.DELETE, RT.GROUP, request.group_id):
        return refuse(ctx, request, GROUP_DENIED)
    return await split(
        ctx, request, call, sec, items="topics", answer_list="topics",
        allowed=lambda t: sec.authorize(ctx, Op.READ, RT.TOPIC, t.name),
        denied_entry=lambda t: offset_delete.OffsetDeleteResponseTopic(name=t.name, partitions=[
            offset_delete.OffsetDeleteResponsePartition(partition_index=p.partition_index, error_code=TOPIC_DENIED)
            for p in t.partitions]))




async def check_find_coordinator(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    resource = RT.GROUP if request.key_type == 0 else RT.TRANSACTIONAL_ID
    error = GROUP_DENIED if request.key_type == 0 else TXN_DENIED
    if ctx.api_version < 4:
        if not sec.authorize(ctx, Op.DESCRIBE, resource, request.key):
            return find_coord.FindCoordinatorResponse(error_code=error, error_message=DENIED_MESSAGE[error],
                                                      node_id=-1, host="", port=-1)
        return await call(request)
    return await split(
        ctx, request, call, sec, items="coordinator_keys", answer_list="coordinators",
        allowed=lambda key: sec.authorize(ctx, Op.DESCRIBE, resource, key),
        denied_entry=lambda key: find_coord.Coordinator(key=key, node_id=-1, host="", port=-1, error_code=error,
                                                        error_message=DENIED_MESSAGE[error]))


async def check_describe_groups(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    return await split(
        ctx, request, call, sec, items="groups", answer_list="groups",
        allowed=lambda g: sec.authorize(ctx, Op.DESCRIBE, RT.GROUP, g),
        denied_entry=lambda g: describe_groups.DescribedGroup(error_code=GROUP_DENIED, group_id=g))


async def check_list_groups(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    result = await call(request)
    if sec.authorize(ctx, Op.DESCRIBE, RT.CLUSTER, audit_denial=False):
        return result

    def visible(body):
        body.groups = [g for g in body.groups
                       if sec.authorize(ctx, Op.DESCRIBE, RT.GROUP, g.group_id, audit_denial=False)]
        return body
    return then(result, visible)


async def check_delete_groups(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    return await split(
        ctx, request, call, sec, items="groups_names", answer_list="results",
        allowed=lambda g: sec.authorize(ctx, Op.DELETE, RT.GROUP, g),
        denied_entry=lambda g: delete_groups.DeletableGroupResult(group_id=g, error_code=GROUP_DENIED))


async def check_init_producer_id(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    if request.transactional_id is not None:
        ok, error = sec.authorize(ctx, Op.WRITE, RT.TRANSACTIONAL_ID, request.transactional_id), TXN_DENIED
    else:  # KIP-679: IdempotentWrite on the cluster, or Write on some topic
        ok = sec.authorize(ctx, Op.IDEMPOTENT_WRITE, RT.CLUSTER, audit_denial=False) \
            or sec.authorize_any(ctx, Op.WRITE, RT.TOPIC)
        error = CLUSTER_DENIED
        if not ok:
            sec.authorize(ctx, Op.IDEMPOTENT_WRITE, RT.CLUSTER)  # the audit event
    if not ok:
        return init_producer_id.InitProducerIdResponse(error_code=error, producer_id=-1, producer_epoch=-1)
    return await call(request)


async def check_create_topics(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    cluster_ok = sec.authorize(ctx, Op.CREATE, RT.CLUSTER, audit_denial=False)
    return await split(
        ctx, request, call, sec, items="topics", answer_list="topics",
        allowed=lambda t: cluster_ok or sec.authorize(ctx, Op.CREATE, RT.TOPIC, t.name),
        denied_entry=lambda t: create_topics.CreatableTopicResult(
            name=t.name, error_code=TOPIC_DENIED, error_message="Authorization failed.",
            topic_config_error_code=TOPIC_DENIED, num_partitions=-1, replication_factor=-1, configs=None))


async def check_delete_topics(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    if ctx.api_version < 6:
        return await split(
            ctx, request, call, sec, items="topic_names", answer_list="responses",
            allowed=lambda n: sec.authorize(ctx, Op.DELETE, RT.TOPIC, n),
            denied_entry=lambda n: delete_topics.DeletableTopicResult(name=n, error_code=TOPIC_DENIED))
    names = topic_names_by_id(ctx)
    return await split(
        ctx, request, call, sec, items="topics", answer_list="responses",
        allowed=lambda t: (t.name is None and t.topic_id not in names)
        or sec.authorize(ctx, Op.DELETE, RT.TOPIC, t.name or names.get(t.topic_id, "")),
        denied_entry=lambda t: delete_topics.DeletableTopicResult(name=t.name, topic_id=t.topic_id,
                                                                  error_code=TOPIC_DENIED))


async def check_create_partitions(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    return await split(
        ctx, request, call, sec, items="topics", answer_list="results",
        allowed=lambda t: sec.authorize(ctx, Op.ALTER, RT.TOPIC, t.name),
        denied_entry=lambda t: create_parts.CreatePartitionsTopicResult(name=t.name, error_code=TOPIC_DENIED))


def _config_allowed(ctx: RequestContext, sec: Security, op: Op, resource: Any) -> bool:
    if resource.resource_type == CONFIG_TOPIC:
        return sec.authorize(ctx, op, RT.TOPIC, resource.resource_name)
    if resource.resource_type == CONFIG_BROKER:
        return sec.authorize(ctx, op, RT.CLUSTER)
    return True  # other resource types: the handler's own answer


def _config_error(resource) -> int:
    return TOPIC_DENIED if resource.resource_type == CONFIG_TOPIC else CLUSTER_DENIED


async def check_describe_configs(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    return await split(
        ctx, request, call, sec, items="resources", answer_list="results",
        allowed=lambda r: _config_allowed(ctx, sec, Op.DESCRIBE_CONFIGS, r),
        denied_entry=lambda r: describe_cfg.DescribeConfigsResult(
            error_code=_config_error(r), error_message=None, resource_type=r.resource_type,
            resource_name=r.resource_name, configs=[]))


def _alter_configs(module, response_cls_name):
    async def check(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
        return await split(
            ctx, request, call, sec, items="resources", answer_list="responses",
            allowed=lambda r: _config_allowed(ctx, sec, Op.ALTER_CONFIGS, r),
            denied_entry=lambda r: getattr(module, response_cls_name)(
                error_code=_config_error(r), error_message=None, resource_type=r.resource_type,
                resource_name=r.resource_name))
    return check


async def check_describe_cluster(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    if not sec.authorize(ctx, Op.DESCRIBE, RT.CLUSTER):
        return describe_cluster.DescribeClusterResponse(error_code=CLUSTER_DENIED, error_message="Cluster authorization failed.",
                                       cluster_id=ctx.broker.cluster_id)
    return await call(request)


CHECKS: dict[int, Callable] = {
    0: check_produce, 1: check_fetch, 2: check_list_offsets, 3: check_metadata,
    8: check_offset_commit, 9: check_offset_fetch, 10: check_find_coordinator,
    11: check_join_group, 12: check_heartbeat, 13: check_leave_group, 14: check_sync_group,
    15: check_describe_groups, 16: check_list_groups, 19: check_create_topics, 20: check_delete_topics,
    22: check_init_producer_id, 32: check_describe_configs,
    33: _alter_configs(alter_cfg, "AlterConfigsResourceResponse"), 37: check_create_partitions,
    42: check_delete_groups, 44: _alter_configs(inc_alter_cfg, "AlterConfigsResourceResponse"),
    47: check_offset_delete, 60: check_describe_cluster,
    # transactions, KIP-848 and the admin APIs: broker/security/txn_group_admin_checks.py
    24: more.check_add_partitions_to_txn, 25: more.check_add_offsets_to_txn, 26: more.check_end_txn,
    27: more.check_write_txn_markers, 28: more.check_txn_offset_commit, 61: more.check_describe_producers,
    65: more.check_describe_transactions,
    66: more.check_list_transactions, 68: more.check_consumer_group_heartbeat, 69: more.check_consumer_group_describe,
    88: more.check_streams_group_heartbeat, 89: more.check_streams_group_describe,
    93: more.check_streams_group_topology_description_update,
    21: more.check_delete_records, 23: more.check_offset_for_leader_epoch, 35: more.check_describe_log_dirs,
    34: more.cluster_check(Op.ALTER), 64: more.cluster_check(Op.ALTER), 74: more.cluster_check(Op.DESCRIBE_CONFIGS),
    43: more.cluster_check(Op.ALTER), 45: more.cluster_check(Op.ALTER), 46: more.cluster_check(Op.DESCRIBE),
    48: more.cluster_check(Op.DESCRIBE_CONFIGS), 49: more.cluster_check(Op.ALTER_CONFIGS),
    55: more.cluster_check(Op.DESCRIBE), 57: more.cluster_check(Op.ALTER),
    75: more.check_describe_topic_partitions,
    # the share coordinator's state RPCs (KafkaApis: authorizeClusterOperation(CLUSTER_ACTION))
    **{api_key: more.cluster_check(Op.CLUSTER_ACTION) for api_key in (83, 84, 85, 86, 87)},
    **share_checks.CHECKS,  # share groups (issue 42): broker/security/share_checks.py
}
