"""Test controls behind `POST /v1/test/...` (only with `--test-controls`): faults on demand for
any Kafka client, time on demand, and a reset that empties a warm broker between tests.

Each control is one `test_control_applied` log event and, when it concerns a group, one line of
that group's history. Group changes run in the group's actor (coordinator/groups/classic/controls.py), so a
client sees exactly what a real session expiry or rebalance shows it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable

import structlog

from ...coordinator.groups.classic import controls
from ...protocol.errors import ErrorCode, KafkaError

log = structlog.get_logger("kbroker.test_controls")
E = ErrorCode


class ControlError(Exception):
    pass


PARTITION_APIS = ("Produce", "Fetch", "Append")  # Append: a coordinator's own write (__share_group_state...)


class PartitionFaults:
    """The next K Produce or Fetch requests of a topic-partition, or coordinator appends to it, fail
    with a chosen error."""

    def __init__(self) -> None:
        self.pending: dict[tuple[str, str, int], list] = {}  # (api, topic, partition) -> [count, error]

    def take(self, api: str, topic: str, partition: int) -> ErrorCode | None:
        if not self.pending:
            return None
        entry = self.pending.get((api, topic, partition))
        if entry is None:
            return None
        entry[0] -= 1
        if entry[0] <= 0:
            del self.pending[(api, topic, partition)]
        return entry[1]


class FsyncGate:
    """Holds every fsync of the log segments while `held` (`POST /v1/test/storage/fsync/hold`): the
    records are written and the fsync called, for real, but it does not return, so nothing becomes
    durable, no acknowledgement under `--flush always` leaves, and the high watermark stays where it
    was, as on a disk that is slow to flush. A hold ends at `release` or after its `seconds` (60 by
    default), whichever comes first, so a forgotten hold cannot wedge the broker; a stop releases it."""

    def __init__(self, fsync: Callable[[int], None]) -> None:
        self._fsync = fsync
        self._open = threading.Event()
        self._open.set()
        self._lock = threading.Lock()
        self.waiting = 0  # fsyncs held at the gate now
        self._timer: asyncio.TimerHandle | None = None

    def __call__(self, fd: int) -> None:  # on the flusher's worker threads
        if not self._open.is_set():
            with self._lock:
                self.waiting += 1
            try:
                self._open.wait()
            finally:
                with self._lock:
                    self.waiting -= 1
        self._fsync(fd)

    @property
    def held(self) -> bool:
        return not self._open.is_set()

    def hold(self, seconds: float) -> None:
        self._open.clear()
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(seconds, self.release)

    def release(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._open.set()


def _error_code(value: Any) -> ErrorCode:
    try:
        return ErrorCode(int(value)) if str(value).lstrip("-").isdigit() else ErrorCode[str(value).upper()]
    except (KeyError, ValueError):
        raise ControlError(f"unknown Kafka error {value!r}") from None


class HttpError(Exception):
    """An answer other than 200 for the admin endpoint (admin_http.py), with its status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def apply_control(broker: Any, path: list[str], body: dict) -> dict:
    try:
        return await _apply(broker, path, body)
    except ControlError as e:
        raise HttpError(400, str(e)) from None


