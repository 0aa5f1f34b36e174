"""ElectLeaders (43) v0-v2, as Kafka's controller answers it (ReplicationControlManager.electLeaders).

On one node every partition is led by its only (and preferred) replica, so no election is ever needed:
each partition named gets ELECTION_NOT_NEEDED, or UNKNOWN_TOPIC_OR_PARTITION when it does not exist;
asked for every partition (a null list), none is listed.

With several nodes in this process (`--nodes N`; not over PostgreSQL) the catalogue runs each election (cluster_catalogue.run_election):
PREFERRED (type 0, and every v0 request) moves a partition back to its first replica when that one
is in sync; UNCLEAN (type 1) elects a replica that is up for a partition left without a leader. Any
node answers (Kafka's brokers forward the request to the controller). Asked for every partition, the
answer names every topic and, under each, only the partitions elected or failed to elect, as Kafka's.
An unknown election type fails the whole request with INVALID_REQUEST.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..network.router import RequestContext
from ..partitions.cluster_catalogue import local_cluster
from ...protocol.errors import ErrorCode
from ...protocol.messages.elect_leaders_request import ElectLeadersRequest
from ...protocol.messages.elect_leaders_response import (
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)

if TYPE_CHECKING:
    from ..partitions.cluster_catalogue import ClusterCatalogue

API_KEY = 43
VERSIONS = (0, 2)
PREFERRED, UNCLEAN = 0, 1


def failed_response(_ctx: RequestContext, request: ElectLeadersRequest, error: int) -> ElectLeadersResponse:
    return ElectLeadersResponse(error_code=error, replica_election_results=[
        ReplicaElectionResult(t.topic, [PartitionResult(p, error, None) for p in t.partitions])
        for t in request.topic_partitions or ()])


async def handle(ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    catalogue = ctx.broker.catalogue
    cluster = local_cluster(catalogue)
    if cluster is not None:
        election_type = request.election_type if ctx.api_version >= 1 else PREFERRED
        if election_type not in (PREFERRED, UNCLEAN):
            return failed_response(ctx, request, ErrorCode.INVALID_REQUEST)
        return _elect(cluster, request, unclean=election_type == UNCLEAN)
    results = []
    for tp in request.topic_partitions or []:
        parts = []
        for p in tp.partitions:
            if not catalogue.has_partition(tp.topic, p):
                parts.append(PartitionResult(p, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                             "The partition does not exist."))
            else:
                parts.append(PartitionResult(p, ErrorCode.ELECTION_NOT_NEEDED,
                                             "Leader election not needed for topic partition."))
        results.append(ReplicaElectionResult(topic=tp.topic, partition_result=parts))
    return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, replica_election_results=results)


def _elect(catalogue: ClusterCatalogue, request: ElectLeadersRequest, *, unclean: bool) -> ElectLeadersResponse:
    results = []
    if request.topic_partitions is None:  # every partition: only those elected or failed are listed
        for info in list(catalogue.topics().values()):
            parts = []
            for p in range(info.num_partitions):
                error, message = catalogue.run_election(info.name, p, unclean)
                if error != ErrorCode.ELECTION_NOT_NEEDED:
                    parts.append(PartitionResult(p, error, message))
            results.append(ReplicaElectionResult(topic=info.name, partition_result=parts))
    else:
        for tp in request.topic_partitions:
            results.append(ReplicaElectionResult(topic=tp.topic, partition_result=[
                PartitionResult(p, *catalogue.run_election(tp.topic, p, unclean)) for p in tp.partitions]))
    return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, replica_election_results=results)
