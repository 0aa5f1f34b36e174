"""ACL checks of the transaction APIs (issue 13), KIP-848's consumer group APIs (issue 12) and the admin
APIs of issue 15, as KafkaApis does them; registered in broker/security/api_checks.py's CHECKS."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .acl import Operation as Op, ResourceType as RT
from .check_helpers import (
    CLUSTER_DENIED, DENIED_MESSAGE, GROUP_DENIED, TOPIC_DENIED, TXN_DENIED, Call, split,
)
from ..network.error_answers import refuse
from ..network.router import RequestContext, then
from ...protocol.errors import ErrorCode

if TYPE_CHECKING:
    from .service import Security


# --- transactions (issue 13), as KafkaApis checks them ---

def _txn_error_topics(topics, error_for) -> list:
    from ...protocol.messages import add_partitions_to_txn_response as apt

    return [apt.AddPartitionsToTxnTopicResult(name=t.name, results_by_partition=[
        apt.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=error_for(t.name))
        for p in t.partitions]) for t in topics]


async def check_add_partitions_to_txn(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    from ...protocol.messages.add_partitions_to_txn_response import AddPartitionsToTxnResponse

    if ctx.api_version >= 4:  # the broker-to-broker batch: ClusterAction
        if not sec.authorize(ctx, Op.CLUSTER_ACTION, RT.CLUSTER):
            return AddPartitionsToTxnResponse(error_code=CLUSTER_DENIED)
        return await call(request)
    topics = request.v3_and_below_topics
    if not sec.authorize(ctx, Op.WRITE, RT.TRANSACTIONAL_ID, request.v3_and_below_transactional_id):
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_txn_error_topics(topics, lambda _: TXN_DENIED))
    denied = {t.name for t in topics if not sec.authorize(ctx, Op.WRITE, RT.TOPIC, t.name)}
    if denied:  # nothing is added when any topic is refused; the others are OPERATION_NOT_ATTEMPTED
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_txn_error_topics(
            topics, lambda name: TOPIC_DENIED if name in denied else ErrorCode.OPERATION_NOT_ATTEMPTED))
    return await call(request)


async def check_add_offsets_to_txn(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    from ...protocol.messages.add_offsets_to_txn_response import AddOffsetsToTxnResponse

    if not sec.authorize(ctx, Op.WRITE, RT.TRANSACTIONAL_ID, request.transactional_id):
        return AddOffsetsToTxnResponse(error_code=TXN_DENIED)
    if not sec.authorize(ctx, Op.READ, RT.GROUP, request.group_id):
        return AddOffsetsToTxnResponse(error_code=GROUP_DENIED)
    return await call(request)


async def check_end_txn(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    from ...protocol.messages.end_txn_response import EndTxnResponse

    if not sec.authorize(ctx, Op.WRITE, RT.TRANSACTIONAL_ID, request.transactional_id):
        return EndTxnResponse(error_code=TXN_DENIED)
    return await call(request)


async def check_txn_offset_commit(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    from ...protocol.messages import txn_offset_commit_response as toc

    def all_partitions(error):
        return toc.TxnOffsetCommitResponse(topics=[toc.TxnOffsetCommitResponseTopic(
            name=t.name, topic_id=t.topic_id, partitions=[
            toc.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=error)
            for p in t.partitions]) for t in request.topics])

    if ctx.api_version >= 6:  # topics by id: named first, as KafkaApis does, so topic ACLs apply by name;
        names = ctx.broker.catalogue.names_by_id()  # an unknown id stays nameless: UNKNOWN_TOPIC_ID (handler)
        for t in request.topics:
            t.name = names.get(t.topic_id, "")
    if not sec.authorize(ctx, Op.WRITE, RT.TRANSACTIONAL_ID, request.transactional_id):
        return all_partitions(TXN_DENIED)
    if not sec.authorize(ctx, Op.READ, RT.GROUP, request.group_id):
        return all_partitions(GROUP_DENIED)
    return await split(
        ctx, request, call, sec, items="topics", answer_list="topics",
        allowed=lambda t: (ctx.api_version >= 6 and not t.name) or sec.authorize(ctx, Op.READ, RT.TOPIC, t.name),
        denied_entry=lambda t: toc.TxnOffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=[
            toc.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=TOPIC_DENIED)
            for p in t.partitions]))


async def check_describe_transactions(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    from ...protocol.messages.describe_transactions_response import TransactionState

    result = await split(
        ctx, request, call, sec, items="transactional_ids", answer_list="transaction_states",
        allowed=lambda tid: sec.authorize(ctx, Op.DESCRIBE, RT.TRANSACTIONAL_ID, tid),
        denied_entry=lambda tid: TransactionState(error_code=TXN_DENIED, transactional_id=tid))

    def topics_visible(body):  # a transaction's partitions only of topics the principal may Describe
        for state in body.transaction_states:
            state.topics = [t for t in state.topics
                            if sec.authorize(ctx, Op.DESCRIBE, RT.TOPIC, t.topic, audit_denial=False)]
        return body
    return then(result, topics_visible)


async def check_list_transactions(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    result = await call(request)

    def visible(body):
        body.transaction_states = [s for s in body.transaction_states if sec.authorize(
            ctx, Op.DESCRIBE, RT.TRANSACTIONAL_ID, s.transactional_id, audit_denial=False)]
        return body
    return then(result, visible)


async def check_describe_producers(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    from ...protocol.messages import describe_producers_response as dp

    return await split(
        ctx, request, call, sec, items="topics", answer_list="topics",
        allowed=lambda t: sec.authorize(ctx, Op.READ, RT.TOPIC, t.name),
        denied_entry=lambda t: dp.TopicResponse(name=t.name, partitions=[
            dp.PartitionResponse(partition_index=p, error_code=TOPIC_DENIED) for p in t.partition_indexes]))


# --- KIP-848 consumer groups (issue 12) ---

async def check_consumer_group_heartbeat(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    def refused(error: ErrorCode) -> Any:
        return refuse(ctx, request, error, DENIED_MESSAGE[error])

    if not sec.authorize(ctx, Op.READ, RT.GROUP, request.group_id):
        return refused(GROUP_DENIED)
    # a member may subscribe only to topics it may Describe (KafkaApis checks the names; a regex
    # subscription is resolved against what exists)
    if request.subscribed_topic_names and not all(
            sec.authorize(ctx, Op.DESCRIBE, RT.TOPIC, name) for name in request.subscribed_topic_names):
        return refused(TOPIC_DENIED)
    return await call(request)


async def check_consumer_group_describe(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    from ...protocol.messages.consumer_group_describe_response import DescribedGroup

    result = await split(
        ctx, request, call, sec, items="group_ids", answer_list="groups",
        allowed=lambda g: sec.authorize(ctx, Op.DESCRIBE, RT.GROUP, g),
        denied_entry=lambda g: DescribedGroup(error_code=GROUP_DENIED, error_message=DENIED_MESSAGE[GROUP_DENIED],
                                              group_id=g))

    def hide_topics(body):
        """As KafkaApis does: a group whose members' assignments (current or target) name a topic the
        caller may not describe is answered TOPIC_AUTHORIZATION_FAILED, with no members."""
        names = {tp.topic_name for g in body.groups for m in g.members for a in (m.assignment, m.target_assignment)
                 if a is not None for tp in a.topic_partitions}
        hidden = {n for n in names if not sec.authorize(ctx, Op.DESCRIBE, RT.TOPIC, n, audit_denial=False)}
        if hidden:
            body.groups = [DescribedGroup(group_id=g.group_id, error_code=TOPIC_DENIED, error_message=(
                "The group has described topic(s) that the client is not authorized to describe."))
                if any(tp.topic_name in hidden for m in g.members for a in (m.assignment, m.target_assignment)
                       if a is not None for tp in a.topic_partitions) else g for g in body.groups]
        return body
    return then(result, hide_topics)


async def check_streams_group_heartbeat(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    """KIP-1071: Read on the group; the topology's source topics must be ones the member may Describe."""
    def refused(error: ErrorCode) -> Any:
        return refuse(ctx, request, error, DENIED_MESSAGE[error])

    if not sec.authorize(ctx, Op.READ, RT.GROUP, request.group_id):
        return refused(GROUP_DENIED)
    sources = [t for s in (request.topology.subtopologies if request.topology is not None else ())
               for t in s.source_topics]
    if sources and not all(sec.authorize(ctx, Op.DESCRIBE, RT.TOPIC, name) for name in sources):
        return refused(TOPIC_DENIED)
    return await call(request)


