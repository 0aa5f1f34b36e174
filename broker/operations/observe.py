"""What the broker counts about itself, in plain Python: requests, bytes per topic, fsyncs,
event-loop stalls, rebalances.

Always on and cheap (a few dict updates per request, no locks, no library); `broker/operations/metrics.py`
turns these into Prometheus metrics at scrape time, and only that module imports
prometheus_client, so a broker without `--metrics-listen` never loads it.
"""

from __future__ import annotations

import asyncio
import os
import time
from bisect import bisect_left
from collections import defaultdict
from typing import Any

# Seconds; Prometheus' default buckets with finer steps below 5 ms, where most requests land.
LATENCY_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
REBALANCE_BUCKETS_S = (0.01, 0.05, 0.1, 0.5, 1.0, 3.0, 5.0, 10.0, 30.0, 60.0, 300.0)
STALL_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)


def all_servers(broker) -> list:
    """The broker's Kafka servers: one per listener where there are several (`broker.servers`), else
    the one `broker.server`."""
    servers = getattr(broker, "servers", None)
    return list(servers) if servers else [broker.server]


class Histogram:
    __slots__ = ("buckets", "counts", "sum", "count")

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)  # the last is +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.buckets, value)] += 1
        self.sum += value
        self.count += 1

    def cumulative(self) -> list[tuple[str, int]]:
        out, running = [], 0
        for bound, n in zip((*map(str, self.buckets), "+Inf"), self.counts):
            running += n
            out.append((bound, running))
        return out


class Observations:
    def __init__(self) -> None:
        self.requests: defaultdict[tuple[int, int], int] = defaultdict(int)  # (api key, version)
        self.errors: defaultdict[tuple[int, int], int] = defaultdict(int)
        self.error_answers: defaultdict[tuple[int, int], int] = defaultdict(int)  # (api key, Kafka error code)
        self.latency: dict[int, Histogram] = {}
        self.bytes_in: defaultdict[str, int] = defaultdict(int)
        self.bytes_out: defaultdict[str, int] = defaultdict(int)
        self.connections_opened = 0
        self.connections_closed = 0
        self.summary = ConnectionSummary()
        self.fsync = Histogram(LATENCY_BUCKETS_S)
        self.loop_stall = Histogram(STALL_BUCKETS_S)
        self.loop_stall_max_s = 0.0
        self.rebalances: defaultdict[tuple[str, str], int] = defaultdict(int)  # (group type, reason kind)
        self.rebalance_duration = Histogram(REBALANCE_BUCKETS_S)

    # -- hooks ---------------------------------------------------------------------------------

    def answer(self, api_key: int, response: Any) -> None:
        """Count every Kafka error code an answer carries, at any level: Kafka's ErrorsPerSec counts
        `AbstractResponse.errorCounts()`, so a NOT_COORDINATOR on one committed partition counts too."""
        _count_error_codes(response, api_key, self.error_answers, 0)

    def request(self, api_key: int, api_version: int, seconds: float, failed: bool) -> None:
        key = (api_key, api_version)
        self.requests[key] += 1
        if failed:
            self.errors[key] += 1
        hist = self.latency.get(api_key)
        if hist is None:
            hist = self.latency[api_key] = Histogram(LATENCY_BUCKETS_S)
        hist.observe(seconds)

    def timed_fsync(self, fd: int) -> None:
        """os.fsync, timed (runs on the flusher's worker thread; the counters tolerate that)."""
        started = time.perf_counter()
        os.fsync(fd)
        self.fsync.observe(time.perf_counter() - started)

    def rebalance(self, entry) -> None:
        """A history listener (coordinator/groups/history.py): count completed rebalances by reason."""
        from ...coordinator.groups.history import reason_kind

        if entry.kind != "rebalance":
            return
        self.rebalances[(entry.group_type, reason_kind(entry.reason))] += 1
        if entry.duration_ms is not None:  # a consumer group's epoch has no group-wide rebalance to time
            self.rebalance_duration.observe(entry.duration_ms / 1000)

    async def watch_event_loop(self, interval_s: float = 0.1) -> None:
        """Sleep `interval_s` again and again; oversleeping is the time the loop was blocked."""
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            await asyncio.sleep(interval_s)
            stall = max(loop.time() - started - interval_s, 0.0)
            self.loop_stall.observe(stall)
            self.loop_stall_max_s = max(self.loop_stall_max_s, stall)

    def connection_opened(self, listener: str, ip: str) -> None:
        self.connections_opened += 1
        self.summary.opened(listener, ip)

    def connection_closed(self) -> None:
        self.connections_closed += 1
        self.summary.closed += 1

    def reset_traffic(self) -> None:
        """A broker reset forgets per-topic figures (the topics are gone)."""
        self.bytes_in.clear()
        self.bytes_out.clear()


