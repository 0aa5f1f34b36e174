"""ListConfigResources (74): the config resources of the cluster, by type (Admin.listConfigResources,
kafka-configs.sh --describe --all; v0 was ListClientMetricsResources, kafka-client-metrics.sh --list).

As Kafka 4.4's KafkaApis.handleListConfigResources: v0 lists CLIENT_METRICS resources only; v1 the
types asked for (TOPIC 2, BROKER 4, BROKER_LOGGER 8, CLIENT_METRICS 16, GROUP 32), all of them when
none is named, and a type outside these makes the whole answer UNSUPPORTED_VERSION. GROUP lists the
groups with dynamic group configs and CLIENT_METRICS the client metrics subscriptions (KIP-714's config
resources), of which kbroker keeps none: --client-metrics has one built-in subscription instead.
"""

from __future__ import annotations

from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.list_config_resources_request import ListConfigResourcesRequest
from ...protocol.messages.list_config_resources_response import ConfigResource, ListConfigResourcesResponse

API_KEY = 74
VERSIONS = (0, 1)
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
_SUPPORTED_V1 = frozenset({TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP})


def failed_response(_ctx: RequestContext, _request: ListConfigResourcesRequest, error: int) -> ListConfigResourcesResponse:
    return ListConfigResourcesResponse(throttle_time_ms=0, error_code=error, config_resources=[])


async def handle(ctx: RequestContext, request: ListConfigResourcesRequest) -> ListConfigResourcesResponse:
    broker = ctx.broker
    supported = _SUPPORTED_V1 if ctx.api_version >= 1 else frozenset({CLIENT_METRICS})
    wanted = set(request.resource_types) if ctx.api_version >= 1 and request.resource_types else supported
    if not wanted <= supported:
        return failed_response(ctx, request, ErrorCode.UNSUPPORTED_VERSION)
    found: list[ConfigResource] = []
    # Kafka's order of types: GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC (none of the first two here)
    node = str(broker.node_id)
    if BROKER_LOGGER in wanted:
        found.append(ConfigResource(node, BROKER_LOGGER))
    if BROKER in wanted:
        found.append(ConfigResource(node, BROKER))
    if TOPIC in wanted:
        found += [ConfigResource(name, TOPIC) for name in sorted(broker.catalogue.topics())]
    return ListConfigResourcesResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, config_resources=found)
