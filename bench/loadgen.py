"""The request-rate load generator: pre-encoded frames, pipelined, counted by frame length.

    rate = await pipelined_rate(bootstrap, [frames for connection 1, frames for connection 2, ...],
                                api_key=12, version=4, window=64, seconds=5.0, broker_pid=pid)

Built to outrun the broker (issue 17: "the load generator must never be the bottleneck"):
- every request is encoded once before the clock starts; each connection cycles through a ring of
  frames whose correlation ids were patched in with struct.pack_into, concatenated into one buffer, so
  sending k more requests is one write of a memoryview slice, with no encoding and no copy;
- an asyncio.Protocol per connection (no streams, no futures, no task per request); on each read it
  walks the frame lengths and sends as many new requests as responses came in, keeping `window` in
  flight (windowed pipelining);
- a response is not decoded on the hot path, but it is checked: its bytes after the correlation id are
  looked up in a table of bodies already judged, and a body not seen before is decoded once and every
  error code in it collected (a rate of errors is not a rate: any error fails the figure). Heartbeat and
  OffsetCommit answers are byte-identical apart from the correlation id, so every response is checked
  for the price of a dict lookup. The correlation id of every response is checked against the ring's
  order too.

The generator's ceiling is measured against bench/echo.py (a Kafka-frame responder with canned answers
on the broker's core); `ceiling()` gives that figure with both processes' CPU.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import struct
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kbroker.bench import cores

_SIZE = struct.Struct(">i")
RING = 256                    # frames per connection ring; the window must not exceed it
_MAX_VERDICTS = 4096          # distinct response bodies remembered; past that, unseen ones are decoded
WARMUP_S = 0.3                # seconds of load before the clock starts (a JVM broker takes more: bench/brokers.py)


class GeneratorError(RuntimeError):
    pass


def error_codes(body: object) -> list[int]:
    """Every non-zero error_code anywhere in a decoded message (top level, topics, partitions, ...)."""
    found: list[int] = []
    stack = [body]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
            continue
        if not dataclasses.is_dataclass(item):
            continue
        for f in dataclasses.fields(item):
            v = getattr(item, f.name)
            if f.name == "error_code" and v:
                found.append(v)
            elif isinstance(v, list) or dataclasses.is_dataclass(v):
                stack.append(v)
    return found


def ring_frames(frames: Sequence[bytes], first_id: int = 1) -> list[bytes]:
    """max(RING, len(frames)) frames cycling through `frames` (so every one of them is sent), correlation
    ids first_id, first_id + 1, ... patched in."""
    out = []
    for i in range(max(RING, len(frames))):
        frame = bytearray(frames[i % len(frames)])
        struct.pack_into(">i", frame, 8, first_id + i)  # size(4) api_key(2) api_version(2) correlation_id(4)
        out.append(bytes(frame))
    return out


class _Judge:
    """Response bodies (the bytes after the correlation id) already decoded, and what they held."""

    def __init__(self, api_key: int, version: int) -> None:
        self.api_key = api_key
        self.version = version
        self.verdicts: dict[bytes, int] = {}   # body -> 0, or the first error code found in it
        self.errors: dict[int, int] = {}        # error code -> responses that carried it
        self.decoded = 0

    def judge(self, frame: bytes) -> int:
        from kbroker.protocol import framing

        self.decoded += 1
        try:
            _, body = framing.decode_response(self.api_key, self.version, frame)
        except Exception as e:  # an undecodable answer is an error of its own
            raise GeneratorError(f"undecodable response to api {self.api_key} v{self.version}: {e!r}")
        codes = error_codes(body)
        return codes[0] if codes else 0


@dataclass
class _Shared:
    judge: _Judge
    sending: bool = True
    answered: int = 0
    last_answer: float = 0.0
    failure: str | None = None


class _Pipe(asyncio.Protocol):
    """One connection: `window` requests in flight from a ring of pre-encoded frames."""

    def __init__(self, ring: list[bytes], window: int, shared: _Shared, done: asyncio.Future) -> None:
        self.buffer = memoryview(b"".join(ring) * 2)  # doubled, so any run of <= RING frames is one slice
        self.offsets = [0]
        for _ in range(2):
            for f in ring:
                self.offsets.append(self.offsets[-1] + len(f))
        self.ids = [f[8:12] for f in ring]
        self.ring = len(ring)
        self.window = window
        self.shared = shared
        self.done = done
        self.next = 0          # ring index of the next frame to send
        self.expect = 0        # ring index of the next response
        self.inflight = 0
        self.pending = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are not asyncio.Transport subclasses
        self._send(self.window)

    def _send(self, k: int) -> None:
        start = self.next
        assert self.transport is not None
        self.transport.write(self.buffer[self.offsets[start]:self.offsets[start + k]])
        self.next = (start + k) % self.ring
        self.inflight += k

    def data_received(self, data: bytes) -> None:
        buf = self.pending + data if self.pending else data
        n = len(buf)
        pos = got = 0
        expect = self.expect
        ids = self.ids
        shared = self.shared
        verdicts = shared.judge.verdicts
        while n - pos >= 4:
            end = pos + 4 + _SIZE.unpack_from(buf, pos)[0]
            if end > n:
                break
            if buf[pos + 4:pos + 8] != ids[expect]:
                self._fail(f"response out of order: correlation id {buf[pos + 4:pos + 8].hex()}, "
                           f"expected {ids[expect].hex()}")
                return
            body = buf[pos + 8:end]
            verdict = verdicts.get(body)
            if verdict is None:
                try:
                    verdict = shared.judge.judge(buf[pos + 4:end])
                except GeneratorError as e:
                    self._fail(str(e))
                    return
                if len(verdicts) < _MAX_VERDICTS:
                    verdicts[body] = verdict
            if verdict:
                shared.judge.errors[verdict] = shared.judge.errors.get(verdict, 0) + 1
            expect = (expect + 1) % self.ring
            pos = end
            got += 1
        self.pending = buf[pos:] if pos < n else b""
        if not got:
            return
        self.expect = expect
        self.inflight -= got
        shared.answered += got
        shared.last_answer = time.perf_counter()
        if shared.sending:
            self._send(got)
        elif self.inflight == 0 and not self.done.done():
            self.done.set_result(None)

    def _fail(self, why: str) -> None:
        self.shared.failure = self.shared.failure or why
        if not self.done.done():
            self.done.set_result(None)
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.shared.failure = self.shared.failure or f"connection closed by the broker ({exc!r})"
            self.done.set_result(None)


@dataclass
class Rate:
    """Answered requests per second over all connections, with the CPU both sides used meanwhile."""

    per_s: float
    answered: int
    seconds: float
    cpu: cores.CpuUse
    connections: int
    window: int
    decoded: int          # responses decoded to judge their error codes (the rest matched a judged body)
    rounds: tuple[float, ...] = ()  # when this is the median of rounds (`median_round`): every round's rate

    @property
    def broker_us_per_request(self) -> float:
        """Broker CPU per answered request: steadier than the rate on a machine other work shares."""
        return self.cpu.broker * self.seconds / max(1, self.answered) * 1e6

    @property
    def generator_us_per_request(self) -> float:
        return self.cpu.generator * self.seconds / max(1, self.answered) * 1e6

    def cpu_note(self) -> str:
        warn = " - GENERATOR-BOUND: this is the generator's limit, not the broker's" if self.cpu.generator_bound else ""
        us = self.broker_us_per_request
        per_core = f" (= {1e6 / us:,.0f}/s per busy broker core)" if us > 0 else ""
        rounds = (f"; median of {len(self.rounds)} alternating rounds: {' / '.join(f'{x:,.0f}' for x in self.rounds)}"
                  if self.rounds else "")
        return (f"{self.cpu}; broker {us:,.1f} us CPU per request{per_core}, generator "
                f"{self.generator_us_per_request:,.2f} us{warn}{rounds}")


def rounds_arg(text: str) -> int:
    """argparse type of a --rate-rounds flag: a count of rounds, one at least."""
    import argparse

    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"rounds must be 1 or more, not {n}")
    return n


def median_round(rates: list[Rate], *, peer: bool = False) -> Rate:
    """The round with the median rate, carrying every round's. Of an even count (a round failed) the
    middle one that favours the peer: the higher for it, the lower for kbroker."""
    ordered = sorted(rates, key=lambda r: r.per_s)
    middle = len(ordered) // 2 if peer else (len(ordered) - 1) // 2
    return dataclasses.replace(ordered[middle], rounds=tuple(r.per_s for r in rates))


async def pipelined_rate(bootstrap: str, frames_per_connection: Sequence[Sequence[bytes]], *, api_key: int,
                         version: int, window: int, seconds: float, broker_pid: int | None,
                         warmup_s: float = WARMUP_S) -> Rate:
    """Keep `window` requests in flight on each connection for `seconds` (after `warmup_s` not counted)."""
    if not 1 <= window <= RING:
        raise ValueError(f"window must be 1..{RING}")
    loop = asyncio.get_running_loop()
    host, port = bootstrap.rsplit(":", 1)
    shared = _Shared(_Judge(api_key, version))
    pipes: list[_Pipe] = []
    dones: list[asyncio.Future] = []
    for frames in frames_per_connection:
        done = loop.create_future()
        ring = ring_frames(frames)
        _, proto = await loop.create_connection(functools.partial(_Pipe, ring, window, shared, done), host, int(port))
        pipes.append(proto)
        dones.append(done)
    try:
        await asyncio.sleep(warmup_s)
        with cores.CpuMeter(broker_pid) as meter:
            counted_from = shared.answered
            started = time.perf_counter()
            await asyncio.sleep(seconds)
            shared.sending = False
            for p in pipes:
                if p.inflight == 0 and not p.done.done():
                    p.done.set_result(None)
            await asyncio.wait_for(asyncio.gather(*dones), timeout=30)
        elapsed = max(1e-9, shared.last_answer - started)
    finally:
        for p in pipes:
            if p.transport is not None:
                p.transport.close()
    if shared.failure:
        raise GeneratorError(shared.failure)
    if shared.judge.errors:
        raise GeneratorError(f"api {api_key} v{version} answered errors {shared.judge.errors} "
                             f"(of {shared.answered:,} responses): a rate of errors is not a rate")
    answered = shared.answered - counted_from
    return Rate(answered / elapsed, answered, elapsed, meter.use, len(pipes), window, shared.judge.decoded)


def run(coro_factory: Callable[[], object]) -> object:
    """Run a coroutine on uvloop when it is installed (as the broker does), else asyncio's loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro_factory())  # type: ignore[arg-type]
    if sys.version_info >= (3, 12):
        return uvloop.run(coro_factory())  # type: ignore[arg-type]
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro_factory())  # type: ignore[arg-type]


def ceiling(frames_per_connection: Sequence[Sequence[bytes]], *, api_key: int, version: int, window: int,
            seconds: float) -> Rate:
    """The generator's own ceiling: the same frames, connections and window against bench/echo.py."""
    from kbroker.bench import brokers

    with brokers.start_echo() as echo:
        result = run(lambda: pipelined_rate(echo.bootstrap, frames_per_connection, api_key=api_key,
                                            version=version, window=window, seconds=seconds,
                                            broker_pid=echo.pid))
    assert isinstance(result, Rate)
    return result
