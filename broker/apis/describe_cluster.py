"""DescribeCluster (60), v0-v2: the brokers that are up (this node, or the nodes of `--nodes N`) and
the controller (with several nodes the first one up); a stopped node is not listed (Kafka lists
fenced brokers only from v2 with include_fenced_brokers: kbroker's are gone, not fenced)."""

from __future__ import annotations

from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.describe_cluster_request import DescribeClusterRequest
from ...protocol.messages.describe_cluster_response import DescribeClusterBroker, DescribeClusterResponse

API_KEY = 60
VERSIONS = (0, 2)
ENDPOINT_BROKERS = 1
ENDPOINT_CONTROLLERS = 2


async def handle(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    broker = ctx.broker
    endpoint = request.endpoint_type if ctx.api_version >= 1 else ENDPOINT_BROKERS
    if endpoint != ENDPOINT_BROKERS:
        code = ErrorCode.MISMATCHED_ENDPOINT_TYPE if endpoint == ENDPOINT_CONTROLLERS else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        return DescribeClusterResponse(error_code=code, endpoint_type=ENDPOINT_BROKERS,
                                       error_message="this listener serves broker endpoints only",
                                       cluster_id=broker.cluster_id, controller_id=-1)
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        endpoint_type=ENDPOINT_BROKERS,
        cluster_id=broker.cluster_id,
        controller_id=broker.catalogue.controller,
        brokers=[DescribeClusterBroker(broker_id=node, host=host, port=port, rack=None)
                 for node, host, port in broker.brokers(ctx.listener)],
    )