async def _apply(broker: Any, path: list[str], body: dict) -> dict:
    coordinator = broker.coordinator
    match path:
        case ["groups", group_id, "rebalance"]:
            return _result(await coordinator.control(controls.ForceRebalance(group_id, str(body.get("reason") or
                                                                                  "requested by test control"))))
        case ["groups", group_id, "members", member_id, "expire"]:
            return _result(await coordinator.control(controls.ExpireMember(group_id, member_id)))
        case ["groups", group_id, "expire-sessions"]:
            return _result(await coordinator.control(controls.ExpireSessions(group_id)))
        case ["groups", group_id, "not-coordinator"]:
            seconds = float(body.get("seconds", 10))
            await coordinator.submit(controls.CoordinatorMove(group_id, "unload"))
            coordinator.faults.not_coordinator_until[group_id] = coordinator.clock.now_ms() + int(seconds * 1000)
            asyncio.get_running_loop().call_later(
                seconds, lambda: coordinator.submit(controls.CoordinatorMove(group_id, "load")))
            coordinator.note_control(group_id, f"NOT_COORDINATOR for {seconds:g} s (a coordinator move)")
            return {"ok": True, "detail": f"group {group_id} answers NOT_COORDINATOR for {seconds:g} s"}
        case ["groups", group_id, "join-delay"]:
            ms = int(body.get("ms", 0))
            if ms > 0:
                coordinator.faults.join_delay_ms[group_id] = ms
            else:
                coordinator.faults.join_delay_ms.pop(group_id, None)
            coordinator.note_control(group_id, f"JoinGroup answers delayed by {ms} ms")
            return {"ok": True, "detail": f"group {group_id}: JoinGroup answers delayed by {ms} ms"}
        case ["groups", group_id, "fail"]:
            api = str(body.get("api", ""))
            if api not in controls.API_NAMES:
                raise ControlError(f"api must be one of {', '.join(sorted(controls.API_NAMES))}, not {api!r}")
            count = int(body.get("count", 1))
            error = _error_code(body.get("error", "COORDINATOR_NOT_AVAILABLE"))
            coordinator.faults.fail_next[(group_id, api)] = [count, error]
            coordinator.note_control(group_id, f"next {count} {api} request(s) fail with {error.name}")
            return {"ok": True, "detail": f"group {group_id}: next {count} {api} fail with {error.name}"}
        case ["topics", topic, "partitions", partition, "fail"]:
            api = str(body.get("api", ""))
            if api not in PARTITION_APIS:
                raise ControlError(f"api must be one of {', '.join(PARTITION_APIS)}, not {api!r}")
            count = int(body.get("count", 1))
            error = _error_code(body.get("error", "NOT_LEADER_OR_FOLLOWER"))
            broker.partition_faults.pending[(api, topic, int(partition))] = [count, error]
            detail = f"next {count} {api} request(s) of {topic}-{partition} fail with {error.name}"
            log.info("test_control_applied", control=detail)
            return {"ok": True, "detail": detail}
        case ["topics", topic, "partitions", partition, "elect"]:
            epoch = broker.catalogue.elect(topic, int(partition))
            detail = f"{topic}-{partition} re-elected its leader in epoch {epoch}"
            log.info("test_control_applied", control=detail)
            return {"ok": True, "detail": detail, "leader_epoch": epoch}
        case ["storage", "fsync", action]:
            return _fsync_control(broker.fsync_gate, action, body)
        case ["transactions", "hold-markers"]:
            # Markers of a transaction prepared from now on wait this long (0: not at all), so a test
            # can stop the broker between PrepareCommit/PrepareAbort and the markers.
            ms = max(int(body.get("ms", 0)), 0)
            broker.transactions.marker_hold_ms = ms
            detail = f"transaction markers held back {ms} ms after their prepare"
            log.info("test_control_applied", control=detail)
            return {"ok": True, "detail": detail}
        case ["connections", "drop"]:
            client_id = body.get("client_id")
            from .observe import all_servers

            dropped = sum(server.drop_connections(client_id) for server in all_servers(broker))
            log.info("test_control_applied", control="drop connections", client_id=client_id, dropped=dropped)
            return {"ok": True, "dropped": dropped}
        case ["retention", "run"]:
            return await _run_now(broker, str(body.get("what", "offsets")))
        case ["reset"]:
            return await reset(broker)
        case ["cluster", *rest]:
            return await _cluster_control(broker, rest, body)
    raise ControlError(f"no such test control: {'/'.join(path)}")


