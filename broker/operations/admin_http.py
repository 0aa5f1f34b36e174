"""The broker's HTTP endpoint (`--metrics-listen HOST:PORT`): metrics, health, group history,
and the test controls.

    GET  /health                      200 while the process serves
    GET  /ready                       200 once every __consumer_offsets partition is loaded and every
                                      topic of --create-topics exists; 503 with the reasons otherwise
    GET  /metrics                     Prometheus text format (broker/operations/metrics.py)
    GET  /v1/groups/<g>               the group's live state, with the rebalance in progress if any
    GET  /v1/groups/<g>/history       its last rebalances (and test controls), oldest first
    GET  /v1/groups/<g>/wait?members=N&stable=1&timeout=S
    POST /v1/test/...                 test controls (broker/operations/test_controls.py), 403 without --test-controls,
                                      401 without the token (Authorization: Bearer ...)

No web page may use it: the Host, Origin, Content-Type and token checks are
broker/security/http_guard.py's, made before anything else is read into JSON.

Kafka has no API for a group's rebalance history, and DescribeGroups cannot carry it without
clients noticing, so it is served here, on the same port as the metrics. A deliberately small
HTTP/1.1 server (one request per connection, JSON bodies) on the broker's own event loop: the
answers read live state, which is only safe between two coroutine steps of that loop.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import structlog

from .test_controls import HttpError

log = structlog.get_logger("kbroker.admin_http")
_MAX_BODY = 1 << 16
_MAX_HEADERS = 64
_SINGLE_HEADERS = ("host", "origin", "content-type", "content-length", "authorization")
_STATUS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
           405: "Method Not Allowed", 408: "Request Timeout", 409: "Conflict", 415: "Unsupported Media Type",
           500: "Internal Server Error", 503: "Service Unavailable"}


class AdminHttpServer:
    def __init__(self, broker: Any, host: str, port: int, *, test_controls: bool, guard: Any) -> None:
        self.broker = broker
        self.host, self.port = host, port
        self.test_controls = test_controls
        self.guard = guard  # broker/security/http_guard.py: no web page may drive or read this endpoint
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._on_connection, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        status, body, ctype = 500, b"", "application/json"
        extra = ""
        try:
            method, path, query, headers, raw = await asyncio.wait_for(_read_request(reader), 10)
            refusal = self.guard.refusal(method, _parts(path), headers)
            if refusal is not None:
                peer = writer.get_extra_info("peername")
                log.warning("admin_http_refused", peer=f"{peer[0]}:{peer[1]}" if peer else "?", method=method,
                            path=path, status=refusal.status, reason=refusal.reason, origin=headers.get("origin"))
                if refusal.status == 401:
                    extra = 'WWW-Authenticate: Bearer realm="kbroker test controls"\r\n'
                raise HttpError(refusal.status, refusal.reason)
            status, body, ctype = await self._route(method, path, query, _payload(raw))
        except HttpError as e:
            status, body = e.status, _json({"error": str(e)})
            if status == 400:  # malformed input or a control that cannot apply: one event
                log.warning("admin_http_rejected", error=str(e))
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError, ValueError) as e:
            status, body = 400, _json({"error": f"bad request: {e}"})
            peer = writer.get_extra_info("peername")
            log.warning("admin_http_rejected", peer=f"{peer[0]}:{peer[1]}" if peer else "?", error=str(e) or type(e).__name__)
        except Exception:  # a bug of ours: answer 500, keep serving
            log.exception("admin_http_error")
            body = _json({"error": "internal error"})
        try:
            head = (f"HTTP/1.1 {status} {_STATUS.get(status, 'OK')}\r\nContent-Type: {ctype}\r\n{extra}"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
            writer.write(head.encode() + body)
            await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _route(self, method: str, path: str, query: dict[str, str], payload: dict) -> tuple[int, bytes, str]:
        b = self.broker
        parts = _parts(path)
        if method == "GET" and parts == ["health"]:
            return 200, _json({"status": "up"}), "application/json"
        if method == "GET" and parts == ["ready"]:
            problems = b.readiness_problems()
            return (503 if problems else 200), _json({"ready": not problems, "waiting_for": problems}), \
                "application/json"
        if method == "GET" and parts == ["metrics"]:
            from . import metrics

            return 200, metrics.render(b), metrics.CONTENT_TYPE
        if parts[:2] == ["v1", "groups"] and method == "GET":
            return 200, _json(await self._groups(parts[2:], query)), "application/json"
        if parts[:2] == ["v1", "test"]:
            if not self.test_controls:
                raise HttpError(403, "test controls are off: start the broker with --test-controls")
            if method != "POST":
                raise HttpError(405, "test controls are POST requests")
            from .test_controls import apply_control

            return 200, _json(await apply_control(b, parts[2:], payload)), "application/json"
        raise HttpError(404, f"no such endpoint: {method} {path}")

    async def _groups(self, rest: list[str], query: dict[str, str]) -> Any:
        coordinator = self.broker.coordinator
        if not rest:
            return {"groups": sorted(g.group_id for g in coordinator.groups())}
        group_id = rest[0]
        if rest[1:] == ["history"]:
            entries = coordinator.history.entries(group_id)
            status = coordinator.group_status(group_id)
            if status is None and not entries:  # a group that is gone keeps its history; one never seen has none
                raise HttpError(404, f"group {group_id} does not exist and has no history")
            return {
                "group_id": group_id,
                "rebalances": [e.to_json() for e in entries],
                "in_progress": (status or {}).get("rebalance_in_progress"),
            }
        if rest[1:] == ["wait"]:
            return await wait_for_group(coordinator, group_id, members=int(query.get("members", "-1")),
                                        stable="stable" in query and query["stable"] not in ("0", "false"),
                                        timeout_s=float(query.get("timeout", "30")))
        if rest[1:]:
            raise HttpError(404, f"no such group endpoint: {'/'.join(rest[1:])}")
        status = coordinator.group_status(group_id)
        if status is None:
            raise HttpError(404, f"group {group_id} does not exist")
        return status


async def wait_for_group(coordinator: Any, group_id: str, *, members: int, stable: bool, timeout_s: float) -> dict:
    """Return once the group has `members` members (any count if negative) and, if asked, is
    Stable; raise 408 with its state and why it is stuck otherwise."""
    deadline = time.monotonic() + max(timeout_s, 0)
    while True:
        status = coordinator.group_status(group_id)
        if status is not None:
            count_ok = members < 0 or len(status["members"]) == members
            if count_ok and (not stable or status["state"] == "Stable"):
                return status
        if time.monotonic() >= deadline:
            if status is None:
                raise HttpError(408, f"group {group_id} does not exist after {timeout_s:g} s")
            stuck = status.get("rebalance_in_progress")
            why = f"; {stuck['why']}" if stuck else ""
            raise HttpError(408, f"group {group_id} is {status['state']} with {len(status['members'])} member(s) "
                                 f"after {timeout_s:g} s{why}")
        await asyncio.sleep(0.02)


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str], dict[str, str], bytes]:
    line = (await reader.readline()).decode("latin-1").strip()
    method, target, _version = line.split(" ", 2)
    headers: dict[str, str] = {}
    while True:
        header = (await reader.readline()).decode("latin-1").strip()
        if not header:
            break
        name, _, value = header.partition(":")
        name = name.strip().lower()
        if name in headers and name in _SINGLE_HEADERS:  # two Hosts: which one would a check have seen?
            raise HttpError(400, f"more than one {name} header")
        if len(headers) >= _MAX_HEADERS:
            raise HttpError(400, "too many headers")
        headers[name] = value.strip()
    length = int(headers.get("content-length", "0"))
    if length > _MAX_BODY:
        raise HttpError(400, "body too large")
    raw = await reader.readexactly(length) if length else b""
    url = urlsplit(target)
    query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
    return method.upper(), url.path, query, headers, raw


def _payload(raw: bytes) -> dict:
    payload = json.loads(raw) if raw.strip() else {}
    if not isinstance(payload, dict):
        raise HttpError(400, "the body must be a JSON object")
    return payload


def _parts(path: str) -> list[str]:
    return [unquote(p) for p in path.strip("/").split("/") if p]


def _json(value: Any) -> bytes:
    return json.dumps(value, default=str).encode() + b"\n"
