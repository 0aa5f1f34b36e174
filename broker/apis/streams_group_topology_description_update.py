"""StreamsGroupTopologyDescriptionUpdate (93) v0: a streams group member pushes its topology's
description to the broker's topology description plugin (KIP-1331), which keeps it for tools to show.

Kafka 4.4 serves the API but ships no plugin, and with none configured (its default) the group
coordinator refuses every push before it looks at the group: UNSUPPORTED_VERSION, "The broker has no
streams group topology description plugin configured." (GroupCoordinatorService's
throwIfStreamsGroupTopologyDescriptionUpdateInvalid), after KafkaApis' Read check on the group
(broker/security/txn_group_admin_checks.py). kbroker has no plugin either and answers the same; its
heartbeat never asks for a description (TopologyDescriptionRequired stays false), as Kafka's does not
without a plugin.
"""

from __future__ import annotations

from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.streams_group_topology_description_update_request import (
    StreamsGroupTopologyDescriptionUpdateRequest,
)
from ...protocol.messages.streams_group_topology_description_update_response import (
    StreamsGroupTopologyDescriptionUpdateResponse,
)

API_KEY = 93
VERSIONS = (0, 0)
NO_PLUGIN = "The broker has no streams group topology description plugin configured."


def failed_response(_ctx: RequestContext | None, _request: StreamsGroupTopologyDescriptionUpdateRequest | None,
                    error: ErrorCode, message: str | None = None) -> StreamsGroupTopologyDescriptionUpdateResponse:
    return StreamsGroupTopologyDescriptionUpdateResponse(throttle_time_ms=0, error_code=error, error_message=message)


async def handle(ctx: RequestContext, request: StreamsGroupTopologyDescriptionUpdateRequest
                 ) -> StreamsGroupTopologyDescriptionUpdateResponse:
    return failed_response(ctx, request, ErrorCode.UNSUPPORTED_VERSION, NO_PLUGIN)
