"""Clients that send a Fetch and never read the answer, against a real broker process: the answers
they leave unread are bounded broker-wide (broker/unsent_answers.py), every answer still makes
progress, and the allowance comes back once they read."""

from __future__ import annotations

import socket
import time

import pytest

from kbroker.protocol import framing
from kbroker.protocol import record_batch as rb
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.test_dormant_partitions import scrape
from kbroker.tests.integration.test_request_bounds import create_topic, peak_rss_bytes, produce
from kbroker.tests.integration.wire import Wire, read_frame

MiB = 1 << 20
FETCH_MAX = 16 * MiB  # the broker's fetch.max.bytes here: unread answers may hold 4 x 16 MiB in all
SLOW = 16  # silent clients: 256 MiB of answers unread without the bound


ADMIN_PORT = free_port()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("slow") / "data", "--offsets-topic-num-partitions", "1",
                         "--fetch-max-bytes", str(FETCH_MAX), "--flush", "never",
                         "--metrics-listen", f"127.0.0.1:{ADMIN_PORT}")
    yield proc
    proc.stop()


def unread_bytes() -> float:
    return scrape(f"http://127.0.0.1:{ADMIN_PORT}")[("kbroker_unread_answer_bytes", ())]


def _fetch(correlation: int) -> bytes:
    return framing.encode_request(1, 11, correlation, "slow", FetchRequest(
        max_wait_ms=0, min_bytes=1, max_bytes=2**31 - 1, topics=[FetchTopic(topic="big", partitions=[
            FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=2**31 - 1)])]))


def _records_of(frame: bytes) -> bytes:
    correlation, response = framing.decode_response(1, 11, frame)
    [partition] = response.responses[0].partitions
    assert partition.error_code == ErrorCode.NONE
    return bytes(partition.records)


def test_unread_fetch_answers_are_bounded_across_connections(broker):
    wire = Wire(broker.bootstrap)
    create_topic(wire, "big")
    value = bytes(100_000)
    for _ in range(24):  # 24 MB: more than one answer's worth
        batch = rb.encode_batch([rb.Record(i, int(time.time() * 1000), None, value) for i in range(10)])
        assert produce(wire, "big", batch).error_code == ErrorCode.NONE
    before = peak_rss_bytes(broker.proc.pid)
    silent = []
    for i in range(SLOW):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", broker.port))
        sock.sendall(_fetch(i + 1))
        silent.append(sock)
    time.sleep(2)  # every Fetch answered into its transport's buffer, none of them read
    grown = peak_rss_bytes(broker.proc.pid) - before
    # Without the bound each answer held 16 MiB: 256 MiB. With it: 64 MiB of full answers, then one
    # batch (1 MB) each, plus what the allocator keeps.
    assert grown < 150 * MiB, f"the broker grew {grown / MiB:.0f} MiB for {SLOW} unread answers"
    assert broker.events("fetch_answers_shrunk")
    assert FETCH_MAX < unread_bytes() < 4 * FETCH_MAX + SLOW * 2 * MiB  # the gauge sees them (the kernel holds some)
    sizes = []
    for sock in silent:
        sock.settimeout(30)
        records = _records_of(read_frame(sock))
        headers = [h for _, h in rb.iter_batches(records)]
        assert headers and headers[0].base_offset == 0  # every answer makes progress from the offset asked
        sizes.append(len(records))
        sock.close()
    assert max(sizes) > 8 * MiB and min(sizes) < 2 * MiB  # full answers first, then one batch each
    # once read, the allowance is back: a new Fetch gets a full answer
    assert unread_bytes() == 0
    wire.sock.sendall(_fetch(99))
    assert len(_records_of(wire.read_frame())) > 8 * MiB
    wire.close()
