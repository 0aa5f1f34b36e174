"""Several nodes in one process (issue 41): a group's coordinator is the leader of its
`__consumer_offsets` partition, a transactional id's the leader of its `__transaction_state`
partition, as in Kafka. The process runs one group coordinator and one transaction coordinator for
every node; what makes a node "the" coordinator is this check, wrapped around the coordinator APIs'
routes only when there are several nodes (one node serves its handlers bare and pays nothing):

- a request for one group or transactional id that another node coordinates: NOT_COORDINATOR, the
  API's own error answer (clients look the coordinator up again with FindCoordinator);
- a request for several (DescribeGroups, DeleteGroups, OffsetFetch v8+, ConsumerGroupDescribe,
  DescribeTransactions): the handler answers this node's, the others get NOT_COORDINATOR each;
- ListGroups and ListTransactions answer the node's own, as Kafka's brokers do.

FindCoordinator asks `coordinator_node` too, so both agree. When the coordinator's partition moves
(a test control, a node stopped), the wiring unloads it and loads it again (broker/cluster.py).
"""

from __future__ import annotations

import copy
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Callable

from ...coordinator.partitioning import partition_for
from ...protocol.errors import ErrorCode
from ..network.router import Route, then
from ..partitions.catalogue import NO_LEADER

if TYPE_CHECKING:
    from ..network.router import RequestContext
    from ..services import BrokerServices

OFFSETS_TOPIC = "__consumer_offsets"
TXN_TOPIC = "__transaction_state"
E = ErrorCode

# api key -> (coordinator topic, the request's key field)
_ONE_KEY: dict[int, tuple[str, str]] = {
    8: (OFFSETS_TOPIC, "group_id"),  # OffsetCommit
    11: (OFFSETS_TOPIC, "group_id"),  # JoinGroup
    12: (OFFSETS_TOPIC, "group_id"),  # Heartbeat
    13: (OFFSETS_TOPIC, "group_id"),  # LeaveGroup
    14: (OFFSETS_TOPIC, "group_id"),  # SyncGroup
    28: (OFFSETS_TOPIC, "group_id"),  # TxnOffsetCommit
    47: (OFFSETS_TOPIC, "group_id"),  # OffsetDelete
    68: (OFFSETS_TOPIC, "group_id"),  # ConsumerGroupHeartbeat
    22: (TXN_TOPIC, "transactional_id"),  # InitProducerId (a transactional one)
    25: (TXN_TOPIC, "transactional_id"),  # AddOffsetsToTxn
    26: (TXN_TOPIC, "transactional_id"),  # EndTxn
}
_OWN = attrgetter("group_id")
# api key -> (coordinator topic, request list, response list, the key of a request entry)
_MANY: dict[int, tuple[str, str, str, Callable[[Any], str] | None]] = {
    15: (OFFSETS_TOPIC, "groups", "groups", None),  # DescribeGroups
    42: (OFFSETS_TOPIC, "groups_names", "results", None),  # DeleteGroups
    69: (OFFSETS_TOPIC, "group_ids", "groups", None),  # ConsumerGroupDescribe
    9: (OFFSETS_TOPIC, "groups", "groups", _OWN),  # OffsetFetch v8+ (below: one group_id)
    65: (TXN_TOPIC, "transactional_ids", "transaction_states", None),  # DescribeTransactions
}
# api key -> (coordinator topic, response list, the key of a response entry)
_LISTED: dict[int, tuple[str, str, str]] = {
    16: (OFFSETS_TOPIC, "groups", "group_id"),  # ListGroups
    66: (TXN_TOPIC, "transaction_states", "transactional_id"),  # ListTransactions
}
ADD_PARTITIONS_TO_TXN, BATCHED_FROM = 24, 4  # v4+ is the brokers' batched form: not checked
OFFSET_FETCH, GROUPS_FROM = 9, 8


