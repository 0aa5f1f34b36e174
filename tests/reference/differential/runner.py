"""The wire level of the differential checks: the same crafted requests, sent raw to Apache Kafka and to
kbroker, their answers decoded with kbroker's generated codec and compared field by field.

A check is one coroutine `run(session)` that sends requests through `session.call` (and opens more
connections with `session.connect` when members must wait on each other). The runner plays it once
against each broker, both at the same time, each in a `Session` of its own; every call's outcome (the
decoded response, "closed" when the broker closed the connection, "no answer") is recorded under the
label the check gave it. The two recordings are normalised (normalise.py) and compared:

    result = await run_checks([kafka, kbroker], checks)
    for r in result: print(r.check.id, r.equal, r.diff_text())

Nothing here branches on which broker it talks to: a check that needs the brokers to differ in how it
is set up is not a check.
"""

from __future__ import annotations

import asyncio
import json
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kbroker.protocol import framing

from .normalise import Normaliser, to_plain

CALL_TIMEOUT_S = 30.0
CLOSED = {"outcome": "connection closed"}
NO_ANSWER = {"outcome": "no answer"}
_SIZE = struct.Struct(">i")


@dataclass(frozen=True)
class Target:
    name: str        # "kafka" or "kbroker": only for reports
    bootstrap: str


class Closed(Exception):
    pass


