"""DescribeCluster (60), v0-v2 (no broker is ever fenced): this node is the whole cluster and its controller."""

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
    host, port = broker.advertised(ctx.listener)
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        endpoint_type=ENDPOINT_BROKERS,
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        brokers=[DescribeClusterBroker(broker_id=broker.node_id, host=host, port=port, rack=None)],
    )
