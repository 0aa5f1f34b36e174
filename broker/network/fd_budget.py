"""How many client connections fit in the process's file descriptors.

Every connection holds a descriptor, and so do the open segment and index files (a bounded cache,
log/files.py), the listening sockets, the data directory's lock, snapshots being written and the
runtime itself. Once the process runs out, libuv's accept loop closes each new connection before
the broker ever sees it, and nothing is logged. So the broker keeps the count itself: a connection
that would leave too few descriptors for the rest is closed on accept with a `connection_refused`
event, as max.connections is, and the limit the process runs under is never reached.
"""

from __future__ import annotations

import resource

# Descriptors kept for everything but connections and cached segment files. An idle broker holds
# about 15 of them (stdio and log output, the data directory lock, the listening socket, epoll,
# eventfd, io_uring and pipes of the event loop); the rest is room for snapshots and checkpoints
# written whole and the worker threads' transient opens.
RESERVE = 32


class ConnectionSlots:
    """The broker-wide count of open client connections, shared by every listener's server."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.used = 0

    def full(self) -> bool:
        return self.limit is not None and self.used >= self.limit


def connection_limit(file_cache_capacity: int) -> int | None:
    """Connections the soft RLIMIT_NOFILE leaves room for beside the segment-file cache (None: no limit)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return None
    return max(1, soft - file_cache_capacity - RESERVE)
