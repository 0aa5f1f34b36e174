"""ElectLeaders (43) v0-v2, as a one-broker Kafka answers it.

Every partition is led by its only (and preferred) replica, so no election is ever needed: each
partition named gets ELECTION_NOT_NEEDED, or UNKNOWN_TOPIC_OR_PARTITION when it does not exist.
Asked for every partition (a null list), Kafka's controller reports only the partitions it elected
or failed to elect, which here is none.
"""

from __future__ import annotations

from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.elect_leaders_request import ElectLeadersRequest
from ...protocol.messages.elect_leaders_response import (
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)

API_KEY = 43
VERSIONS = (0, 2)


def failed_response(_ctx: RequestContext, request: ElectLeadersRequest, error: int) -> ElectLeadersResponse:
    return ElectLeadersResponse(error_code=error, replica_election_results=[
        ReplicaElectionResult(t.topic, [PartitionResult(p, error, None) for p in t.partitions])
        for t in request.topic_partitions or ()])


async def handle(ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    results = []
    for tp in request.topic_partitions or []:
        parts = []
        for p in tp.partitions:
            if not ctx.broker.catalogue.has_partition(tp.topic, p):
                parts.append(PartitionResult(p, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                             "The partition does not exist."))
            else:
                parts.append(PartitionResult(p, ErrorCode.ELECTION_NOT_NEEDED,
                                             "Leader election not needed for topic partition."))
        results.append(ReplicaElectionResult(topic=tp.topic, partition_result=parts))
    return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, replica_election_results=results)
