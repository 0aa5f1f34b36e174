"""The server answers for its own failures (issue 10, section 6), over a real socket.

A handler that raises, or a response that cannot be encoded, gets the API's UNKNOWN_SERVER_ERROR
answer (its route's `failed_response`: the module's own, else the response with its top-level
`error_code` set) and the connection stays open; an
over-long error message is cut to what an int16 string holds; only an API with no error shape at
all closes the connection. The handlers here are stand-ins whose failure is the point: no real
handler is known to raise, which is why this is a unit test of the server.
"""

from __future__ import annotations

import asyncio
import types

from kbroker.broker.apis import offset_commit
from kbroker.broker.network.router import Deferred, Router
from kbroker.broker.network.server import KafkaServer
from kbroker.protocol import framing
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.create_topics_request import CreateTopicsRequest
from kbroker.protocol.messages.create_topics_response import CreatableTopicResult, CreateTopicsResponse
from kbroker.protocol.messages.heartbeat_request import HeartbeatRequest
from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kbroker.protocol.messages.metadata_response import MetadataResponse, MetadataResponseTopic
from kbroker.protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)


async def _raise(ctx, request):
    raise RuntimeError("a bug in a handler")


async def _unencodable_metadata(ctx, request):
    return MetadataResponse(topics=[MetadataResponseTopic(name=None)])  # null name below v12


def _metadata_failed(ctx, request, error):
    return MetadataResponse(topics=[MetadataResponseTopic(error_code=error, name=t.name or "")
                                    for t in request.topics])


async def _long_message(ctx, request):
    return CreateTopicsResponse(topics=[CreatableTopicResult(name="t", error_code=ErrorCode.INVALID_CONFIG,
                                                             error_message="é" * 40000)])


async def _deferred_raise(ctx, request):
    async def later():
        raise RuntimeError("a bug after the deferral")

    return Deferred(later())


def _router(**handlers) -> Router:
    router = Router()
    router.register(types.SimpleNamespace(API_KEY=12, VERSIONS=(0, 4), handle=handlers["heartbeat"]))
    router.register(types.SimpleNamespace(API_KEY=3, VERSIONS=(0, 12), handle=_unencodable_metadata,
                                          failed_response=_metadata_failed))
    router.register(types.SimpleNamespace(API_KEY=19, VERSIONS=(2, 7), handle=handlers["create_topics"]))
    router.register(types.SimpleNamespace(API_KEY=8, VERSIONS=(2, 9), handle=_deferred_raise,
                                          failed_response=offset_commit.failed_response))
    return router


async def _call(reader, writer, api_key, version, body, correlation):
    writer.write(framing.encode_request(api_key, version, correlation, "t", body))
    await writer.drain()
    size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 10), "big")
    got, response = framing.decode_response(api_key, version, await reader.readexactly(size))
    assert got == correlation
    return response


async def _served(create_topics):
    server = KafkaServer(types.SimpleNamespace(), _router(heartbeat=_raise, create_topics=create_topics),
                         "127.0.0.1", 0, 1 << 20)
    port = await server.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    return server, reader, writer


async def test_failures_become_error_answers_on_an_open_connection() -> None:
    server, reader, writer = await _served(_long_message)
    try:
        beat = await _call(reader, writer, 12, 3, HeartbeatRequest("g", 1, "m"), 1)
        assert beat.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
        meta = await _call(reader, writer, 3, 9, MetadataRequest([MetadataRequestTopic(name="a")]), 2)
        assert [(t.name, t.error_code) for t in meta.topics] == [("a", ErrorCode.UNKNOWN_SERVER_ERROR)]
        created = await _call(reader, writer, 19, 4, CreateTopicsRequest(), 3)  # v4: int16 strings
        message = created.topics[0].error_message
        assert created.topics[0].error_code == ErrorCode.INVALID_CONFIG
        assert len(message.encode()) <= 32767 and message.startswith("éé")
        request = OffsetCommitRequest("g", topics=[OffsetCommitRequestTopic("t", partitions=[OffsetCommitRequestPartition(0, 5)])])
        commit = await _call(reader, writer, 8, 8, request, 4)  # a Deferred whose wait raised
        assert [(t.name, p.partition_index, p.error_code) for t in commit.topics for p in t.partitions] == [
            ("t", 0, ErrorCode.UNKNOWN_SERVER_ERROR)]
        assert (await _call(reader, writer, 12, 3, HeartbeatRequest("g", 1, "m"), 5)).error_code
    finally:
        writer.close()
        await server.shutdown(1.0)


async def test_an_api_with_no_error_shape_closes_only_that_connection() -> None:
    server, reader, writer = await _served(_raise)
    try:
        writer.write(framing.encode_request(19, 4, 1, "t", CreateTopicsRequest()))
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 10) == b""
        reader2, writer2 = await asyncio.open_connection("127.0.0.1", server.port)
        beat = await _call(reader2, writer2, 12, 3, HeartbeatRequest("g", 1, "m"), 1)
        assert beat.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
        writer2.close()
    finally:
        writer.close()
        await server.shutdown(1.0)


def test_every_served_api_has_an_encodable_error_answer_at_every_version() -> None:
    """So no handler failure of ours closes a connection: each API, each version, has an error shape."""
    from kbroker.broker.app import build_router
    from kbroker.broker.network.router import RequestContext

    router = build_router()
    missing = []
    for key, low, high in router.supported():
        route = router.route(key)
        spec = framing.request_spec(key)
        for version in range(low, high + 1):
            request = spec.struct.cls()
            if key == 0:
                request.acks = -1  # acks=0 gets no answer at all, as in Kafka
            ctx = RequestContext(key, version, 1, "t", "127.0.0.1:1", None)
            body = route.failed_response(ctx, request, ErrorCode.UNKNOWN_SERVER_ERROR)
            if body is None:
                missing.append((key, version))
                continue
            _, decoded = framing.decode_response(key, version, framing.encode_response(key, version, 1, body)[4:])
            assert decoded is not None
    assert missing == []
