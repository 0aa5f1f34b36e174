"""A request frame the broker decodes (FrameIO) hands out big `records` as views of the frame, not
copies; every other decoder still gets bytes, and a frame too short for its records is malformed."""

from __future__ import annotations

import os
from io import BytesIO

import pytest

from kbroker.protocol import codec, record_batch as rb
from kbroker.protocol.messages import produce_request as pr
from kbroker.protocol.wire import RECORDS_VIEW_FROM, FrameIO, MalformedMessage


def _frame(records: bytes, version: int) -> bytes:
    request = pr.ProduceRequest(transactional_id=None, acks=-1, timeout_ms=1000, topic_data=[
        pr.TopicProduceData(name="t", partition_data=[pr.PartitionProduceData(index=0, records=records)])])
    return codec.encode(pr.SPEC, version, request)


def _records(frame: bytes, version: int, io_type: type[BytesIO]) -> object:
    return codec.decode(pr.SPEC, version, io_type(frame)).topic_data[0].partition_data[0].records


@pytest.mark.parametrize("version", [3, 9, 10])  # classic and flexible encodings
def test_big_records_are_views_of_the_frame_only_in_a_frame_io(version: int) -> None:
    big = rb.encode_batch([rb.Record(i, 1000 + i, None, os.urandom(1000)) for i in range(RECORDS_VIEW_FROM // 1000 + 1)])
    small = rb.encode_batch([rb.Record(0, 1000, b"k", b"v")])
    frame = _frame(big, version)
    view = _records(frame, version, FrameIO)
    assert isinstance(view, memoryview) and view.readonly and view == big
    assert view.obj is frame  # the frame itself: no copy was made
    assert type(_records(frame, version, BytesIO)) is bytes
    assert type(_records(_frame(small, version), version, FrameIO)) is bytes


def test_a_frame_cut_inside_its_records_is_malformed() -> None:
    big = rb.encode_batch([rb.Record(i, 1000 + i, None, os.urandom(1000)) for i in range(RECORDS_VIEW_FROM // 1000 + 1)])
    frame = _frame(big, 9)
    with pytest.raises(MalformedMessage):
        codec.decode(pr.SPEC, 9, FrameIO(frame[:-100]))
