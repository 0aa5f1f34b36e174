"""One connection speaking the Kafka protocol with kbroker's own codec, for protocol-level tests.

    from kbroker.tests.integration.wire import Wire

    wire = Wire(broker.bootstrap, client_id="my-test")
    response = wire.call(api_key, version, request_body)
"""

from __future__ import annotations

import socket

from kbroker.protocol.frames import FrameReader, recv_frame

_ANY_SIZE = (1 << 31) - 1


def read_frame(sock: socket.socket, frames: FrameReader | None = None) -> bytes:
    """One size-prefixed frame, without its size. Pass the connection's reader when more frames
    may follow back to back (a fresh one could drop bytes of the next frame)."""
    return recv_frame(sock.recv, frames if frames is not None else FrameReader(_ANY_SIZE))


def closed_by_peer(sock: socket.socket, timeout: float = 5.0) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


class Wire:
    def __init__(self, bootstrap: str, client_id: str = "wire-test", timeout: float = 30.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.client_id = client_id
        self.correlation = 0
        self.frames = FrameReader(_ANY_SIZE)

    def send(self, api_key: int, version: int, body) -> int:
        from kbroker.protocol import framing

        self.correlation += 1
        self.sock.sendall(framing.encode_request(api_key, version, self.correlation, self.client_id, body))
        return self.correlation

    def read_frame(self) -> bytes:
        return read_frame(self.sock, self.frames)

    def receive(self, api_key: int, version: int):
        from kbroker.protocol import framing

        correlation, body = framing.decode_response(api_key, version, self.read_frame())
        assert correlation == self.correlation
        return body

    def call(self, api_key: int, version: int, body):
        self.send(api_key, version, body)
        return self.receive(api_key, version)

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        return closed_by_peer(self.sock, timeout)

    def close(self) -> None:
        self.sock.close()
