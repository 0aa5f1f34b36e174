"""GetTelemetrySubscriptions (71, KIP-714): a client asks which of its metrics to push and how often; served
only with --client-metrics (broker/operations/client_telemetry.py), as Kafka serves it only with a metrics
reporter that receives client telemetry."""

from __future__ import annotations

from ..network.router import RequestContext
from ..operations.client_telemetry import ACCEPTED_COMPRESSION
from ...protocol.errors import ErrorCode
from ...protocol.messages.get_telemetry_subscriptions_request import GetTelemetrySubscriptionsRequest
from ...protocol.messages.get_telemetry_subscriptions_response import GetTelemetrySubscriptionsResponse

API_KEY = 71
VERSIONS = (0, 0)


def failed_response(_ctx: RequestContext, _request: GetTelemetrySubscriptionsRequest, error: int
                    ) -> GetTelemetrySubscriptionsResponse:
    return GetTelemetrySubscriptionsResponse(throttle_time_ms=0, error_code=error)


def handle(ctx: RequestContext, request: GetTelemetrySubscriptionsRequest) -> GetTelemetrySubscriptionsResponse:
    telemetry = ctx.broker.client_telemetry
    if telemetry is None:
        return failed_response(ctx, request, ErrorCode.UNSUPPORTED_VERSION)
    found = telemetry.get_subscriptions(request.client_instance_id, ctx.client_id, ctx.peer, ctx.principal)
    if found.error != ErrorCode.NONE:
        return failed_response(ctx, request, found.error)
    return GetTelemetrySubscriptionsResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, client_instance_id=found.instance_id,
        subscription_id=found.subscription_id, accepted_compression_types=list(ACCEPTED_COMPRESSION),
        push_interval_ms=found.push_interval_ms, telemetry_max_bytes=telemetry.max_bytes,
        delta_temporality=False, requested_metrics=found.requested_metrics)
