"""WriteTxnMarkers (27) v0-v2 (v0 is Kafka 3.x's, removed by 4.0), as Kafka 4.4 serves it on its client
listener: a transaction coordinator asks a partition's leader to write commit or abort markers, and so
does `kafka-transactions abort`
(Admin.abortTransaction) for a hanging transaction, one its coordinator no longer knows (ACL: Alter or
ClusterAction on the cluster, broker/security/txn_group_admin_checks.py). kbroker's own coordinator
appends its markers in-process (broker/coordinators/transactions.py) and never sends this.

Per marker and partition: UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist; on a
`__consumer_offsets` partition the marker also settles the producer's transactional offsets there
(Kafka's groupCoordinator.completeTransaction); elsewhere the marker is appended (a marker older than
the producer's epoch is INVALID_PRODUCER_EPOCH, nothing written; with v2's TransactionVersion 2 it must
be newer, bar the same marker again once the transaction is over) and answered once durable, which
moves the partition's last stable offset past the transaction.
"""

from __future__ import annotations

from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.write_txn_markers_request import WriteTxnMarkersRequest
from ...protocol.messages.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
)

API_KEY = 27
VERSIONS = (0, 2)
OFFSETS_TOPIC = "__consumer_offsets"
E = ErrorCode


def failed_response(_ctx: RequestContext, request: WriteTxnMarkersRequest, error: int) -> WriteTxnMarkersResponse:
    return WriteTxnMarkersResponse(markers=[WritableTxnMarkerResult(m.producer_id, [
        WritableTxnMarkerTopicResult(t.name, [WritableTxnMarkerPartitionResult(p, error) for p in t.partition_indexes])
        for t in m.topics]) for m in request.markers])


async def handle(ctx: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    broker = ctx.broker
    results = []
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            answers = []
            for p in topic.partition_indexes:
                if not broker.catalogue.has_partition(topic.name, p):
                    error = E.UNKNOWN_TOPIC_OR_PARTITION
                elif topic.name == OFFSETS_TOPIC:
                    error = await broker.transactions.write_offsets_marker(
                        marker.producer_id, marker.producer_epoch, marker.transaction_result, p,
                        marker.coordinator_epoch, marker.transaction_version)
                else:
                    error = await broker.partitions.write_marker(
                        marker.producer_id, marker.producer_epoch, marker.transaction_result, topic.name, p,
                        marker.coordinator_epoch, marker.transaction_version)
                answers.append(WritableTxnMarkerPartitionResult(p, error))
            topics.append(WritableTxnMarkerTopicResult(topic.name, answers))
        results.append(WritableTxnMarkerResult(marker.producer_id, topics))
    return WriteTxnMarkersResponse(markers=results)
