"""Clients that send a Fetch and never take the answer, against a real broker process: the answers
they leave unread are bounded broker-wide (broker/network/unread_answers.py), every answer still makes
progress, the allowance comes back once they read, and a connection that takes nothing for
connections.max.idle.ms is aborted, not left closing forever."""

from __future__ import annotations

import socket
import ssl
import time

import pytest

from kbroker.protocol import framing
from kbroker.protocol import record_batch as rb
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.security_setup import start_secure_broker
from kbroker.tests.integration.test_dormant_partitions import scrape
from kbroker.tests.integration.test_request_bounds import create_topic, peak_rss_bytes, produce
from kbroker.tests.integration.wire import Wire, read_frame

MiB = 1 << 20
FETCH_MAX = 16 * MiB  # the broker's fetch.max.bytes here: unread answers may hold 4 x 16 MiB in all
SLOW = 16  # silent clients: 256 MiB of answers unread without the bound


def start(tmp_path_factory, *extra: str) -> tuple[BrokerProcess, str]:
    admin = f"127.0.0.1:{free_port()}"
    proc = BrokerProcess(tmp_path_factory.mktemp("slow") / "data", "--offsets-topic-num-partitions", "1",
                         "--fetch-max-bytes", str(FETCH_MAX), "--flush", "never", "--metrics-listen", admin, *extra)
    return proc, f"http://{admin}"


def unread_bytes(admin_url: str) -> float:
    return scrape(admin_url)[("kbroker_unread_answer_bytes", ())]


def settled(admin_url: str, timeout: float = 20.0) -> float:
    """The unread-bytes gauge once it has stopped moving for half a second."""
    deadline = time.monotonic() + timeout
    last = unread_bytes(admin_url)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = unread_bytes(admin_url)
        if now == last:
            return now
        last = now
    return last


def fill(broker: BrokerProcess, megabytes: int) -> None:
    wire = Wire(broker.bootstrap)
    create_topic(wire, "big")
    value = bytes(100_000)
    for _ in range(megabytes):
        batch = rb.encode_batch([rb.Record(i, int(time.time() * 1000), None, value) for i in range(10)])
        assert produce(wire, "big", batch).error_code == ErrorCode.NONE
    wire.close()


def fetch_frame(correlation: int) -> bytes:
    return framing.encode_request(1, 11, correlation, "slow", FetchRequest(
        max_wait_ms=0, min_bytes=1, max_bytes=2**31 - 1, topics=[FetchTopic(topic="big", partitions=[
            FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=2**31 - 1)])]))


def silent_client(broker: BrokerProcess, correlation: int, half_close: bool = False) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", broker.port))
    sock.sendall(fetch_frame(correlation))
    if half_close:
        sock.shutdown(socket.SHUT_WR)  # the broker answers, then closes: and waits for it to read
    return sock


def records_of(frame: bytes) -> bytes:
    _, response = framing.decode_response(1, 11, frame)
    [partition] = response.responses[0].partitions
    assert partition.error_code == ErrorCode.NONE
    return bytes(partition.records)


def test_unread_fetch_answers_are_bounded_across_connections(tmp_path_factory):
    broker, admin = start(tmp_path_factory)
    try:
        fill(broker, 24)  # 24 MB: more than one answer's worth
        before = peak_rss_bytes(broker.proc.pid)
        silent = [silent_client(broker, i + 1, half_close=i == 0) for i in range(SLOW)]  # back to back
        held = settled(admin)
        grown = peak_rss_bytes(broker.proc.pid) - before
        # Without the bound each answer held 16 MiB: 256 MiB. With it: 64 MiB of full answers, then one
        # batch (1 MB) each, plus what the allocator keeps.
        assert grown < 150 * MiB, f"the broker grew {grown / MiB:.0f} MiB for {SLOW} unread answers"
        assert 3 * FETCH_MAX < held < 4 * FETCH_MAX + SLOW * 2 * MiB  # the half-closed one's bytes too
        assert broker.events("fetch_answers_shrunk")
        sizes = []
        for sock in silent:
            sock.settimeout(30)
            records = records_of(read_frame(sock))
            headers = [h for _, h in rb.iter_batches(records)]
            assert headers and headers[0].base_offset == 0  # every answer makes progress from the offset asked
            sizes.append(len(records))
            sock.close()
        assert max(sizes) > 8 * MiB and min(sizes) < 2 * MiB  # full answers first, then one batch each
        # once taken, the allowance is back: a new Fetch gets a full answer
        assert settled(admin) == 0
        wire = Wire(broker.bootstrap)
        wire.sock.sendall(fetch_frame(99))
        assert len(records_of(wire.read_frame())) > 8 * MiB
        wire.close()
    finally:
        broker.stop()


