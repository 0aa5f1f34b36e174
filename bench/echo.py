"""A trivial Kafka-frame responder: the load generator's ceiling is measured against it.

    python -m bench.echo --port PORT

Each request frame is answered at once with a canned response of its API and version (the response
message with every field at its default: error code 0), carrying the request's correlation id. No
request is decoded beyond the 8 bytes of key, version and correlation id, and all answers to one read
leave in one write. bench/loadgen.py's `ceiling()` starts it pinned to the broker's core (as brokers
are) and drives it exactly as it drives a broker: what it reaches is what the generator can deliver,
so a broker figure well below it is the broker's, not the generator's.
"""

from __future__ import annotations

import argparse
import asyncio
import struct

_HEAD = struct.Struct(">ihhi")   # size, api key, api version, correlation id
_SIZE = struct.Struct(">i")


def canned(api_key: int, version: int) -> bytes:
    """The response frame of (api_key, version) with default fields, correlation id 0."""
    from kbroker.protocol import framing

    spec = framing.response_spec(api_key)
    if spec is None:
        raise ValueError(f"no response message for api key {api_key}")
    return framing.encode_response(api_key, version, 0, spec.struct.cls())


class Responder(asyncio.Protocol):
    answers: dict[tuple[int, int], tuple[bytes, bytes]] = {}   # (key, version) -> (size prefix, after the id)

    def __init__(self) -> None:
        self.pending = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are not asyncio.Transport subclasses

    def data_received(self, data: bytes) -> None:
        buf = self.pending + data if self.pending else data
        n = len(buf)
        pos = 0
        out: list[bytes] = []
        answers = self.answers
        while n - pos >= 4:
            end = pos + 4 + _SIZE.unpack_from(buf, pos)[0]
            if end > n:
                break
            _, key, version, _cid = _HEAD.unpack_from(buf, pos)
            answer = answers.get((key, version))
            if answer is None:
                frame = canned(key, version)
                answer = answers[(key, version)] = (frame[:4], frame[8:])
            out += (answer[0], buf[pos + 8:pos + 12], answer[1])
            pos = end
        self.pending = buf[pos:] if pos < n else b""
        if out and self.transport is not None:
            self.transport.write(b"".join(out))


async def serve(port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Responder, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    try:
        asyncio.run(serve(args.port))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
