"""FindCoordinator (10) v0-v6: this single node coordinates every group; with several nodes
(`--nodes N`) the leader of the key's `__consumer_offsets` or `__transaction_state` partition does
(broker/apis/coordinator_routes.py), COORDINATOR_NOT_AVAILABLE while it has none.

Key types (Kafka's `CoordinatorType`):
- 0 group: this node, once the broker has a group coordinator (before that
  COORDINATOR_NOT_AVAILABLE, as Kafka answers while `__consumer_offsets` cannot be served);
- 1 transaction: this node, once the transaction coordinator runs (before that
  COORDINATOR_NOT_AVAILABLE);
- 2 share: INVALID_REQUEST below v6 or for a key that is not "group:topicId:partition"; with several
  nodes (`--nodes N`, over PostgreSQL) the leader of the key's `__share_group_state` partition, whose
  share coordinator holds the share-partition's state; on one node COORDINATOR_NOT_AVAILABLE (its
  share-partitions reach their state in-process: nothing asks it);
- anything else: INVALID_REQUEST (Kafka fails the whole request on an unknown type).

v0-v3 answer one key at top level; v4+ answer each of `coordinator_keys` in its own entry. Like
Kafka, a failed lookup carries node -1, host "" and port -1; v4+ entries carry no error message,
v1-v3 carry one (Kafka puts "NONE" there on success).
"""

from __future__ import annotations

import base64

from . import group_wire
from .coordinator_routes import OFFSETS_TOPIC, TXN_TOPIC, coordinator_node
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
        if ctx.broker.catalogue.clustered:
            return _leader_of(ctx, OFFSETS_TOPIC, key)
        host, port = ctx.broker.advertised(ctx.listener)
        return E.NONE, ctx.broker.node_id, host, port
    if key_type == TRANSACTION:
        if ctx.broker.catalogue.clustered:
            ctx.broker.transactions  # noqa: B018 - builds the coordinator, which creates its topic
            return _leader_of(ctx, TXN_TOPIC, key)
        host, port = ctx.broker.advertised(ctx.listener)
        return E.NONE, ctx.broker.node_id, host, port
    if key_type == SHARE:
        if ctx.api_version < 6 or not valid_share_key(key):
            return E.INVALID_REQUEST, -1, "", -1
        if ctx.broker.catalogue.clustered:
            return _share_leader(ctx, key)
        return E.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    return E.INVALID_REQUEST, -1, "", -1


def _leader_of(ctx: RequestContext, topic: str, key: str) -> tuple[ErrorCode, int, str, int]:
    """Several nodes: the leader of the key's partition of `topic`, on the request's listener."""
    node = coordinator_node(ctx.broker, topic, key)
    endpoint = ctx.broker.node_endpoint(node, ctx.listener) if node >= 0 else None
    if endpoint is None:
        return E.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    return E.NONE, node, endpoint[0], endpoint[1]


def _share_leader(ctx: RequestContext, key: str) -> tuple[ErrorCode, int, str, int]:
    """Several nodes: the leader of the `__share_group_state` partition Kafka's share coordinator puts
    "group:topicId:partition" in (made now if it does not exist: COORDINATOR_NOT_AVAILABLE until it does,
    as Kafka answers while it creates the topic)."""
    from ..coordinators.share_state import TOPIC, kafka_partition_for

    ctx.broker.share_state.ensure()
    catalogue = ctx.broker.catalogue
    info = catalogue.topic(TOPIC)
    led = None if info is None else catalogue.leadership(TOPIC, kafka_partition_for(key, info.num_partitions))
    if led is None or led.leader < 0 or (endpoint := ctx.broker.node_endpoint(led.leader, ctx.listener)) is None:
        return E.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    return E.NONE, led.leader, endpoint[0], endpoint[1]


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