async def _cluster_control(broker: Any, path: list[str], body: dict) -> dict:
    """Several nodes (`--nodes N`): broker/cluster.py's controls, each one `cluster_control` event."""
    cluster = broker.cluster
    if cluster is None:
        raise ControlError("this broker is one node: start it with --nodes N for the cluster controls")
    node = body.get("node")
    try:
        match path:
            case ["describe"]:
                return {"ok": True, **cluster.describe()}
            case ["nodes", node_id, "stop"]:
                return await cluster.stop_node(int(node_id))
            case ["nodes", node_id, "start"]:
                return await cluster.start_node(int(node_id))
            case ["partitions", topic, partition, "leader"]:
                return await cluster.move_leader(topic, int(partition), None if node is None else int(node))
            case ["groups", group_id, "coordinator"]:
                return await cluster.move_coordinator(group_id, None if node is None else int(node))
            case ["shuffle"]:
                seed = body.get("seed")
                return await cluster.shuffle(None if seed is None else int(seed))
            case ["elect-preferred"]:
                return await cluster.elect_preferred()
            case ["nodes", "add"]:
                return await cluster.add_node()
            case ["nodes", node_id, "cut-off"]:
                return cluster.cut_off(int(node_id), str(body["client_id"]), cut=bool(body.get("cut", True)))
            case ["requests"]:
                return {"ok": True, **cluster.request_counts()}
    except KeyError as e:
        raise ControlError(f"missing {e.args[0]!r} in the request body") from None
    except (ValueError, KafkaError) as e:  # broker/cluster.py's ClusterControlError is a ValueError
        raise ControlError(str(e)) from None
    raise ControlError(f"no such cluster control: {'/'.join(path)}")


def _fsync_control(gate: FsyncGate, action: str, body: dict) -> dict:
    if action == "hold":
        seconds = float(body.get("seconds", 60))
        gate.hold(seconds)
        detail = f"fsyncs of the log segments held for up to {seconds:g} s"
    elif action == "release":
        gate.release()
        detail = "fsyncs of the log segments released"
    elif action == "status":
        detail = f"fsyncs {'held' if gate.held else 'running'}"
    else:
        raise ControlError(f"fsync control must be hold, release or status, not {action!r}")
    if action != "status":
        log.info("test_control_applied", control=detail)
    return {"ok": True, "detail": detail, "held": gate.held, "waiting": gate.waiting}


def _result(result: controls.ControlResult) -> dict:
    if result.error is not E.NONE:
        raise ControlError(f"{result.error.name}: {result.detail}")
    return {"ok": True, "detail": result.detail}


async def _run_now(broker: Any, what: str) -> dict:
    now_ms = broker.clock.wall_ms()
    if what == "offsets":
        count = await broker.coordinator.run_offsets_retention()
        detail = f"offsets retention checked {count} group(s)"
    elif what in ("logs", "compaction"):
        # The broker's own periodic pass: retention on the loop, then compaction in a worker thread.
        deleted = await broker.logs.run_maintenance(now_ms)
        detail = f"log retention removed {deleted} segment(s); compaction ran"
    else:
        raise ControlError(f"what must be offsets, logs or compaction, not {what!r}")
    log.info("test_control_applied", control=f"run {what} now", detail=detail)
    return {"ok": True, "detail": detail}


async def reset(broker: Any) -> dict:
    """Back to an empty broker: every non-internal topic, group and committed offset goes; the
    internal state stays consistent (groups leave through tombstones, like DeleteGroups)."""
    from ...protocol.topic_names import is_internal_topic
    from ..partitions.startup_topics import ensure_topics

    started = time.monotonic()
    coordinator = broker.coordinator
    groups = sorted({g.group_id for g in coordinator.groups()})
    for group_id in groups:
        status = coordinator.group_status(group_id)
        if status and status["members"]:
            await coordinator.expire_sessions(group_id)
    deleted = await coordinator.delete_groups(groups)
    left = [d.group_id for d in deleted if d.error not in (E.NONE, E.GROUP_ID_NOT_FOUND)]
    topics = [name for name in broker.catalogue.topics() if not is_internal_topic(name)]
    for name in topics:
        await broker.catalogue.delete_topic_async(name)
    ensure_topics(broker.catalogue, broker.seed_topics)  # --create-topics are the suite's base: back, empty
    coordinator.history.forget()
    coordinator.faults.clear()
    broker.partition_faults.pending.clear()
    broker.observations.reset_traffic()
    took_ms = round(1000 * (time.monotonic() - started), 1)
    log.info("test_control_applied", control="reset", topics=len(topics), groups=len(groups), took_ms=took_ms)
    if left:
        raise ControlError(f"groups not deleted: {', '.join(left)}")
    return {"ok": True, "topics_deleted": len(topics), "groups_deleted": len(groups), "took_ms": took_ms}
