"""The hand-written steady ConsumerGroupHeartbeat codec (protocol/consumer_heartbeat_fast.py) reads
and writes exactly what the generated codec reads and writes: object for object, byte for byte,
and the same failure for a damaged frame."""

from __future__ import annotations

import uuid
from io import BytesIO

from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.protocol import codec, consumer_heartbeat_fast as fast_codec
from kbroker.protocol.messages import consumer_group_heartbeat_request as q
from kbroker.protocol.messages import consumer_group_heartbeat_response as r

I32 = st.integers(-(2**31), 2**31 - 1)
strings = (st.text(max_size=8) | st.text(min_size=120, max_size=140) | st.text(alphabet="é€", max_size=70)
           | st.text(alphabet="ab", min_size=125, max_size=128))  # the one-byte length limit (126 bytes)
nullable = st.none() | strings
partitions = st.lists(st.builds(q.TopicPartitions, topic_id=st.uuids(), partitions=st.lists(I32, max_size=3)),
                      max_size=2)


@st.composite
def requests(draw: st.DrawFn) -> tuple[q.ConsumerGroupHeartbeatRequest, int]:
    version = draw(st.sampled_from(fast_codec.VERSIONS))
    steady = draw(st.booleans())  # half of them the shape the fast path reads
    request = q.ConsumerGroupHeartbeatRequest(
        group_id=draw(strings), member_id=draw(strings), member_epoch=draw(I32),
        instance_id=draw(nullable), rack_id=draw(nullable), rebalance_timeout_ms=draw(I32),
        subscribed_topic_names=None if steady else draw(st.none() | st.lists(strings, max_size=3)),
        subscribed_topic_regex=draw(nullable) if version >= 1 else None, server_assignor=draw(nullable),
        topic_partitions=None if steady else draw(st.none() | partitions),
    )
    return request, version


responses = st.builds(
    r.ConsumerGroupHeartbeatResponse, throttle_time_ms=I32, error_code=st.integers(-1, 130), error_message=nullable,
    member_id=nullable, member_epoch=I32, heartbeat_interval_ms=I32,
    assignment=st.none() | st.none() | st.builds(r.Assignment, topic_partitions=st.lists(st.builds(
        r.TopicPartitions, topic_id=st.uuids(), partitions=st.lists(I32, max_size=3)), max_size=2)),
)


def _parsers(version: int) -> tuple:
    generic = codec.compiled_message(q.SPEC, version).parsefunc
    return generic, fast_codec.request_parser(version, lambda: generic)


def _parsed(parse, data: bytes):  # noqa: ANN001, ANN202
    io = BytesIO(b"\x01\x02\x03" + data)  # a frame's header before the body: parsing starts at its end
    io.seek(3)
    try:
        return parse(io, None)
    except Exception as e:  # noqa: BLE001 - both must fail alike
        return ("raised", type(e))


@settings(max_examples=400, deadline=None)
@given(requests())
def test_a_heartbeat_request_decodes_as_the_generated_codec_decodes_it(drawn) -> None:  # noqa: ANN001
    request, version = drawn
    data = codec.encode(q.SPEC, version, request)
    generic, fast = _parsers(version)
    assert _parsed(fast, data) == _parsed(generic, data) == request


@settings(max_examples=400, deadline=None)
@given(requests(), st.data())
def test_damaged_or_unusual_requests_decode_or_fail_as_the_generated_codec_says(drawn, data) -> None:  # noqa: ANN001
    request, version = drawn
    raw = bytearray(codec.encode(q.SPEC, version, request))
    how = data.draw(st.sampled_from(["cut", "flip", "tag"]))
    if how == "cut":
        raw = raw[:data.draw(st.integers(0, len(raw)))]
    elif how == "flip":
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    else:  # a top-level tagged field (unknown tag 5, two bytes), which the fast path leaves alone
        raw[-1:] = b"\x01\x05\x02ab"
    generic, fast = _parsers(version)
    assert _parsed(fast, bytes(raw)) == _parsed(generic, bytes(raw))


@settings(max_examples=400, deadline=None)
@given(responses, st.sampled_from(fast_codec.VERSIONS))
def test_a_heartbeat_response_encodes_as_the_generated_codec_encodes_it(response, version: int) -> None:  # noqa: ANN001
    generic = codec.compiled_message(r.SPEC, version).buildfunc
    fast, plain = BytesIO(b"head"), BytesIO(b"head")
    fast.seek(4)
    plain.seek(4)
    outcomes = []
    for io, build in ((fast, fast_codec.response_builder(lambda: generic)), (plain, generic)):
        try:
            build(response, io, None)
            outcomes.append(io.getvalue())
        except Exception as e:  # noqa: BLE001 - both must fail alike
            outcomes.append(("raised", type(e)))
    assert outcomes[0] == outcomes[1]


def test_the_broker_serves_consumer_group_heartbeat_through_the_fast_path() -> None:
    from kbroker.broker.network import answers
    from kbroker.broker.network.answers import ApiEntry
    from kbroker.broker.apis import consumer_group_heartbeat
    from kbroker.broker.network.router import Router

    assert answers._CONSUMER_HEARTBEAT_FAST_VERSIONS == fast_codec.VERSIONS == consumer_group_heartbeat.VERSIONS
    router = Router()
    router.register(consumer_group_heartbeat)
    for version in fast_codec.VERSIONS:
        entry = ApiEntry(router, 68, version)
        assert entry.parse is not codec.compiled_message(q.SPEC, version).parsefunc
        assert entry.parse is not None and entry.build is not None


def test_a_steady_heartbeat_never_reaches_the_generated_codec() -> None:
    def generic(*_args):  # noqa: ANN002, ANN202
        raise AssertionError("the generated codec was asked")

    for version in fast_codec.VERSIONS:
        request = q.ConsumerGroupHeartbeatRequest("group", str(uuid.uuid4()), 7)
        assert _parsed(fast_codec.request_parser(version, lambda: generic), codec.encode(q.SPEC, version, request)) == request
        response = r.ConsumerGroupHeartbeatResponse(0, 0, None, request.member_id, 7, 5000, None)
        io = BytesIO()
        fast_codec.response_builder(lambda: generic)(response, io, None)
        assert io.getvalue() == codec.encode(r.SPEC, version, response)