async def check_streams_group_topology_description_update(ctx: RequestContext, request: Any, call: Call,
                                                          sec: Security) -> Any:
    """KIP-1331: Read on the group, as an offset commit (a push does not modify the group)."""
    if not sec.authorize(ctx, Op.READ, RT.GROUP, request.group_id):
        return refuse(ctx, request, GROUP_DENIED, DENIED_MESSAGE[GROUP_DENIED])
    return await call(request)


async def check_streams_group_describe(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    """KIP-1071: each group answered GROUP_AUTHORIZATION_FAILED unless the caller may Describe it."""
    from ...protocol.messages.streams_group_describe_response import DescribedGroup

    return await split(
        ctx, request, call, sec, items="group_ids", answer_list="groups",
        allowed=lambda g: sec.authorize(ctx, Op.DESCRIBE, RT.GROUP, g),
        denied_entry=lambda g: DescribedGroup(error_code=GROUP_DENIED, error_message=DENIED_MESSAGE[GROUP_DENIED],
                                              group_id=g))


# --- admin APIs (issue 15) ---

def cluster_check(operation: Op):
    """The whole request needs `operation` on the cluster; refused, it gets the API's own error answer
    with CLUSTER_AUTHORIZATION_FAILED (as KafkaApis answers ElectLeaders, the quota and reassignment APIs)."""
    async def check(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
        if sec.authorize(ctx, operation, RT.CLUSTER):
            return await call(request)
        return refuse(ctx, request, CLUSTER_DENIED)
    return check


async def check_write_txn_markers(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    """KafkaApis: Alter on the cluster (asked without an audit of its refusal), else ClusterAction;
    refused, every partition gets CLUSTER_AUTHORIZATION_FAILED."""
    if (sec.authorize(ctx, Op.ALTER, RT.CLUSTER, audit_denial=False)
            or sec.authorize(ctx, Op.CLUSTER_ACTION, RT.CLUSTER)):
        return await call(request)
    return refuse(ctx, request, CLUSTER_DENIED)


async def check_delete_records(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    from ...protocol.messages import delete_records_response as dr

    return await split(
        ctx, request, call, sec, items="topics", answer_list="topics",
        allowed=lambda t: sec.authorize(ctx, Op.DELETE, RT.TOPIC, t.name),
        denied_entry=lambda t: dr.DeleteRecordsTopicResult(name=t.name, partitions=[
            dr.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1,
                                            error_code=TOPIC_DENIED) for p in t.partitions]))


async def check_offset_for_leader_epoch(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    from ...protocol.messages import offset_for_leader_epoch_response as ofl

    def denied(t):
        return ofl.OffsetForLeaderTopicResult(topic=t.topic, partitions=[
            ofl.EpochEndOffset(error_code=TOPIC_DENIED, partition=p.partition) for p in t.partitions])

    if request.replica_id >= 0:  # a follower: ClusterAction
        if not sec.authorize(ctx, Op.CLUSTER_ACTION, RT.CLUSTER):
            return ofl.OffsetForLeaderEpochResponse(topics=[denied(t) for t in request.topics])
        return await call(request)
    return await split(ctx, request, call, sec, items="topics", answer_list="topics",
                        allowed=lambda t: sec.authorize(ctx, Op.DESCRIBE, RT.TOPIC, t.topic), denied_entry=denied)


async def check_describe_log_dirs(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    from ...protocol.messages.describe_log_dirs_response import DescribeLogDirsResponse

    if not sec.authorize(ctx, Op.DESCRIBE, RT.CLUSTER):  # v3+ says so; older versions just see nothing
        return DescribeLogDirsResponse(error_code=CLUSTER_DENIED, results=[])
    return await call(request)


async def check_describe_topic_partitions(ctx: RequestContext, request: Any, call: Call, sec: Security) -> Any:
    from ...protocol.messages import describe_topic_partitions_response as dtp

    if not request.topics:  # every topic: only those the principal may Describe
        result = await call(request)

        def visible(body):
            body.topics = [t for t in body.topics if t.name is None
                           or sec.authorize(ctx, Op.DESCRIBE, RT.TOPIC, t.name, audit_denial=False)]
            return body
        return then(result, visible)
    return await split(
        ctx, request, call, sec, items="topics", answer_list="topics",
        allowed=lambda t: sec.authorize(ctx, Op.DESCRIBE, RT.TOPIC, t.name),
        denied_entry=lambda t: dtp.DescribeTopicPartitionsResponseTopic(error_code=TOPIC_DENIED, name=t.name),
        when_none_left=lambda: dtp.DescribeTopicPartitionsResponse(topics=[], next_cursor=None))
