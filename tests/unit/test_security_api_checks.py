"""Every API is wrapped by the ACL checks: with its Kafka check (broker/security/api_checks.py), or its
own (the ACL and SCRAM APIs), or none where Kafka has none (ApiVersions, the SASL handshake); an API
served without a written check fails closed: only super users pass while an authorizer is
configured, everyone else gets CLUSTER_AUTHORIZATION_FAILED in the API's error shape."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from kbroker.broker.app import build_router
from kbroker.broker.network.router import RequestContext, Router
from kbroker.broker.security import api_checks
from kbroker.broker.security.acl import Authorizer
from kbroker.broker.security.session import ConnectionAuth
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.describe_cluster_request import DescribeClusterRequest
from kbroker.protocol.messages.describe_cluster_response import DescribeClusterResponse


def test_current_apis_have_their_kafka_checks():
    served = {key for key, _, _ in build_router().supported()}
    explicit = set(api_checks.CHECKS) | api_checks.CHECKED_IN_HANDLER | api_checks.NO_CHECK_IN_KAFKA
    assert served <= explicit, f"served without a written check (fail closed): {sorted(served - explicit)}"


def test_checked_handlers_are_the_wrapped_ones():
    from kbroker.broker.apis import api_versions, produce

    router = build_router()
    assert router.route(0).handler is not produce.handle
    assert router.route(18).handler is api_versions.handle


def test_without_an_authorizer_handlers_are_served_bare():
    """No authorizer configured: nothing can be refused, so no ACL wrapper runs per request; only the
    APIs whose answers carry KIP-430's operations are wrapped, to fill them in."""
    import importlib

    from kbroker.broker.apis import SERVED
    from kbroker.broker.security.authorized_operations import OPERATIONS

    router = build_router(acl_checks=False)
    assert set(OPERATIONS) <= set(SERVED)
    for api_key, (module, _, _) in SERVED.items():
        handle = importlib.import_module(f"kbroker.broker.apis.{module}").handle
        served = router.route(api_key).handler
        if api_key in OPERATIONS:
            assert served is not handle and served.__wrapped__ is handle, module
        else:
            assert served is handle, module


def _security(super_users=()):
    from kbroker.broker.security.service import Security

    sec = Security.__new__(Security)
    sec.authorizer = Authorizer([], super_users)
    return sec


def _ctx(principal: str, broker, api_key: int = 60) -> RequestContext:
    conn = ConnectionAuth(sasl=False, mechanisms=(), credentials=None, peer="127.0.0.1:1", listener="L",
                          principal=principal)
    return RequestContext(api_key, 0, 1, "c", "127.0.0.1:1", broker, connection=conn)


def test_an_api_without_a_written_check_fails_closed():
    calls = []

    class NewApi:  # stands for an API another branch adds (DescribeCluster's shape, no CHECKS entry)
        API_KEY, VERSIONS = 60, (0, 1)

        @staticmethod
        async def handle(ctx, request):
            calls.append(ctx.connection.principal)
            return DescribeClusterResponse(cluster_id="served")

    router = Router()
    router.register(NewApi)
    saved = api_checks.CHECKS.pop(60)
    try:
        api_checks.install(router)
    finally:
        api_checks.CHECKS[60] = saved
    security = _security({"User:admin"})
    broker = SimpleNamespace(security=security, security_if_built=security)
    handler = router.routes[60].handler
    request = DescribeClusterRequest()
    assert asyncio.run(handler(_ctx("User:admin", broker), request)).cluster_id == "served"
    answer = asyncio.run(handler(_ctx("User:alice", broker), request))
    assert calls == ["User:admin"]
    assert answer.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED  # generic error shape (top-level code)
    broker.security.authorizer = None  # no authorizer: everyone is served
    assert asyncio.run(handler(_ctx("User:alice", broker), request)).cluster_id == "served"


def test_a_plain_handler_stays_plain_under_its_check():
    """Heartbeat and OffsetCommit are plain `def`s the server calls inline: the ACL wrapper answers at
    once too, the check included (with an authorizer or without)."""
    import inspect

    from kbroker.protocol.messages.heartbeat_request import HeartbeatRequest
    from kbroker.protocol.messages.heartbeat_response import HeartbeatResponse

    calls = []

    class Beat:
        API_KEY, VERSIONS = 12, (0, 4)

        @staticmethod
        def handle(ctx, request):
            calls.append(ctx.connection.principal)
            return HeartbeatResponse(error_code=0)

    router = Router()
    router.register(Beat)
    api_checks.install(router)
    handler = router.routes[12].handler
    assert not inspect.iscoroutinefunction(handler)
    security = _security({"User:admin"})
    broker = SimpleNamespace(security=security, security_if_built=security, router=router)
    request = HeartbeatRequest(group_id="g", generation_id=1, member_id="m")

    def answer(principal):  # with an authorizer the check may wait, so the server runs it as a task
        result = handler(_ctx(principal, broker, 12), request)
        return asyncio.run(result) if inspect.iscoroutine(result) else result

    assert answer("User:admin").error_code == 0
    assert answer("User:alice").error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    broker.security.authorizer = None
    assert not inspect.iscoroutine(handler(_ctx("User:alice", broker, 12), request))  # plain: run inline
    assert calls == ["User:admin", "User:alice"]


def test_then_reaches_the_answer_through_a_deferred_or_a_coroutine():
    """then() applies its function to a handler's answer however it comes: at once, Deferred, or as
    the coroutine a plain handler's ACL wrapper returns while its check waits."""
    from kbroker.broker.network.router import Deferred, then

    async def answer(value):
        return value

    assert then(None, lambda body: body + 1) is None  # acks=0: no answer
    assert then(1, lambda body: body + 1) == 2
    deferred = then(Deferred(answer(1)), lambda body: body + 1)
    assert isinstance(deferred, Deferred) and asyncio.run(deferred.response) == 2
    assert asyncio.run(then(answer(1), lambda body: body + 1)) == 2
    later = asyncio.run(then(answer(Deferred(answer(1))), lambda body: body + 1))
    assert isinstance(later, Deferred) and asyncio.run(later.response) == 2
