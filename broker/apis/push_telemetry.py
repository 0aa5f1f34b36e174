"""PushTelemetry (72, KIP-714): a client's metrics, OTLP protobuf compressed as it chose; served only with
--client-metrics (broker/operations/client_telemetry.py checks and keeps them for /metrics)."""

from __future__ import annotations

from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.push_telemetry_request import PushTelemetryRequest
from ...protocol.messages.push_telemetry_response import PushTelemetryResponse

API_KEY = 72
VERSIONS = (0, 0)


def failed_response(_ctx: RequestContext, _request: PushTelemetryRequest, error: int) -> PushTelemetryResponse:
    return PushTelemetryResponse(throttle_time_ms=0, error_code=error)


def handle(ctx: RequestContext, request: PushTelemetryRequest) -> PushTelemetryResponse:
    telemetry = ctx.broker.client_telemetry
    if telemetry is None:
        return failed_response(ctx, request, ErrorCode.UNSUPPORTED_VERSION)
    metrics = bytes(request.metrics) if request.metrics is not None else None
    error = telemetry.push(request.client_instance_id, request.subscription_id, request.terminating,
                           request.compression_type, metrics, ctx.client_id, ctx.peer, ctx.principal)
    return failed_response(ctx, request, error)
