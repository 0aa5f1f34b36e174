"""The hand-written fast paths for OffsetCommit write exactly what the generated codec writes.

protocol/records/codec.py packs the common OffsetCommit record (key v0, value v4) at fixed offsets;
the generated codec stays the owner of the format, so every record hypothesis makes must come out
byte for byte as the generic encoder writes it (or be left to it), and read back as itself.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.protocol.records.codec import decode_record, encode_offset_commit_generic, encode_record
from kbroker.protocol.records.classic_records import OffsetCommitRecord

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(max_size=40) | st.text(alphabet="abc-_.", min_size=1, max_size=8)
metadata = st.text(max_size=140) | st.just("") | st.text(alphabet="é€", max_size=70)

records = st.builds(
    OffsetCommitRecord, group=names, topic=names, partition=I32, offset=I64, leader_epoch=I32, metadata=metadata,
    commit_timestamp=I64, expire_timestamp=st.none() | I64,
)


@settings(max_examples=500, deadline=None)
@given(records)
def test_a_commit_record_is_encoded_as_the_generated_codec_encodes_it(record: OffsetCommitRecord) -> None:
    assert encode_record(record) == encode_offset_commit_generic(record)


@settings(max_examples=200, deadline=None)
@given(records)
def test_a_commit_record_reads_back_as_itself(record: OffsetCommitRecord) -> None:
    key, value = encode_record(record)
    back = decode_record(key, value)
    expected_expiry = record.expire_timestamp if record.expire_timestamp is not None and record.expire_timestamp >= 0 else None
    if record.expire_timestamp is not None:  # value v1 has no leader epoch
        assert back == OffsetCommitRecord(record.group, record.topic, record.partition, record.offset, -1,
                                          record.metadata, record.commit_timestamp, expected_expiry)
    else:
        assert back == record


def test_the_common_commit_takes_the_fast_path() -> None:
    # What a consumer commits: no expiry, short metadata. The generic codec is not asked.
    record = OffsetCommitRecord("g", "t", 3, 42, 7, "meta", 1_700_000_000_000, None)
    from kbroker.protocol.records import codec as record_codec

    assert record_codec._encode_offset_commit(record) == encode_offset_commit_generic(record)
    assert record_codec._encode_offset_commit(OffsetCommitRecord("g", "t", 3, 42, 7, "m" * 127, 0, None)) is None
    assert record_codec._encode_offset_commit(OffsetCommitRecord("g", "t", 3, 42, 7, "m", 0, 5)) is None


blobs = st.binary(max_size=300)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(blobs, st.none() | blobs), min_size=1, max_size=150), I64.filter(lambda t: t >= -(2**62)))
def test_a_batch_of_coordinator_records_is_the_batch_encode_batch_builds(
        encoded: list[tuple[bytes, bytes | None]], now: int) -> None:
    from kbroker.protocol.record_batch import Record, encode_batch, encode_keyed_batch

    assert encode_keyed_batch(encoded, now) == encode_batch(
        [Record(offset=i, timestamp=now, key=key, value=value) for i, (key, value) in enumerate(encoded)])


# -- OffsetCommit v8/v9 requests and responses (protocol/offset_commit_fast.py) ---------------------

from io import BytesIO  # noqa: E402

from kbroker.protocol import codec, offset_commit_fast  # noqa: E402
from kbroker.protocol.messages import offset_commit_request as ocq  # noqa: E402
from kbroker.protocol.messages import offset_commit_response as ocr  # noqa: E402

strings = st.text(max_size=8) | st.text(min_size=120, max_size=140)
requests = st.builds(
    ocq.OffsetCommitRequest, group_id=strings, generation_id_or_member_epoch=I32, member_id=strings,
    group_instance_id=st.none() | strings,
    topics=st.lists(st.builds(ocq.OffsetCommitRequestTopic, name=strings, partitions=st.lists(st.builds(
        ocq.OffsetCommitRequestPartition, partition_index=I32, committed_offset=I64, committed_leader_epoch=I32,
        committed_metadata=st.none() | strings), max_size=4)), max_size=3) | st.lists(st.builds(
            ocq.OffsetCommitRequestTopic, name=st.just("t"), partitions=st.lists(st.builds(
                ocq.OffsetCommitRequestPartition, partition_index=I32), min_size=126, max_size=130)), max_size=1),
)
responses = st.builds(
    ocr.OffsetCommitResponse, throttle_time_ms=I32,
    topics=st.lists(st.builds(ocr.OffsetCommitResponseTopic, name=strings, partitions=st.lists(st.builds(
        ocr.OffsetCommitResponsePartition, partition_index=I32, error_code=st.integers(-1, 120)), max_size=4)),
        max_size=3) | st.lists(st.builds(ocr.OffsetCommitResponseTopic, name=st.just("t"), partitions=st.lists(
            st.builds(ocr.OffsetCommitResponsePartition, partition_index=I32), min_size=126, max_size=130)),
            max_size=1),
)


def _parsers(version: int) -> tuple:
    generic = codec.compiled_message(ocq.SPEC, version).parsefunc
    return generic, offset_commit_fast.request_parser(lambda: generic)


def _parsed(parse, data: bytes, at: int = 3):
    io = BytesIO(b"\x01\x02\x03" + data)  # a frame's header before the body: parsing starts at its end
    io.seek(at)
    try:
        return parse(io, None)
    except Exception as e:  # noqa: BLE001 - both must fail alike
        return ("raised", type(e))


@settings(max_examples=400, deadline=None)
@given(requests, st.sampled_from(offset_commit_fast.VERSIONS))
def test_an_offset_commit_request_decodes_as_the_generated_codec_decodes_it(request, version: int) -> None:
    data = codec.encode(ocq.SPEC, version, request)
    generic, fast = _parsers(version)
    assert _parsed(fast, data) == _parsed(generic, data) == request


@settings(max_examples=300, deadline=None)
@given(requests, st.sampled_from(offset_commit_fast.VERSIONS), st.data())
def test_damaged_or_unusual_requests_decode_or_fail_as_the_generated_codec_says(request, version: int, data) -> None:
    raw = bytearray(codec.encode(ocq.SPEC, version, request))
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
@given(responses, st.sampled_from(offset_commit_fast.VERSIONS))
def test_an_offset_commit_response_encodes_as_the_generated_codec_encodes_it(response, version: int) -> None:
    generic = codec.compiled_message(ocr.SPEC, version).buildfunc
    fast, plain = BytesIO(b"head"), BytesIO(b"head")
    fast.seek(4)
    plain.seek(4)
    offset_commit_fast.response_builder(lambda: generic)(response, fast, None)
    generic(response, plain, None)
    assert fast.getvalue() == plain.getvalue()


def test_the_broker_serves_offset_commit_v8_and_v9_through_the_fast_path() -> None:
    from kbroker.broker.network.answers import ApiEntry
    from kbroker.broker.network.router import Router

    from kbroker.broker.network import answers
    from kbroker.broker.apis import offset_commit

    assert answers._OFFSET_COMMIT_FAST_VERSIONS == offset_commit_fast.VERSIONS

    router = Router()
    router.register(offset_commit)
    for version in (7, 8, 9, 10):
        entry = ApiEntry(router, 8, version)
        generic = codec.compiled_message(ocq.SPEC, version).parsefunc
        assert (entry.parse is generic) == (version not in offset_commit_fast.VERSIONS)
        assert entry.parse is not None and entry.build is not None


def test_a_consumers_commit_never_reaches_the_generated_codec() -> None:
    def generic(*_args):
        raise AssertionError("the generated codec was asked")

    request = ocq.OffsetCommitRequest("group", 3, "member-1", None, -1, [ocq.OffsetCommitRequestTopic(
        "topic", partitions=[ocq.OffsetCommitRequestPartition(0, 42, 5, ""), ocq.OffsetCommitRequestPartition(1, 7, -1, None)])])
    assert _parsed(offset_commit_fast.request_parser(lambda: generic), codec.encode(ocq.SPEC, 8, request)) == request
    response = ocr.OffsetCommitResponse(0, [ocr.OffsetCommitResponseTopic("topic", partitions=[
        ocr.OffsetCommitResponsePartition(0, 0), ocr.OffsetCommitResponsePartition(1, 25)])])
    io = BytesIO()
    offset_commit_fast.response_builder(lambda: generic)(response, io, None)
    assert io.getvalue() == codec.encode(ocr.SPEC, 8, response)
