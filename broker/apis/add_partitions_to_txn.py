"""AddPartitionsToTxn (24) v0-v5: partitions join a producer's transaction.

v0-v3 (clients): one transaction; every partition gets the transaction's answer, except that when
some partition is unknown those get UNKNOWN_TOPIC_OR_PARTITION and the rest OPERATION_NOT_ATTEMPTED,
and nothing is added (KafkaApis). v4+ (broker to coordinator, KIP-890): a batch of transactions, each
either added or, with `verify_only`, only checked (NONE for a partition in the ongoing transaction,
TRANSACTION_ABORTABLE otherwise); each transaction is answered on its own. A v4+ add is a
transactions v2 client's (Kafka's transactionVersionForAddPartitionsToTxn): its transaction's end
will bump the epoch. kbroker's own Produce v12+ and TxnOffsetCommit v5+ add partitions in-process
(TransactionService.add_implicitly), as Kafka's brokers send this request to the coordinator.
"""

from __future__ import annotations

from ..network.router import RequestContext
from ...coordinator.txn.metadata import TRANSACTION_VERSION_BUILT
from ...protocol.errors import ErrorCode
from ...protocol.messages.add_partitions_to_txn_request import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from ...protocol.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)

API_KEY = 24
VERSIONS = (0, 5)
E = ErrorCode


def _results(errors: dict[tuple[str, int], int]) -> list[AddPartitionsToTxnTopicResult]:
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append(AddPartitionsToTxnPartitionResult(partition, error))
    return [AddPartitionsToTxnTopicResult(name, parts) for name, parts in by_topic.items()]


def failed_response(_ctx: RequestContext, request: AddPartitionsToTxnRequest, error: int) -> AddPartitionsToTxnResponse:
    """Every partition of every transaction in the request gets `error` (v4+ also at the top)."""
    if _ctx.api_version < 4:
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_results(
            {(t.name, p): error for t in request.v3_and_below_topics for p in t.partitions}))
    return AddPartitionsToTxnResponse(error_code=error, results_by_transaction=[
        AddPartitionsToTxnResult(txn.transactional_id,
                                 _results({(t.name, p): error for t in txn.topics for p in t.partitions}))
        for txn in request.transactions])


async def _one(ctx: RequestContext, txn_id: str, producer_id: int, epoch: int, topics: list[AddPartitionsToTxnTopic],
               verify_only: bool) -> dict[tuple[str, int], int]:
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    service = ctx.broker.transactions
    unknown = {tp for tp in wanted if not ctx.broker.catalogue.has_partition(*tp)}
    if unknown:
        return {tp: E.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else E.OPERATION_NOT_ATTEMPTED for tp in wanted}
    if verify_only:
        return dict(service.verify(txn_id, producer_id, epoch, wanted))
    client_tv = TRANSACTION_VERSION_BUILT if ctx.api_version >= 4 else 0
    error = await service.add_partitions(txn_id, producer_id, epoch, wanted, client_tv)
    return {tp: error for tp in wanted}


async def handle(ctx: RequestContext, request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    if ctx.api_version < 4:
        errors = await _one(ctx, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                            request.v3_and_below_producer_epoch, request.v3_and_below_topics, False)
        if ctx.api_version < 2:  # what clients before KIP-588 understand (Kafka's KafkaApis)
            errors = {tp: E.INVALID_PRODUCER_EPOCH if e == E.PRODUCER_FENCED else e for tp, e in errors.items()}
        return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=_results(errors))
    results = []
    for txn in request.transactions:
        errors = await _one(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics,
                            txn.verify_only)
        results.append(AddPartitionsToTxnResult(txn.transactional_id, _results(errors)))
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=E.NONE, results_by_transaction=results)
