"""DescribeTransactions (65) v0: the coordinator's view of transactional ids (kafka-transactions.sh
describe). An unknown id is TRANSACTIONAL_ID_NOT_FOUND."""

from __future__ import annotations

from .repeats import distinct, in_request_order
from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from ...protocol.messages.describe_transactions_response import (
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)

API_KEY = 65
VERSIONS = (0, 0)
E = ErrorCode


def failed_response(_ctx: RequestContext, request: DescribeTransactionsRequest,
                    error: int) -> DescribeTransactionsResponse:
    return DescribeTransactionsResponse(transaction_states=[
        TransactionState(error_code=error, transactional_id=txn_id, transaction_start_time_ms=-1,
                         producer_id=-1, producer_epoch=-1)
        for txn_id in request.transactional_ids])


async def handle(ctx: RequestContext, request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    service = ctx.broker.transactions
    out: dict[str, TransactionState] = {}
    for txn_id in distinct(request.transactional_ids):
        txn = service.transaction(txn_id)
        if txn is None:
            # the other fields keep their defaults, 0, as in Kafka's answer
            out[txn_id] = TransactionState(error_code=E.TRANSACTIONAL_ID_NOT_FOUND, transactional_id=txn_id)
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(txn.partitions):
            by_topic.setdefault(topic, []).append(partition)
        out[txn_id] = (TransactionState(
            error_code=E.NONE, transactional_id=txn_id, transaction_state=txn.state.kafka_name,
            transaction_timeout_ms=txn.timeout_ms, transaction_start_time_ms=txn.start_ms,
            producer_id=txn.producer_id, producer_epoch=txn.producer_epoch,
            topics=[TopicData(t, ps) for t, ps in by_topic.items()],
        ))
    return DescribeTransactionsResponse(throttle_time_ms=0,
                                        transaction_states=in_request_order(request.transactional_ids, out))
