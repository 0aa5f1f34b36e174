"""Routes decoded requests to handlers by API key, and knows which versions we serve.

A handler module exposes `API_KEY`, `VERSIONS = (min, max)` and `handle(ctx, request)` (a plain
function or a coroutine function) returning the response body (or None when the request gets no
response, as Produce with acks=0), or a `Deferred` whose awaitable gives the body once only waiting
remains. ApiVersions advertises exactly what is registered here, within the Kafka release's table
(`limit_to`).

Error answers have one shape per API, its `failed_response(ctx, request, error_code)` (Kafka's
`AbstractRequest.getErrorResponse`): the whole request answered with one error code, shaped as
error_answers.py says. A module that defines none gets the default one (error_answers.top_level_error:
the response with only its top-level `error_code` set, for the versions that have one; None for the
others: the server then closes the connection). `Route.failed_response` is that function.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, replace
from types import ModuleType
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, Protocol

from .error_answers import top_level_error
from ...protocol.errors import ErrorCode

if TYPE_CHECKING:
    from ..security.session import ConnectionAuth
    from ..services import BrokerServices

# A plain handler returns its answer; an async one a coroutine that gives it (agreed interface 1).
Handler = Callable[["RequestContext", Any], Any]
# The whole-request error answer: (ctx, request, error code) -> response body, or None for none.
FailedResponse = Callable[["RequestContext", Any, ErrorCode], Any]


# Kafka's principal of a connection that did not authenticate (security/session.py's, not imported
# from there: a PLAINTEXT broker loads no security).
ANONYMOUS = "User:ANONYMOUS"


@dataclass(slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str
    peer: str
    broker: BrokerServices  # what handlers may use of the broker (broker/services.py)
    # The listener the request came in on (Kafka's ListenerName): Metadata, FindCoordinator and
    # DescribeCluster answer with that listener's advertised address.
    listener: str = "PLAINTEXT"
    # The connection's authentication state (kbroker.broker.security.session.ConnectionAuth): its
    # principal, and the SASL exchange SaslHandshake/SaslAuthenticate drive. None on PLAINTEXT.
    connection: ConnectionAuth | None = None
    # The connection's id (Kafka's RequestContext.connectionId): a share session belongs to the
    # connection that opened it and ends when it closes (broker/network/server.py's disconnect listeners).
    connection_id: str = ""

    @property
    def principal(self) -> str:
        """Who sent the request, as Kafka names it: User:ANONYMOUS on PLAINTEXT (no ConnectionAuth)."""
        return self.connection.principal if self.connection is not None else ANONYMOUS

    def log_fields(self) -> dict[str, Any]:
        return {
            "api": self.api_key,
            "version": self.api_version,
            "client_id": self.client_id,
            "correlation_id": self.correlation_id,
            "peer": self.peer,
        }


class Deferred:
    """What a handler returns when its effects are applied and only a wait remains (for its records
    to become durable): the connection may read and start the next request meanwhile, and this
    response still leaves in its turn. This is how acknowledgements from one connection share an
    fsync (group commit) while responses keep request order.
    """

    __slots__ = ("response",)

    def __init__(self, response: Awaitable[Any]) -> None:
        self.response = response


def then(result: Any, fn: Callable[[Any], Any]) -> Any:
    """Apply `fn` to a handler's answer, also when the answer is Deferred (or None for acks=0), or a
    coroutine (a plain handler's ACL wrapper that had to wait for its check)."""
    if result is None:
        return None
    if inspect.iscoroutine(result):
        async def settled() -> Any:
            return then(await result, fn)
        return settled()
    if isinstance(result, Deferred):
        async def later() -> Any:
            body = await result.response
            return None if body is None else fn(body)
        return Deferred(later())
    return fn(result)


class HandlerModule(Protocol):
    API_KEY: int
    VERSIONS: tuple[int, int]

    @property
    def handle(self) -> Handler: ...


@dataclass(slots=True, frozen=True)
class Route:
    api_key: int
    min_version: int
    max_version: int
    handler: Handler
    failed_response: FailedResponse


def top_level_failed_response(api_key: int) -> FailedResponse:
    """The default error answer of an API (error_answers.top_level_error): its response with only
    the top-level `error_code` set, for the versions whose response has one; None for the others."""
    def failed_response(ctx: RequestContext, _request: Any, error: ErrorCode) -> Any:
        return top_level_error(api_key, ctx.api_version, error)

    return failed_response


class Router:
    """Routes by API key. A route is registered either loaded (`register(module)`) or lazily
    (`register_lazy`): known by its versions, its module imported on the first request of its key,
    so start-up imports only what serving the first requests needs."""

    def __init__(self) -> None:
        self.routes: dict[int, Route] = {}  # the loaded routes
        self._unloaded: dict[int, tuple[int, int, Callable[[], HandlerModule | ModuleType]]] = {}
        self._wrappers: list[Callable[[Route], Route]] = []
        # A Kafka release's ApiVersions table (protocol/kafka_releases.py): what is advertised, and with
        # `_strict` all that is served (see limit_to).
        self._release: Mapping[int, tuple[int, int]] | None = None
        self._strict = False

    def limit_to(self, release: Mapping[int, tuple[int, int]], *, strict: bool) -> None:
        """Advertise only the APIs of `release` (api key -> versions, a Kafka release's ApiVersions), each
        in the versions both it and this router serve. `strict`: serve nothing else either, so that a
        request outside it is refused as that release refuses it; otherwise clients that send an older
        version without asking (sarama, kafka-python with api_version set) are still served.
        Call it before the first request."""
        self._release, self._strict = dict(release), strict
        if strict:
            for api_key in [k for k in self._unloaded if k not in release]:
                del self._unloaded[api_key]
            for api_key, route in list(self.routes.items()):
                capped = self._capped(api_key, route.min_version, route.max_version)
                if capped is None:
                    del self.routes[api_key]
                else:
                    self.routes[api_key] = replace(route, min_version=capped[0], max_version=capped[1])

    @property
    def strict(self) -> bool:
        """True when serving exactly one Kafka release's table (limit_to(strict=True)): a version
        outside it is refused as that release refuses it, by closing the connection."""
        return self._strict

    def _capped(self, api_key: int, low: int, high: int) -> tuple[int, int] | None:
        if self._release is None:
            return low, high
        if api_key not in self._release:
            return None
        release_low, release_high = self._release[api_key]
        low, high = max(low, release_low), min(high, release_high)
        return (low, high) if low <= high else None

    def register(self, module: HandlerModule | ModuleType) -> None:
        low, high = module.VERSIONS
        if self._strict:
            capped = self._capped(module.API_KEY, low, high)
            if capped is None:
                return
            low, high = capped
        failed = getattr(module, "failed_response", None) or top_level_failed_response(module.API_KEY)
        route = Route(module.API_KEY, low, high, module.handle, failed)
        for wrap in self._wrappers:
            route = wrap(route)
        self.routes[module.API_KEY] = route
        self._unloaded.pop(module.API_KEY, None)

    def register_lazy(self, api_key: int, low: int, high: int, load: Callable[[], HandlerModule | ModuleType]) -> None:
        """Serve `api_key` at versions low..high by the module `load()` returns, imported when the
        first request of that key arrives. The module must declare the same key and versions."""
        self._unloaded[api_key] = (low, high, load)

    def wrap_routes(self, wrap: Callable[[Route], Route]) -> None:
        """Replace every route, loaded now or later, by `wrap(route)` (the ACL checks)."""
        self._wrappers.append(wrap)
        for api_key, route in list(self.routes.items()):
            self.routes[api_key] = wrap(route)

    def route(self, api_key: int) -> Route | None:
        found = self.routes.get(api_key)
        if found is None and api_key in self._unloaded:
            found = self._load(api_key)
        return found

    def load_all(self) -> None:
        for api_key in list(self._unloaded):
            self._load(api_key)

    def _load(self, api_key: int) -> Route:
        low, high, load = self._unloaded[api_key]
        module = load()
        if module.API_KEY != api_key or tuple(module.VERSIONS) != (low, high):
            raise RuntimeError(f"{module!r} serves api {module.API_KEY} versions {module.VERSIONS}, but the router "
                               f"advertises api {api_key} versions {(low, high)} (broker/apis/__init__.py SERVED)")
        self.register(module)
        return self.routes[api_key]

    def supported(self) -> list[tuple[int, int, int]]:
        served = {r.api_key: (r.min_version, r.max_version) for r in self.routes.values()}
        for api_key, (low, high, _) in self._unloaded.items():
            served.setdefault(api_key, (low, high))
        capped = {key: self._capped(key, low, high) for key, (low, high) in served.items()}
        return [(key, *versions) for key, versions in sorted(capped.items()) if versions is not None]
