"""ListPartitionReassignments (46) v0: with one broker no reassignment is ever in progress, so the
answer lists no partitions, whichever topics are asked about (as Kafka's controller, which lists
only ongoing reassignments)."""

from __future__ import annotations

from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.list_partition_reassignments_request import ListPartitionReassignmentsRequest
from ...protocol.messages.list_partition_reassignments_response import ListPartitionReassignmentsResponse

API_KEY = 46
VERSIONS = (0, 0)


async def handle(ctx: RequestContext, request: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                              topics=[])
