"""Live capture of sarama's (IBM/sarama at Kafka 0.10.2's versions) and kafkajs's request frames through a
recording proxy (the same script that made tests/golden/), each of which must decode and re-encode to the
very same bytes: the golden files stay true to the clients installed now."""

from __future__ import annotations

import asyncio
import shutil

import pytest

from kbroker.protocol import codec, framing
from kbroker.protocol.messages import request_header
from kbroker.tests.golden import capture
from kbroker.tests.reference.client_matrix import go_available


def _available() -> list[str]:
    clients = []
    if go_available() is None:
        clients.append("sarama")
    if shutil.which("node") and (capture.REPO / "tests/clients/kafkajs/node_modules/kafkajs").is_dir():
        clients.append("kafkajs")
    return clients


def test_live_frames_round_trip(tmp_path):
    clients = _available()
    if not clients:
        pytest.skip("neither Go 1.26 for sarama (make go-modules) nor kafkajs (make kafkajs) is installed")
    written = asyncio.run(capture.main(clients, tmp_path))
    for client in clients:
        apis = {p.stem.split("-", 1)[1].rsplit("-v", 1)[0] for p in written if p.name.startswith(client + "-")}
        assert {"produce", "fetch", "join_group", "sync_group", "offset_commit", "offset_fetch"} <= apis, (client, apis)
    for path in written:
        frame = bytes.fromhex(path.read_text().strip())
        req = framing.decode_request_header(frame)
        body = framing.decode_body(req)
        assert req.body_io.read() == b"", path.name
        head = codec.encode(request_header.SPEC, framing.request_header_version(req.spec, req.api_version), req.header)
        assert head + codec.encode(req.spec, req.api_version, body) == frame, path.name
