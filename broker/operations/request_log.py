"""The request log: one `request` line per answered request, as Kafka's kafka.request.logger at DEBUG.

Off by default (`--log-requests`, KBROKER_LOG_REQUESTS, `log_requests` in the TOML file, or the
image's KAFKA_LOG4J_LOGGERS naming kafka.request.logger=DEBUG or TRACE). Off, the TCP shell
(broker/network/server.py) holds None here, and each request costs one `is not None` check at each of
the four places it passes (run, encode, answer, write): nothing is timed, counted or allocated for it.

On, each request's line is written when its answer is handed to the connection's transport, as
Kafka logs a request once its response is sent. Its fields (Kafka's "Completed request" line):
`api` (Kafka's name), `api_key`, `version`, `correlation_id`, `client_id`, `peer` (the client's
address), `principal`, `listener`, and in milliseconds:
  - `queue_ms`: from the connection's last read to the handler's start. Requests of a connection
    run in order (as in Kafka), so one read while a handler of that connection still ran (an async
    one) waits here; a request read and run at once shows about 0. (kbroker has no queue between a
    network thread and handler threads as Kafka does; this is the wait a request can have.)
  - `handling_ms`: from the handler's start to its answer, waits for an fsync or a purgatory included
    (Kafka's localTime plus remoteTime).
  - `send_ms`: from the answer to its bytes handed to the transport: the wait behind the earlier
    answers of its connection, which leave in request order, and behind a client that reads slowly.
`response_bytes` is the answer's size (0: none, as Produce with acks=0), `errors` the non-zero error
codes of the answer by name and count (omitted when none), `closed` true when the request closed its
connection instead of an answer. No request or response body is logged: a SaslAuthenticate line
shows its principal, never its token, password or SCRAM messages.

The line is written at level debug whatever --log-level says (a logger of its own, as Kafka's
request logger has its own level), in the broker's format (JSON or console).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import Any

import structlog

from .observe import _count_error_codes
from ...protocol.errors import ErrorCode
from ...protocol.messages import MODULES

# api key -> Kafka's name of the API ("Produce", "SaslAuthenticate")
API_NAMES = {key: cls.removesuffix("Request") for _, cls, kind, key in MODULES if kind == "request" and key is not None}


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def error_summary(api_key: int, response: Any) -> dict[str, int] | None:
    """The non-zero `*error_code` fields of a response by name and count (the same walk as the
    error counters of broker/operations/observe.py); None when there are none."""
    counts: defaultdict[tuple[int, int], int] = defaultdict(int)
    _count_error_codes(response, api_key, counts, 0)
    if not counts:
        return None
    return {_error_name(code): n for (_, code), n in sorted(counts.items())}


def answer_size(answer: Any) -> int:
    """The bytes of an encoded answer: one frame, a list of buffers, or none (None, CLOSE)."""
    if answer is None:
        return 0
    if type(answer) is bytes:
        return len(answer)
    if type(answer) is list:
        return sum(len(part) for part in answer)
    return 0


class RequestLog:
    """What the TCP shell calls when request logging is on (see the module docstring). The shell
    stamps each request (`queue_s`, `started`, `answered`, `errors`: slots of its Request) and hands
    the requests whose answers it wrote to `sent`."""

    def __init__(self) -> None:
        # a debug-level logger of its own: the request lines pass whatever the broker's --log-level
        self._log = structlog.wrap_logger(None, wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
                                          logger_factory_args=("kbroker.request",))

    errors = staticmethod(error_summary)

    @staticmethod
    def begin(request: Any, queue_s: float, started: float) -> None:
        """A request's handler starts (broker/network/connection.py's Request has slots for these)."""
        request.queue_s, request.started, request.errors = queue_s, started, None

    def sent(self, protocol: Any, requests: list[Any]) -> None:
        """Write one line for each request whose answer was just handed to `protocol`'s transport."""
        now = time.perf_counter()
        server = protocol.server
        conn = protocol.conn
        auth = conn.auth if conn is not None else None
        principal = auth.principal if auth is not None else "User:ANONYMOUS"
        for request in requests:
            answered = request.answered
            fields: dict[str, Any] = {
                "api": API_NAMES.get(request.api_key, str(request.api_key)), "api_key": request.api_key,
                "version": request.api_version, "correlation_id": request.correlation_id,
                "client_id": request.client_id, "peer": protocol.peer, "principal": principal,
                "listener": server.listener, "queue_ms": round(request.queue_s * 1000.0, 3),
                "handling_ms": round((answered - request.started) * 1000.0, 3),
                "send_ms": round((now - answered) * 1000.0, 3),
                "response_bytes": answer_size(request.answer),
            }
            if request.errors:
                fields["errors"] = request.errors
            if request.answer is not None and type(request.answer) not in (bytes, list):
                fields["closed"] = True
            self._log.debug("request", **fields)
        requests.clear()
