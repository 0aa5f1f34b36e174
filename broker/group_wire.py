"""Shared pieces of the group API handlers (broker/apis/{join_group,sync_group,...}.py).

The handlers adapt each wire version to a `kbroker.coordinator.commands` command, call the broker's
`GroupCoordinatorService` (`broker.coordinator`), and translate the result back to the exact
response version. What lives here:

- `service(ctx)`: the coordinator (until it has started it answers COORDINATOR_NOT_AVAILABLE, as
  Kafka does before `__consumer_offsets` can be served);
- `answer(ctx, call, on_error)`: runs a handler body and turns any unexpected exception into the
  API's error response with UNKNOWN_SERVER_ERROR, as Kafka's request handler does, so a client is
  never left without an answer (the server closes the connection when a handler raises);
- `client_host(peer)`: the JoinGroup client host as Kafka records it (`InetAddress.toString()`
  of the peer address: "/127.0.0.1");
- `partition_exists(ctx)`: a checker for OffsetCommit/OffsetDelete, which refuse partitions the
  broker does not have with UNKNOWN_TOPIC_OR_PARTITION before the coordinator sees them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import structlog

from .router import RequestContext
from ..protocol.errors import ErrorCode

if TYPE_CHECKING:
    from ..coordinator.actor import GroupCoordinatorService

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
    except Exception:  # noqa: BLE001 - a bug must still produce an answer, not a closed socket
        log.exception("group_request_failed", **ctx.log_fields())
        return on_error(E.UNKNOWN_SERVER_ERROR)


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
    topics = ctx.broker.logs.topics()

    def check(topic: str, partition: int) -> bool | None:
        info = topics.get(topic)
        if info is None:
            return None
        return 0 <= partition < info.num_partitions

    return check
