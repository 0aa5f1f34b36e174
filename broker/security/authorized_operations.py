"""KIP-430: the operations a principal may perform, filled into the answers that ask for them
(Metadata, DescribeCluster, DescribeGroups, ConsumerGroupDescribe, DescribeTopicPartitions).

Every broker needs this, with or without an authorizer: without one, Kafka answers every operation
the resource supports. So it lives apart from the ACL checks (api_checks.py), which a broker with no
authorizer never installs: wrapping a route here (`with_operations`) imports neither the checks nor
the ACL model, and the ACL model is imported only when a client actually asks for operations.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any, Callable

from ..network.router import RequestContext, Route, then
from ...protocol.errors import ErrorCode


def _allowed(ctx: RequestContext, resource_type: str, name: str | None = None) -> int:
    from .acl import ResourceType  # only when a client asked for operations (see the module docstring)

    rt = ResourceType[resource_type]
    security = ctx.broker.security  # without an authorizer, built with this first use
    return security.authorized_operations(ctx, rt) if name is None else security.authorized_operations(ctx, rt, name)


def _metadata(ctx: RequestContext, request: Any, body: Any) -> Any:
    if request.include_cluster_authorized_operations and 8 <= ctx.api_version <= 10:
        body.cluster_authorized_operations = _allowed(ctx, "CLUSTER")
    if request.include_topic_authorized_operations and ctx.api_version >= 8:
        for t in body.topics:
            # Kafka fills them in for every topic the principal may describe, an unknown one too
            # (UNKNOWN_TOPIC_OR_PARTITION); only a topic it may not describe keeps the "not asked" value
            if t.error_code != ErrorCode.TOPIC_AUTHORIZATION_FAILED and t.name:
                t.topic_authorized_operations = _allowed(ctx, "TOPIC", t.name)
    return body


def _describe_cluster(ctx: RequestContext, request: Any, body: Any) -> Any:
    if request.include_cluster_authorized_operations and body.error_code == 0:
        body.cluster_authorized_operations = _allowed(ctx, "CLUSTER")
    return body


def _describe_groups(ctx: RequestContext, request: Any, body: Any) -> Any:
    if request.include_authorized_operations and ctx.api_version >= 3:
        for g in body.groups:
            if g.error_code == 0:
                g.authorized_operations = _allowed(ctx, "GROUP", g.group_id)
    return body


def _consumer_group_describe(ctx: RequestContext, request: Any, body: Any) -> Any:
    if request.include_authorized_operations:
        for g in body.groups:
            if g.error_code == 0:
                g.authorized_operations = _allowed(ctx, "GROUP", g.group_id)
    return body


def _describe_topic_partitions(ctx: RequestContext, request: Any, body: Any) -> Any:
    # Not asked for: Kafka fills them in for every topic of the answer, an unknown one's too.
    for t in body.topics:
        t.topic_authorized_operations = _allowed(ctx, "TOPIC", t.name)
    return body


# api key -> what fills in the operations of that API's answer
OPERATIONS: dict[int, Callable[[RequestContext, Any, Any], Any]] = {
    3: _metadata, 60: _describe_cluster, 15: _describe_groups, 69: _consumer_group_describe,
    75: _describe_topic_partitions}


def with_operations(route: Route) -> Route:
    """`route` filling in the operations its answers ask for (around the bare handler without an
    authorizer, around its ACL check with one); any other route unchanged, so it gets no wrapper."""
    operations = OPERATIONS.get(route.api_key)
    if operations is None:
        return route
    handler = route.handler
    if inspect.iscoroutinefunction(handler):
        @functools.wraps(handler)  # keeps the API's module and name (the metrics label requests by them)
        async def answered(ctx: RequestContext, request: Any) -> Any:
            return then(await handler(ctx, request), lambda body: operations(ctx, request, body))
    else:
        @functools.wraps(handler)
        def answered(ctx: RequestContext, request: Any) -> Any:
            return then(handler(ctx, request), lambda body: operations(ctx, request, body))
    return dataclasses.replace(route, handler=answered)