class Conn:
    """One raw connection: requests framed by kbroker's codec, answers read in order."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str) -> None:
        self.reader, self.writer, self.client_id = reader, writer, client_id
        self.correlation = 0
        self.closed = False
        self.lock = asyncio.Lock()

    @classmethod
    async def open(cls, bootstrap: str, client_id: str) -> Conn:
        host, port = bootstrap.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        return cls(reader, writer, client_id)

    async def send(self, api_key: int, version: int, body: Any) -> int:
        self.correlation += 1
        self.writer.write(framing.encode_request(api_key, version, self.correlation, self.client_id, body))
        await self.writer.drain()
        return self.correlation

    async def send_raw(self, frame: bytes) -> None:
        """A frame without its size prefix, as it is (a crafted header, a truncated body)."""
        self.writer.write(_SIZE.pack(len(frame)) + frame)
        await self.writer.drain()

    async def read_frame(self, timeout: float) -> bytes:
        try:
            size = _SIZE.unpack(await asyncio.wait_for(self.reader.readexactly(4), timeout))[0]
            return await asyncio.wait_for(self.reader.readexactly(size), timeout)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            self.closed = True
            raise Closed() from exc

    async def call(self, api_key: int, version: int, body: Any, timeout: float = CALL_TIMEOUT_S) -> Any:
        async with self.lock:
            correlation = await self.send(api_key, version, body)
            frame = await self.read_frame(timeout)
            got, response = framing.decode_response(api_key, version, frame)
            assert got == correlation, f"correlation {got}, expected {correlation}"
            return response

    def close(self) -> None:
        self.closed = True
        self.writer.close()


@dataclass
class Step:
    seq: int
    label: str
    api_key: int
    version: int
    plain: Any  # the response as plain data, or CLOSED / NO_ANSWER


class Session:
    """One broker's side of one check: its connections and what each call got."""

    def __init__(self, target: Target, check_id: str, shared: dict[str, Any] | None = None,
                 client_id: str = "differential") -> None:
        self.target = target
        self.shared = shared if shared is not None else {}  # what the suite's setup left for every check
        self.check_id = check_id
        self.client_id = client_id
        self.steps: list[Step] = []
        self.conns: list[Conn] = []
        self._default: Conn | None = None
        self._seq = 0
        self.values: dict[str, Any] = {}  # what a check keeps between its steps (a topic id, a member id)

    async def connect(self, client_id: str | None = None) -> Conn:
        conn = await Conn.open(self.target.bootstrap, client_id or self.client_id)
        self.conns.append(conn)
        return conn

    async def call(self, api_key: int, version: int, body: Any, label: str | None = None, *,
                   conn: Conn | None = None, project: Callable[[Any], Any] | None = None,
                   timeout: float = CALL_TIMEOUT_S, record: bool = True) -> Any:
        """Send one request and record its outcome under `label` (default: the API's name and version).
        Returns the decoded response, or None when the broker closed the connection or did not answer.
        `project` keeps what the check compares of a response that also shows the broker's other state
        (ListGroups lists every group on the broker, the other checks' too)."""
        seq = self._seq
        self._seq += 1
        if conn is None:
            if self._default is None or self._default.closed:
                self._default = await self.connect()
            conn = self._default
        name = framing.request_spec(api_key).name.removesuffix("Request")  # type: ignore[union-attr]
        label = label or f"{name} v{version}"
        try:
            response = await conn.call(api_key, version, body, timeout)
        except Closed:
            plain: Any = CLOSED
            response = None
        except asyncio.TimeoutError:
            plain, response = NO_ANSWER, None
            conn.close()
        else:
            spec = framing.response_spec(api_key)
            assert spec is not None
            plain = to_plain(spec.struct, version, response, spec.is_flexible(version))
            if project is not None:
                plain = project(plain)
        if record:
            self.steps.append(Step(seq, label, api_key, version, plain))
        return response

    async def call_until(self, done: Callable[[Any], bool], api_key: int, version: int, body: Any, label: str,
                         *, tries: int = 100, record: bool = True, **kwargs: Any) -> Any:
        """`call`, repeated (0.05 s apart, unrecorded) until `done(response)` or `tries` run out; the last
        answer is recorded. For what a broker applies after it answers (Kafka's controller publishes a
        quota or a credential to its broker a moment after AlterClientQuotas returns)."""
        for _ in range(tries - 1):
            response = await self.call(api_key, version, body, label, record=False, **kwargs)
            if response is not None and done(response):
                break
            await asyncio.sleep(0.05)
        return await self.call(api_key, version, body, label, record=record, **kwargs)

    def note(self, label: str, value: Any) -> None:
        """Record an observation that is not a response (what a check worked out from several)."""
        self.steps.append(Step(self._seq, label, -1, -1, value))
        self._seq += 1

    def close(self) -> None:
        for conn in self.conns:
            if not conn.closed:
                conn.close()

    def observed(self) -> dict[str, Any]:
        """Every step's outcome, normalised in the order the check issued them, by label."""
        normalise = Normaliser()
        out: dict[str, Any] = {}
        for step in sorted(self.steps, key=lambda s: s.seq):
            label = step.label
            n = 2
            while label in out:
                label = f"{step.label} #{n}"
                n += 1
            out[label] = normalise(step.plain)
        return out


CheckFn = Callable[[Session], Awaitable[None]]


@dataclass(frozen=True)
class Check:
    id: str                    # unique, stable: the key of a listed difference
    run: CheckFn
    api: str = ""              # the API it is about ("" for the coordinator's rows)
    version: int | None = None
    table: str = "apis"        # "apis" or the coordinator table it belongs to
    steps: str = ""            # the coordinator rows' steps, in words, for the table
    serial: bool = False       # shares state with other checks (the group ""): run alone, in order, last


@dataclass
class Result:
    check: Check
    kafka: dict[str, Any]
    kbroker: dict[str, Any]
    error: str | None = None   # the check itself failed on a broker (a bug of the check or a hang)
    seconds: float = 0.0
    diffs: list[tuple[str, Any, Any]] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return self.error is None and not self.diffs

    def summary(self, side: str) -> str:
        """One line per differing path, as the differences file lists it."""
        if self.error is not None:
            return self.error if side == "kbroker" else "(check failed)"
        index = 1 if side == "kafka" else 2
        return "; ".join(f"{d[0]}={short(d[index])}" for d in self.diffs)

    def answers(self, side: str) -> str:
        """Each step's answer in a few words, for the coordinator tables: its error codes' names (and
        the generation or epoch it carried), "connection closed", or "answered"."""
        observed = self.kafka if side == "kafka" else self.kbroker
        return "; ".join(f"{label}: {_answer(plain)}" for label, plain in observed.items())

    def diff_text(self) -> str:
        if self.error is not None:
            return f"{self.check.id}: check failed: {self.error}"
        lines = [f"{self.check.id}:"]
        for path, a, b in self.diffs:
            lines.append(f"  {path}\n    kafka:   {short(a, 400)}\n    kbroker: {short(b, 400)}")
        return "\n".join(lines)


