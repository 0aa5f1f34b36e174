"""ListTransactions (66) v0-v2: transactional ids, filtered by state (unknown state names are
returned in `unknown_state_filters`), producer id, v1's minimum duration and v2's regular expression."""

from __future__ import annotations

import re

from ..network.router import RequestContext
from ..network.error_answers import refuse
from ...coordinator.txn.metadata import TxnState
from ...protocol.errors import ErrorCode
from ...protocol.messages.list_transactions_request import ListTransactionsRequest
from ...protocol.messages.list_transactions_response import ListTransactionsResponse, TransactionState

API_KEY = 66
VERSIONS = (0, 2)
E = ErrorCode


async def handle(ctx: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    service = ctx.broker.transactions
    states = set()
    unknown = []
    for name in request.state_filters:
        state = TxnState.from_kafka_name(name)
        if state is None:
            unknown.append(name)
        else:
            states.add(state)
    pids = set(request.producer_id_filters)
    pattern = None
    if ctx.api_version >= 2 and request.transactional_id_pattern:
        try:
            pattern = re.compile(request.transactional_id_pattern)
        except re.error:
            return refuse(ctx, request, E.INVALID_REGULAR_EXPRESSION)
    now = ctx.broker.clock.wall_ms()
    min_duration = request.duration_filter if ctx.api_version >= 1 else -1
    out = []
    for txn in service.transactions():
        if (request.state_filters and txn.state not in states) or (pids and txn.producer_id not in pids):
            continue
        if pattern is not None and not pattern.fullmatch(txn.transactional_id):
            continue
        if min_duration >= 0 and now - txn.start_ms < min_duration:  # Kafka's test, whatever the state
            continue
        out.append(TransactionState(txn.transactional_id, txn.producer_id, txn.state.kafka_name))
    return ListTransactionsResponse(throttle_time_ms=0, error_code=E.NONE, unknown_state_filters=unknown,
                                    transaction_states=out)
