"""AlterPartitionReassignments (45) v0-v1, as a one-broker Kafka's controller answers it.

The only valid target is this node alone, which is already every partition's replica set, so such
a reassignment completes at once (NONE); any other broker id, a duplicate or an empty list is
INVALID_REPLICA_ASSIGNMENT; a null list asks to cancel, and nothing is ever in progress
(NO_REASSIGNMENT_IN_PROGRESS). With AllowReplicationFactorChange false (v1), a target of another
size is INVALID_REPLICATION_FACTOR, checked as Kafka does before the broker ids.

With several nodes in this process (`--nodes N`; not over PostgreSQL) the catalogue applies each one as Kafka's controller does
(cluster_catalogue.reassign, with its messages): a target of registered nodes (up or stopped)
replaces the replicas, completing at once where every added node is up (nothing is copied: replicas
are a view over the one log) and when a stopped one starts again otherwise; the leader stays while it
is kept, else the first in-sync replica of the target leads (an epoch bump). A null list cancels one
under way.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from ..network.router import RequestContext
from ..partitions.cluster_catalogue import local_cluster
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.alter_partition_reassignments_request import AlterPartitionReassignmentsRequest
from ...protocol.messages.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)

if TYPE_CHECKING:
    from ..partitions.cluster_catalogue import ClusterCatalogue
    from ..services import BrokerServices

API_KEY = 45
VERSIONS = (0, 1)


def _check(broker: BrokerServices, topic: str, partition: int, replicas: list[int] | None,
           allow_rf_change: bool) -> tuple[ErrorCode, str | None]:
    if not broker.catalogue.has_partition(topic, partition):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
    if replicas is None:
        return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None
    if not allow_rf_change and len(replicas) != 1:
        return (ErrorCode.INVALID_REPLICATION_FACTOR,
                "The replication factor is changed from 1 to %d" % len(replicas))
    if not replicas:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
    if len(set(replicas)) != len(replicas):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes duplicate replicas."
    unknown = [r for r in replicas if r != broker.node_id]
    if unknown:
        return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "The manual partition assignment includes broker %d, but no such broker is registered." % unknown[0])
    return ErrorCode.NONE, None


def _reassign(catalogue: ClusterCatalogue, _broker: BrokerServices, topic: str, partition: int,
              replicas: list[int] | None, allow_rf_change: bool) -> tuple[ErrorCode, str | None]:
    try:
        catalogue.reassign(topic, partition, replicas, allow_rf_change=allow_rf_change)
    except KafkaError as e:
        return e.code, str(e) or None
    return ErrorCode.NONE, None


async def handle(ctx: RequestContext, request: AlterPartitionReassignmentsRequest) -> AlterPartitionReassignmentsResponse:
    allow = request.allow_replication_factor_change if ctx.api_version >= 1 else True
    cluster = local_cluster(ctx.broker.catalogue)
    check = _check if cluster is None else partial(_reassign, cluster)
    responses = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            error, message = check(ctx.broker, topic.name, p.partition_index, p.replicas, allow)
            parts.append(ReassignablePartitionResponse(p.partition_index, error, message))
        responses.append(ReassignableTopicResponse(name=topic.name, partitions=parts))
    return AlterPartitionReassignmentsResponse(throttle_time_ms=0, allow_replication_factor_change=allow,
                                               error_code=ErrorCode.NONE, error_message=None, responses=responses)
