"""FindCoordinator (10) v0-v6: this single node coordinates every group.

Key types (Kafka's `CoordinatorType`):
- 0 group: this node, once the broker has a group coordinator (before that
  COORDINATOR_NOT_AVAILABLE, as Kafka answers while `__consumer_offsets` cannot be served);
- 1 transaction: this node, once the transaction coordinator runs (before that
  COORDINATOR_NOT_AVAILABLE);
- 2 share: INVALID_REQUEST below v6 or for a key that is not "group:topicId:partition";
  otherwise COORDINATOR_NOT_AVAILABLE (no share coordinator);
- anything else: INVALID_REQUEST (Kafka fails the whole request on an unknown type).

v0-v3 answer one key at top level; v4+ answer each of `coordinator_keys` in its own entry. Like
Kafka, a failed lookup carries node -1, host "" and port -1; v4+ entries carry no error message,
v1-v3 carry one (Kafka puts "NONE" there on success).
"""

from __future__ import annotations

import base64

from . import group_wire
from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.find_coordinator_request import FindCoordinatorRequest
from ...protocol.messages.find_coordinator_response import Coordinator, FindCoordinatorResponse

API_KEY = 10
VERSIONS = (0, 6)

E = ErrorCode
GROUP, TRANSACTION, SHARE = 0, 1, 2

_MESSAGES = {
    E.NONE: "NONE",
    E.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    E.INVALID_REQUEST: "Invalid coordinator key or key type.",
    E.UNKNOWN_SERVER_ERROR: "Unexpected server error.",
}


def valid_share_key(key: str) -> bool:
    parts = key.split(":")
    if len(parts) != 3 or not parts[0]:
        return False
    try:
        raw = base64.urlsafe_b64decode(parts[1] + "==")
        partition = int(parts[2])
    except ValueError:
        return False
    return len(raw) == 16 and len(parts[1]) == 22 and partition >= 0


def lookup(ctx: RequestContext, key_type: int, key: str) -> tuple[ErrorCode, int, str, int]:
    """(error, node id, host, port) for one key."""
    if key_type == GROUP:
        coordinator = group_wire.service(ctx)
        if coordinator is None:
            return E.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        host, port = ctx.broker.advertised(ctx.listener)
        return E.NONE, ctx.broker.node_id, host, port
    if key_type == TRANSACTION:
        host, port = ctx.broker.advertised(ctx.listener)
        return E.NONE, ctx.broker.node_id, host, port
    if key_type == SHARE:
        if ctx.api_version < 6 or not valid_share_key(key):
            return E.INVALID_REQUEST, -1, "", -1
        return E.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    return E.INVALID_REQUEST, -1, "", -1


async def handle(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    key_type = request.key_type if ctx.api_version >= 1 else GROUP
    if ctx.api_version >= 4:
        entries = []
        # Kafka fails the whole request on an unknown key type, each key then carrying the exception's
        # message; a key it looked up carries "" (a share key below v6 too)
        unknown_type = key_type not in (GROUP, TRANSACTION, SHARE)
        for key in request.coordinator_keys:
            error, node, host, port = lookup(ctx, key_type, key)
            entries.append(Coordinator(key=key, node_id=node, host=host, port=port, error_code=error,
                                       error_message=f"Unknown coordinator type: {key_type}" if unknown_type else ""))
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=entries)
    error, node, host, port = lookup(ctx, key_type, request.key)
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=error, error_message=_MESSAGES.get(error, error.name),
                                   node_id=node, host=host, port=port)


def failed_response(ctx: RequestContext, request: FindCoordinatorRequest, error: ErrorCode) -> FindCoordinatorResponse:
    """v4+ carry each key's error in its own entry; older versions have the top-level error."""
    if ctx.api_version < 4:
        return FindCoordinatorResponse(throttle_time_ms=0, error_code=error, error_message=None, node_id=-1,
                                       host="", port=-1)
    return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
        Coordinator(key=k, node_id=-1, host="", port=-1, error_code=error, error_message=None)
        for k in request.coordinator_keys
    ])
