"""Disk damage and wire helpers shared by the fault-injection tests and `make chaos`.

Damage is written by the test into a stopped broker's data directory, the way a bad disk, a crash mid-
write or an operator's mistake would leave it: cuts (mid-batch or on a batch boundary), flipped bytes
inside a batch (its CRC fails), a damaged length field or magic byte, deleted or garbage indexes.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from kbroker.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from kbroker.protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kbroker.protocol.messages.offset_fetch_request import OffsetFetchRequest, OffsetFetchRequestTopic
from kbroker.protocol.record_batch import decode_batches, read_header
from kbroker.tests.integration.wire import Wire

FETCH, OFFSET_COMMIT, OFFSET_FETCH = 1, 8, 9
CORRUPT_MESSAGE, COORDINATOR_LOAD_IN_PROGRESS = 2, 14


@dataclass
class StoredBatch:
    position: int
    size: int
    base_offset: int
    last_offset: int


def segments(data_dir: Path, topic: str, partition: int) -> list[Path]:
    return sorted((data_dir / f"{topic}-{partition}").glob("*.log"))


def stored_batches(file: Path) -> list[StoredBatch]:
    data = file.read_bytes()
    out, pos = [], 0
    while len(data) - pos >= 61:
        header = read_header(data, pos)
        if header.batch_length < 49 or pos + header.size > len(data):
            break
        out.append(StoredBatch(pos, header.size, header.base_offset, header.last_offset))
        pos += header.size
    return out


def patch(file: Path, position: int, data: bytes) -> None:
    with open(file, "r+b") as f:
        f.seek(position)
        f.write(data)


def cut(file: Path, position: int) -> None:
    os.truncate(file, position)


def rot(file: Path, batch: StoredBatch) -> None:
    """Flip a byte inside the batch's records: framing intact, CRC fails."""
    position = batch.position + batch.size - 3
    with open(file, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0x5A]))


def damage_length(file: Path, batch: StoredBatch) -> None:
    patch(file, batch.position + 8, (0x7FFFFF00).to_bytes(4, "big"))


def damage_magic(file: Path, batch: StoredBatch) -> None:
    patch(file, batch.position + 16, b"\x09")


# --- wire helpers ---------------------------------------------------------------------------------------

def fetch(wire: Wire, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20):
    """(error code, high watermark, [(offset, value)]) of one partition's Fetch answer (v11)."""
    response = wire.call(FETCH, 11, FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, topics=[
        FetchTopic(topic=topic, partitions=[FetchPartition(partition=partition, fetch_offset=offset,
                                                           partition_max_bytes=max_bytes)])]))
    answer = response.responses[0].partitions[0]
    records = []
    if answer.records:
        for _, decoded in decode_batches(bytes(answer.records)):
            records += [(r.offset, r.value) for r in decoded if r.offset >= offset]
    return answer.error_code, answer.high_watermark, records


def read_partition(wire: Wire, topic: str, partition: int, *, skip_corrupt: bool = True):
    """Everything a consumer can read, oldest first, and the offsets where CORRUPT_MESSAGE answered.

    On CORRUPT_MESSAGE a consumer (or its operator) seeks forward; we probe offset by offset, which is
    what finding the first readable offset after damage costs without knowing the file layout."""
    records: list[tuple[int, bytes]] = []
    corrupt: list[int] = []
    offset = 0
    high = None
    for _ in range(1_000_000):
        error, high, got = fetch(wire, topic, partition, offset)
        if error == CORRUPT_MESSAGE and skip_corrupt:
            corrupt.append(offset)
            offset += 1
            continue
        assert error == 0, f"fetch at {offset} answered error {error}"
        if not got:
            if offset >= high:
                break
            offset += 1  # a gap left by damage (offsets are never reused)
            continue
        records += got
        offset = got[-1][0] + 1
    return records, corrupt


def commit(wire: Wire, group: str, topic: str, partition: int, offset: int) -> int:
    response = wire.call(OFFSET_COMMIT, 8, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="",
        topics=[OffsetCommitRequestTopic(name=topic, partitions=[OffsetCommitRequestPartition(partition, offset, -1, "")])],
    ))
    return response.topics[0].partitions[0].error_code


def committed(wire: Wire, group: str, topic: str, partition: int, timeout: float = 30.0) -> tuple[int, int]:
    """(error, committed offset), waiting out COORDINATOR_LOAD_IN_PROGRESS for up to `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        response = wire.call(OFFSET_FETCH, 7, OffsetFetchRequest(group_id=group, topics=[
            OffsetFetchRequestTopic(topic, [partition])]))
        error = response.error_code or response.topics[0].partitions[0].error_code
        if error != COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
            return error, response.topics[0].partitions[0].committed_offset
        time.sleep(0.1)
