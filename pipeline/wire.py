"""A small blocking Kafka client for the wire reader: Metadata, ListOffsets and Fetch, nothing else.

Spark's own Kafka source needs the Java kafka-clients jar, which this project cannot ship, so the
`kbroker-wire` data source reads over kbroker's protocol codec instead. Requests use versions Apache
Kafka 4 also serves (Metadata v12, ListOffsets v7, Fetch v12 - the last version that names topics),
so the same reader follows a live Kafka cluster: each partition is fetched from its leader.

It reads as a read_committed consumer does: up to the last stable offset (ListOffsets and Fetch with
isolation level 1), and a transactional batch is dropped when the Fetch answer lists its producer's
transaction as aborted (until that transaction's abort marker). Markers are handed on (control batches):
the `__consumer_offsets` view needs them to place a committed transaction's offsets.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any, Iterator

from ..protocol import framing
from ..protocol.frames import FrameReader, recv_frame
from ..protocol.messages import fetch_request as freq
from ..protocol.messages import list_offsets_request as loreq
from ..protocol.messages import metadata_request as mreq
from ..protocol.record_batch import BatchHeader, Record, decode_batch, iter_batches

METADATA, LIST_OFFSETS, FETCH = 3, 2, 1
METADATA_VERSION, LIST_OFFSETS_VERSION, FETCH_VERSION = 12, 7, 12
EARLIEST, LATEST = -2, -1
READ_COMMITTED = 1


class WireError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class PartitionLeader:
    topic: str
    partition: int
    host: str
    port: int


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for item in bootstrap.split(","):
        item = item.strip()
        if not item:
            continue
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise WireError(f"bootstrap address {item!r} is not HOST:PORT")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise WireError("no bootstrap address given")
    return out


class Connection:
    def __init__(self, host: str, port: int, timeout: float = 15.0, client_id: str = "kbroker-pipeline") -> None:
        self.address = f"{host}:{port}"
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise WireError(f"cannot connect to {self.address}: {exc}") from exc
        self.client_id = client_id
        self._correlation = 0
        self._frames = FrameReader(max_frame_bytes=(1 << 31) - 1)

    def request(self, api_key: int, version: int, body: Any) -> Any:
        self._correlation += 1
        try:
            self.sock.sendall(framing.encode_request(api_key, version, self._correlation, self.client_id, body))
            correlation, response = framing.decode_response(api_key, version, self._recv_frame())
        except OSError as exc:
            raise WireError(f"{self.address}: {exc}") from exc
        if correlation != self._correlation:
            raise WireError(f"{self.address}: correlation id {correlation}, expected {self._correlation}")
        return response

    def _recv_frame(self) -> bytes:
        try:
            return recv_frame(self.sock.recv, self._frames)
        except ConnectionError as exc:
            raise WireError(f"{self.address}: {exc}") from exc

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()


def connect_any(bootstrap: str, timeout: float = 15.0) -> Connection:
    errors = []
    for host, port in parse_bootstrap(bootstrap):
        try:
            return Connection(host, port, timeout)
        except WireError as exc:
            errors.append(str(exc))
    raise WireError("; ".join(errors))


def partition_leaders(conn: Connection, topic: str) -> list[PartitionLeader]:
    body = mreq.MetadataRequest(topics=[mreq.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False)
    response = conn.request(METADATA, METADATA_VERSION, body)
    brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
    for t in response.topics:
        if t.name != topic:
            continue
        if t.error_code:
            raise WireError(f"Metadata for {topic!r} failed with error code {t.error_code}")
        out = []
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            if p.leader_id not in brokers:
                raise WireError(f"{topic}-{p.partition_index} has no available leader")
            host, port = brokers[p.leader_id]
            out.append(PartitionLeader(topic, p.partition_index, host, port))
        return out
    raise WireError(f"topic {topic!r} not in the Metadata response")


def topic_names(conn: Connection) -> dict[str, str]:
    """topic id -> name of every topic (KIP-848 records name partitions by topic id)."""
    response = conn.request(METADATA, METADATA_VERSION, mreq.MetadataRequest(topics=None,
                                                                             allow_auto_topic_creation=False))
    return {str(t.topic_id): t.name for t in response.topics if t.name and not t.error_code}


def list_offsets(conn: Connection, topic: str, partitions: list[int], timestamp: int) -> dict[int, int]:
    body = loreq.ListOffsetsRequest(replica_id=-1, isolation_level=READ_COMMITTED, topics=[loreq.ListOffsetsTopic(
        topic, [loreq.ListOffsetsPartition(partition_index=p, timestamp=timestamp) for p in partitions])])
    response = conn.request(LIST_OFFSETS, LIST_OFFSETS_VERSION, body)
    out = {}
    for t in response.topics:
        for p in t.partitions:
            if p.error_code:
                raise WireError(f"ListOffsets {topic}-{p.partition_index} failed with error code {p.error_code}")
            out[p.partition_index] = p.offset
    return out


def offsets_by_leader(bootstrap: str, topic: str, timestamp: int) -> dict[int, int]:
    """Earliest (-2) or latest (-1) offset of every partition, each asked of the partition's leader."""
    with connect_any(bootstrap) as conn:
        leaders = partition_leaders(conn, topic)
    by_node: dict[tuple[str, int], list[int]] = {}
    for leader in leaders:
        by_node.setdefault((leader.host, leader.port), []).append(leader.partition)
    out: dict[int, int] = {}
    for (host, port), parts in by_node.items():
        with Connection(host, port) as conn:
            out.update(list_offsets(conn, topic, parts, timestamp))
    return out