def coordinator_node(broker: BrokerServices, topic: str, key: str) -> int:
    """The node coordinating `key` (a group or transactional id): the leader of its partition of
    `topic`; NO_LEADER while the topic does not exist or the partition has no leader."""
    catalogue = broker.catalogue
    info = catalogue.topic(topic)
    if info is None:
        return NO_LEADER
    led = catalogue.leadership(topic, partition_for(key, info.num_partitions))
    return NO_LEADER if led is None else led.leader


def _coordinates(broker: BrokerServices, topic: str, key: str) -> bool:
    info = broker.catalogue.topic(topic)
    if info is None:  # not created yet: the coordinator itself answers (COORDINATOR_NOT_AVAILABLE)
        return True
    return broker.catalogue.leads(info, partition_for(key, info.num_partitions), broker.node_id)


def checked(route: Route) -> Route:
    """`route` with the coordinator check, for the coordinator APIs; others as they are."""
    api_key = route.api_key
    handler, failed = route.handler, route.failed_response
    if api_key in _ONE_KEY:
        topic, field = _ONE_KEY[api_key]

        def one(ctx: RequestContext, request: Any) -> Any:
            key = getattr(request, field)
            if key is not None and not _coordinates(ctx.broker, topic, key):
                return failed(ctx, request, E.NOT_COORDINATOR)
            return handler(ctx, request)

        return Route(api_key, route.min_version, route.max_version, one, failed)
    if api_key in _MANY:
        spec = _MANY[api_key]

        def many_keys(ctx: RequestContext, request: Any) -> Any:
            if api_key == OFFSET_FETCH and ctx.api_version < GROUPS_FROM:
                if not _coordinates(ctx.broker, OFFSETS_TOPIC, request.group_id):
                    return failed(ctx, request, E.NOT_COORDINATOR)
                return handler(ctx, request)
            return _split(ctx, request, handler, failed, spec)

        return Route(api_key, route.min_version, route.max_version, many_keys, failed)
    if api_key in _LISTED:
        topic, out_list, out_key = _LISTED[api_key]

        def listed(ctx: RequestContext, request: Any) -> Any:
            broker = ctx.broker

            def own(response: Any) -> Any:
                entries = getattr(response, out_list)
                setattr(response, out_list, [e for e in entries if _coordinates(broker, topic, getattr(e, out_key))])
                return response

            return then(handler(ctx, request), own)

        return Route(api_key, route.min_version, route.max_version, listed, failed)
    if api_key == ADD_PARTITIONS_TO_TXN:
        def add_partitions(ctx: RequestContext, request: Any) -> Any:
            if ctx.api_version < BATCHED_FROM and not _coordinates(ctx.broker, TXN_TOPIC,
                                                                 request.v3_and_below_transactional_id):
                return failed(ctx, request, E.NOT_COORDINATOR)
            return handler(ctx, request)

        return Route(api_key, route.min_version, route.max_version, add_partitions, failed)
    return route


def _split(ctx: RequestContext, request: Any, handler: Any, failed: Any,
           spec: tuple[str, str, str, Callable[[Any], str] | None]) -> Any:
    """This node's keys to the handler, the others NOT_COORDINATOR, in one answer."""
    topic, in_list, out_list, key_of = spec
    entries = getattr(request, in_list) or []
    mine: list[Any] = []
    elsewhere: list[Any] = []
    for entry in entries:
        key = key_of(entry) if key_of is not None else entry
        (mine if _coordinates(ctx.broker, topic, key) else elsewhere).append(entry)
    if not elsewhere:
        return handler(ctx, request)
    refused = copy.copy(request)
    setattr(refused, in_list, elsewhere)
    refusals = getattr(failed(ctx, refused, E.NOT_COORDINATOR), out_list)
    if not mine:
        return failed(ctx, refused, E.NOT_COORDINATOR)
    served = copy.copy(request)
    setattr(served, in_list, mine)

    def merged(response: Any) -> Any:
        getattr(response, out_list).extend(refusals)
        return response

    return then(handler(ctx, served), merged)
