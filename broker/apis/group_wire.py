"""Shared pieces of the group API handlers (broker/apis/{join_group,sync_group,...}.py).

The handlers adapt each wire version to a `kbroker.coordinator.groups.commands` command, call the broker's
`GroupCoordinatorService` (`broker.coordinator`), and translate the result back to the exact
response version. What lives here:

- `service(ctx)`: the coordinator (until it has started it answers COORDINATOR_NOT_AVAILABLE, as
  Kafka does before `__consumer_offsets` can be served);
- `answer(ctx, call, on_error)`: runs a handler body and turns any unexpected exception into the
  API's error response with UNKNOWN_SERVER_ERROR, as Kafka's request handler does, so a client is
  never left without an answer (the server closes the connection when a handler raises);
- `reply(ctx, pending, to_response, on_error)`: the answer of a plain (non-async) handler once it
  has queued its command: the response now when the coordinator already answered (a refusal),
  else a `Deferred` completed by a callback on the coordinator's future (no coroutine, no task of
  its own), so the connection reads on while the group's actor works;
- `submit_answering(ctx, cmd, to_response, on_error)`: the same for a command submitted here, with
  the response built where the coordinator delivers the result (OffsetCommit: one future per
  commit, completed inside the release of its fsync);
- `client_host(peer)`: the JoinGroup client host as Kafka records it (`InetAddress.toString()`
  of the peer address: "/127.0.0.1");
- `partition_exists(ctx)`: a checker for OffsetCommit/OffsetDelete, which refuse partitions the
  broker does not have with UNKNOWN_TOPIC_OR_PARTITION before the coordinator sees them.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Awaitable, Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

import structlog

from ..network.router import Deferred, RequestContext
from ..network.server import CloseConnection
from ...protocol.errors import ErrorCode

if TYPE_CHECKING:
    from ...coordinator.groups.service import GroupCoordinatorService

log = structlog.get_logger("kbroker.groups")
T = TypeVar("T")
E = ErrorCode


def service(ctx: RequestContext) -> GroupCoordinatorService:
    """The broker's GroupCoordinatorService (it answers COORDINATOR_NOT_AVAILABLE until started)."""
    return ctx.broker.coordinator


async def answer(ctx: RequestContext, call: Callable[[GroupCoordinatorService], Awaitable[T]],
                 on_error: Callable[[ErrorCode], T]) -> T:
    try:
        return await call(ctx.broker.coordinator)
    except CloseConnection:  # a hostile request refused on purpose (broker/apis/repeats.py), not a bug
        raise
    except Exception:  # noqa: BLE001 - a bug must still produce an answer, not a closed socket
        log.exception("group_request_failed", **ctx.log_fields())
        return on_error(E.UNKNOWN_SERVER_ERROR)


def reply(ctx: RequestContext, pending: Any, to_response: Callable[[Any], T],
          on_error: Callable[[ErrorCode], T]) -> T | Deferred:
    """`pending`: what the coordinator's `submit` gave, a future of the command's result (or, from
    `submit_now`, the result itself). A failure of the coordinator becomes UNKNOWN_SERVER_ERROR in
    the API's own error shape, as `answer` does."""
    if not isinstance(pending, asyncio.Future):
        return to_response(pending)
    if pending.done() and not pending.cancelled() and pending.exception() is None:
        return to_response(pending.result())
    out: asyncio.Future[T] = pending.get_loop().create_future()

    def done(f: asyncio.Future[Any]) -> None:
        if out.done():
            return
        if f.cancelled():  # the coordinator went away with the command queued: find it again
            out.set_result(on_error(E.COORDINATOR_NOT_AVAILABLE))
            return
        try:
            out.set_result(to_response(f.result()))
        except Exception:  # noqa: BLE001 - a bug must still produce an answer, not a closed socket
            log.exception("group_request_failed", **ctx.log_fields())
            out.set_result(on_error(E.UNKNOWN_SERVER_ERROR))

    pending.add_done_callback(done)
    return Deferred(out)


class _Answering(asyncio.Future):
    """The future a command's result is delivered to, holding the API's response instead: the
    coordinator's `set_result` builds the response on the spot, so the server's wait for it is the
    only callback left (no second future and no loop turn per answer)."""

    __slots__ = ("_ctx", "_to_response", "_on_error")

    def __init__(self, ctx: RequestContext, to_response: Callable[[Any], Any],
                 on_error: Callable[[ErrorCode], Any], loop: asyncio.AbstractEventLoop | None) -> None:
        super().__init__(loop=loop)  # the coordinator's: found by asyncio, it costs a getpid per request
        self._ctx, self._to_response, self._on_error = ctx, to_response, on_error

    def set_result(self, result: Any) -> None:
        try:
            response = self._to_response(result)
        except Exception:  # noqa: BLE001 - a bug must still produce an answer, not a closed socket
            log.exception("group_request_failed", **self._ctx.log_fields())
            response = self._on_error(E.UNKNOWN_SERVER_ERROR)
        super().set_result(response)

    def set_exception(self, exception: Any) -> None:
        log.error("group_request_failed", exc_info=exception, **self._ctx.log_fields())
        super().set_result(self._on_error(E.UNKNOWN_SERVER_ERROR))


def submit_answering(ctx: RequestContext, cmd: Any, to_response: Callable[[Any], T],
                     on_error: Callable[[ErrorCode], T]) -> T | Deferred:
    """Queue `cmd` (run at once if its group is idle) and answer as `reply` does, with the response
    built where the coordinator delivers the result."""
    coordinator = ctx.broker.coordinator
    answering = _Answering(ctx, to_response, on_error, coordinator.loop)
    pending = coordinator.submit(cmd, answering)
    if pending is not answering:  # a test control delays the answer: it comes as the response already
        return reply(ctx, pending, _same, on_error)
    if answering.done():
        return answering.result()
    return Deferred(answering)


def _same(response: T) -> T:
    return response


# A peer's address is parsed once: a rebalance of N members joins N times or more.
@lru_cache(maxsize=4096)
def client_host(peer: str) -> str:
    """"host:port" (or "[v6]:port" / "v6:port") of the client -> "/host", as Java's
    `InetAddress.toString()` prints an address without a host name: IPv4 dotted, IPv4-mapped IPv6
    as IPv4, other IPv6 as eight uncompressed hex groups without leading zeros ("/0:0:0:0:0:0:0:1")."""
    host, sep, _port = peer.rpartition(":")
    if not sep:
        host = peer
    host = host.strip("[]")
    address, pct, scope = host.partition("%")
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return "/" + host
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return "/" + str(ip.ipv4_mapped)
        text = ":".join(format(int(group, 16), "x") for group in ip.exploded.split(":"))
        return "/" + text + (pct + scope if pct else "")
    return "/" + str(ip)


def partition_exists(ctx: RequestContext) -> Callable[[str, int], bool | None]:
    """Returns check(topic, partition): True if it exists, False if the topic exists but not the
    partition, None if the topic does not exist."""
    topics = ctx.broker.catalogue.topics()

    def check(topic: str, partition: int) -> bool | None:
        info = topics.get(topic)
        if info is None:
            return None
        return 0 <= partition < info.num_partitions

    return check