def fetch_range(
    host: str, port: int, topic: str, partition: int, start: int, end: int, max_bytes: int = 4 << 20
) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Every batch covering [start, end) of one partition, records outside the range dropped."""
    offset = start
    aborted: dict[int, list[int]] = {}  # producer id -> first offsets of its aborted transactions
    open_aborted: set[int] = set()  # producers inside an aborted transaction at this point of the read
    with Connection(host, port) as conn:
        while offset < end:
            body = freq.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes,
                                     isolation_level=READ_COMMITTED, session_epoch=-1, topics=[freq.FetchTopic(
                                         topic=topic, partitions=[freq.FetchPartition(
                                             partition=partition, fetch_offset=offset,
                                             partition_max_bytes=max_bytes)])])
            response = conn.request(FETCH, FETCH_VERSION, body)
            if response.error_code:
                raise WireError(f"Fetch {topic}-{partition} failed with error code {response.error_code}")
            data = response.responses[0].partitions[0]
            if data.error_code:
                raise WireError(f"Fetch {topic}-{partition} at offset {offset} failed with error code "
                                f"{data.error_code}")
            records = data.records or b""
            for aborted_txn in data.aborted_transactions or ():
                aborted.setdefault(aborted_txn.producer_id, []).append(aborted_txn.first_offset)
            progressed = False
            for pos, header in iter_batches(records):
                if header.next_offset <= offset:
                    continue
                header, batch = decode_batch(records, pos)
                progressed = True
                offset = header.next_offset
                if header.is_transactional and _in_aborted(aborted, open_aborted, header, batch):
                    continue
                yield header, [r for r in batch if start <= r.offset < end]
                if offset >= end:
                    break
            if not progressed:
                break  # nothing more below the high watermark (or the range ends in a compacted gap)


def _in_aborted(aborted: dict[int, list[int]], open_aborted: set[int], header: BatchHeader,
                batch: list[Record]) -> bool:
    """The read_committed consumer's rule: a producer's batches from the first offset of an aborted
    transaction on are dropped, until its abort marker (which is handed on, and closes it)."""
    pid = header.producer_id
    firsts = aborted.get(pid)
    if firsts and min(firsts) <= header.base_offset:
        firsts.remove(min(firsts))
        open_aborted.add(pid)
    if header.is_control:
        open_aborted.discard(pid)
        return False
    return pid in open_aborted