def _answer(plain: Any) -> str:
    if isinstance(plain, dict) and "outcome" in plain:
        return str(plain["outcome"])
    codes: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key in ("error_code", "partition_error_code") and isinstance(item, str):
                    name = item.split(" ", 1)[-1]
                    if name not in codes:
                        codes.append(name)
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(plain)
    text = ", ".join(codes) or "answered"
    if isinstance(plain, dict):
        for key, name in (("generation_id", "generation"), ("member_epoch", "epoch")):
            if isinstance(plain.get(key), int) and plain[key] >= 0 and codes == ["NONE"]:
                text += f" ({name} {plain[key]})"
        if isinstance(plain.get("groups"), list) and plain["groups"] and "group_state" in plain["groups"][0]:
            text += f" ({plain['groups'][0]['group_state']})"
    return text


def short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def compare(a: Any, b: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Field-by-field differences between two normalised observations."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in list(a) + [k for k in b if k not in a]:
            sub = f"{path}.{key}" if path else key
            if key not in a or key not in b:
                out.append((sub, a.get(key, "(absent)"), b.get(key, "(absent)")))
            else:
                out += compare(a[key], b[key], sub)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += compare(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [(path, a, b)]


async def _play(target: Target, check: Check, shared: dict[str, Any]) -> Session:
    session = Session(target, check.id, shared)
    try:
        await check.run(session)
    finally:
        session.close()
    return session


async def run_check(kafka: Target, kbroker: Target, check: Check,
                    shared: dict[str, dict[str, Any]] | None = None) -> Result:
    shared = shared if shared is not None else {kafka.name: {}, kbroker.name: {}}
    started = time.monotonic()
    outcomes = await asyncio.gather(_play(kafka, check, shared[kafka.name]),
                                    _play(kbroker, check, shared[kbroker.name]), return_exceptions=True)
    sessions: list[Session] = []
    errors = []
    for target, outcome in zip((kafka, kbroker), outcomes):
        if isinstance(outcome, BaseException):
            errors.append(f"{target.name}: {type(outcome).__name__}: {outcome}")
        else:
            sessions.append(outcome)
    if errors:
        return Result(check, {}, {}, error="; ".join(errors), seconds=time.monotonic() - started)
    a, b = sessions[0].observed(), sessions[1].observed()
    return Result(check, a, b, diffs=compare(a, b), seconds=time.monotonic() - started)


async def run_checks(kafka: Target, kbroker: Target, setups: list[Check], checks: list[Check],
                     parallel: int = 8) -> list[Result]:
    """The setups one after the other (what they leave in `session.shared` every check may use; they are
    compared like checks), then every check against both brokers, `parallel` at a time (each uses names of
    its own), results in the order given."""
    shared: dict[str, dict[str, Any]] = {kafka.name: {}, kbroker.name: {}}
    results = [await run_check(kafka, kbroker, setup, shared) for setup in setups]
    gate = asyncio.Semaphore(parallel)

    async def one(check: Check) -> Result:
        async with gate:
            return await run_check(kafka, kbroker, check, shared)

    by_id = {c.id: r for c, r in zip((c for c in checks if not c.serial),
                                      await asyncio.gather(*(one(c) for c in checks if not c.serial)))}
    for check in checks:
        if check.serial:
            by_id[check.id] = await run_check(kafka, kbroker, check, shared)
    return results + [by_id[c.id] for c in checks]
