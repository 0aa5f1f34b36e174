"""The APIs a broker serves and how each route is wrapped: every module of broker/apis/ imported on its
first request, with its ACL check only when an authorizer is configured."""

from __future__ import annotations

import functools
import importlib

from ..protocol.framing import API_VERSIONS_KEY
from .network.router import Route, Router

# KIP-714's APIs (Kafka 3.7+), which Kafka serves only with a metrics reporter that takes client
# telemetry, and kbroker only with --client-metrics: not in any release's default table.
CLIENT_TELEMETRY_APIS = {71: (0, 0), 72: (0, 0)}


def build_router(*, acl_checks: bool = True, without: frozenset[int] = frozenset()) -> Router:
    """Every API in broker/apis/ SERVED, each module imported on the first request of its API.

    acl_checks: wrap the handlers in their ACL checks (broker/security/api_checks.py). A broker with no
    authorizer configured can never refuse a request (an authorizer exists only by configuration),
    so it serves the handlers bare, with only KIP-430's operations filled in where asked: no wrapper
    per request, and neither the checks nor the ACL model imported. `without`: APIs not served."""
    from .apis import SERVED

    router = Router()
    for api_key, (module, low, high) in SERVED.items():
        if api_key in without:
            continue
        router.register_lazy(api_key, low, high,
                             functools.partial(importlib.import_module, f"{__package__}.apis.{module}"))
    router.wrap_routes(_acl_checked if acl_checks else _with_operations)
    return router


def _with_operations(route: Route) -> Route:
    """The route as a broker without an authorizer serves it; answering ApiVersions imports nothing."""
    if route.api_key == API_VERSIONS_KEY:
        return route
    from .security.authorized_operations import with_operations

    return with_operations(route)


def _acl_checked(route: Route) -> Route:
    """The route with its ACL check (broker/security/api_checks.py, which imports the responses of
    every checked API). Kafka checks no ApiVersions, so answering one imports none of them."""
    if route.api_key == API_VERSIONS_KEY:
        return route
    from .security import api_checks

    return api_checks.checked(route)