def silent_tls_client(sb, correlation: int) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=str(sb.pki.ca))
    ctx.load_cert_chain(str(sb.pki.client_cert), str(sb.pki.client_key))
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.settimeout(30)
    raw.connect(("127.0.0.1", sb.ports["SSL"]))
    sock = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    sock.sendall(fetch_frame(correlation))
    return sock


def read_some(sock: ssl.SSLSocket, n: int) -> bytes:
    """Up to `n` bytes: fewer if no more come for a second (a shrunk answer can be shorter)."""
    head = b""
    sock.settimeout(1.0)
    try:
        while len(head) < n:
            head += sock.recv(n - len(head))
    except TimeoutError:
        pass
    sock.settimeout(30)
    return head


class _Rest:
    """A socket whose first bytes were read already: recv hands those out first."""

    def __init__(self, sock: ssl.SSLSocket, head: bytes) -> None:
        self.sock, self.head = sock, head

    def recv(self, n: int) -> bytes:
        if self.head:
            out, self.head = self.head[:n], self.head[n:]
            return out
        return self.sock.recv(n)


@pytest.mark.parametrize("read_later", [0, 2 * MiB], ids=["reading-nothing", "reading-2MiB-then-stopping"])
def test_unread_fetch_answers_on_tls_are_counted_too(tmp_path_factory, read_later):
    """The encryption layer handed a whole answer to the socket's transport without pausing the
    connection, so the bound counted every silent TLS client's answer as taken: the gauge read about
    0 while 16 of them held 16 MiB each. And once a client read a little, the layer handed on all it
    had kept back at once and resumed the connection: the same answer counted taken. The answers
    now wait in the connection until the layer takes them (broker/network/server.py `_write_tls`)."""
    admin = f"127.0.0.1:{free_port()}"
    sb = start_secure_broker(tmp_path_factory.mktemp("slow-tls"), "--offsets-topic-num-partitions", "1",
                             "--fetch-max-bytes", str(FETCH_MAX), "--flush", "never", "--metrics-listen", admin)
    try:
        fill(sb.broker, 24)
        before = peak_rss_bytes(sb.broker.proc.pid)
        silent = [silent_tls_client(sb, i + 1) for i in range(SLOW)]
        settled(f"http://{admin}")
        heads = [read_some(sock, read_later) for sock in silent]  # once the broker has stopped writing
        assert read_later == 0 or sum(len(h) == read_later for h in heads) >= 3  # the full answers' clients
        held = settled(f"http://{admin}")
        grown = peak_rss_bytes(sb.broker.proc.pid) - before
        assert 3 * FETCH_MAX < held < 4 * FETCH_MAX + SLOW * 2 * MiB, f"{held / MiB:.1f} MiB counted"
        assert grown < 200 * MiB, f"the broker grew {grown / MiB:.0f} MiB for {SLOW} unread answers"
        sizes = []
        for sock, head in zip(silent, heads):
            records = records_of(read_frame(_Rest(sock, head)))  # type: ignore[arg-type]
            assert next(rb.iter_batches(records))[1].base_offset == 0  # progress from the offset asked
            sizes.append(len(records))
            sock.close()
        # full answers first, then what is left of the allowance (a few batches): before, every one was full
        assert max(sizes) > 8 * MiB and min(sizes) < 4 * MiB, [round(n / MiB, 1) for n in sizes]
        assert settled(f"http://{admin}") == 0
    finally:
        sb.broker.stop()


def test_a_connection_that_takes_nothing_is_aborted_after_the_idle_time(tmp_path_factory):
    broker, admin = start(tmp_path_factory, "--connections-max-idle-ms", "1000")
    try:
        fill(broker, 4)
        stuck = [silent_client(broker, 1), silent_client(broker, 2, half_close=True)]
        assert settled(admin, timeout=5) > 0
        deadline = time.monotonic() + 20
        while unread_bytes(admin) > 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert unread_bytes(admin) == 0  # both aborted: closing alone would have waited for them forever
        reasons = [e["reason"] for e in broker.events("connection_close")]
        assert sum("never taken" in r for r in reasons) == 2, reasons
        for sock in stuck:
            sock.close()
    finally:
        broker.stop()