class ConnectionSummary:
    """Connections opened and closed since the last summary: one info line a minute instead of one
    debug line per connection (a health check or CLI call opens and closes one each time)."""

    MAX_PEERS = 1000  # addresses counted per interval; more are counted as "other"
    TOP = 5

    def __init__(self) -> None:
        self.closed = 0
        self.by_listener: defaultdict[str, int] = defaultdict(int)
        self.by_peer: defaultdict[str, int] = defaultdict(int)

    def opened(self, listener: str, ip: str) -> None:
        self.by_listener[listener] += 1
        if ip in self.by_peer or len(self.by_peer) < self.MAX_PEERS:
            self.by_peer[ip] += 1
        else:
            self.by_peer["other"] += 1

    def take(self, open_now: dict[str, int]) -> dict[str, Any] | None:
        """The line's fields for the interval that ends now (None when nothing opened or closed),
        and a new interval begins. `open_now`: connections open per listener."""
        opened = sum(self.by_listener.values())
        if not opened and not self.closed:
            return None
        top = sorted(self.by_peer.items(), key=lambda kv: (-kv[1], kv[0]))[:self.TOP]
        fields = {"opened": opened, "closed": self.closed, "open": sum(open_now.values()),
                  "open_by_listener": dict(open_now), "opened_by_listener": dict(self.by_listener),
                  "top_peers": dict(top), "peers": len(self.by_peer)}
        self.closed = 0
        self.by_listener.clear()
        self.by_peer.clear()
        return fields


# Per response class: its `*error_code` fields, and the others that may hold structs or lists.
_ERROR_FIELDS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}
_SCALARS = (int, str, bytes, bool, float, type(None))
# The annotations of a generated message's fields that never hold a struct (protocol/messages/).
_SCALAR_ANNOTATIONS = frozenset(
    f"{outer}{t}{inner}" for t in ("int", "str", "bytes", "bool", "float", "UUID")
    for outer, inner in (("", ""), ("", " | None"), ("list[", "]"), ("list[", "] | None"))
)


def _plan(cls: type, obj: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    names = getattr(obj, "__slots__", ())
    annotations = getattr(cls, "__annotations__", {})
    return (tuple(n for n in names if n.endswith("error_code")),
            tuple(n for n in names if not n.endswith("error_code") and annotations.get(n) not in _SCALAR_ANNOTATIONS))


def _count_error_codes(obj: Any, api_key: int, counts: defaultdict[tuple[int, int], int], depth: int) -> None:
    """Count the non-zero `*error_code` fields of a response, walking its structs and lists of structs
    (the answer to every request passes here, so the field names are sorted once per class)."""
    plan = _ERROR_FIELDS.get(type(obj))
    if plan is None:
        plan = _ERROR_FIELDS[type(obj)] = _plan(type(obj), obj)
    errors, others = plan
    for name in errors:
        value = getattr(obj, name, None)
        if value and isinstance(value, int):
            counts[(api_key, int(value))] += 1
    if depth >= 4:
        return
    for name in others:
        value = getattr(obj, name, None)
        if type(value) in _SCALARS:
            continue
        if type(value) is list:
            if value and hasattr(value[0], "__slots__"):
                for item in value:
                    _count_error_codes(item, api_key, counts, depth + 1)
        elif hasattr(value, "__slots__"):
            _count_error_codes(value, api_key, counts, depth + 1)
