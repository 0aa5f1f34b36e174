"""Batches costly to check: how long one hostile Produce holds every other client.

    python -m bench.hostile_produce [--quick]

Four Produce requests, each to its own topic of a fresh kbroker: ten gzip batches of one 60 MiB
record (60 KiB each on the wire), two gzip batches of nine million 7-byte records (90 KiB each),
forty uncompressed 1 MiB batches of 7-byte records (40 MB), and ten 1 MiB gzip batches of empty
members (each a step for the decompressor, nothing inflated; refused once read). While each is checked, a second client
sends ApiVersions every 20 ms; its worst round trip is how long any client waited behind that one
request. A broker checking every batch on its event loop holds them all for the whole check (2.8,
3.6 and 1.3 s on the reference host); past a request's inline budget kbroker checks in a worker
thread (broker/storage/log/validation.py, broker/workers.py). No peer: what Tansu spends is not the
question; that the loop is free is.
"""

from __future__ import annotations

import argparse
import asyncio
import time

KINDS = ("60 MiB records, gzip", "9M tiny records, gzip", "1 MiB tiny-record batches, none",
         "1 MiB of empty gzip members")


def raw_batch(records: bytes, count: int, codec: int, timestamp: int | None = None) -> bytes:
    """A sound batch (header, CRC) around raw `records`, counting `count` of them, compressed with
    `codec`: what a hostile producer can send (the tests build theirs here too)."""
    from kbroker.protocol import record_batch as rb

    now = int(time.time() * 1000) if timestamp is None else timestamp
    shell = bytearray(rb.encode_batch([rb.Record(0, now, None, None)]))
    payload = rb.compress(codec, records)
    out = shell[:rb.HEADER_SIZE] + payload
    fields = list(rb.HEADER_STRUCT.unpack_from(out, 0))
    fields[1], fields[5], fields[6], fields[12] = len(out) - rb.LOG_OVERHEAD, codec, count - 1, count
    rb.HEADER_STRUCT.pack_into(out, 0, *fields)
    rb._U32.pack_into(out, rb.CRC_OFFSET, rb.compute_crc(out, 0, len(out)))
    return bytes(out)


_TINY = b"\x0c\x00\x00\x00\x01\x01\x00"  # length 6, attributes, deltas 0, null key and value, no headers


def tiny_records(count: int, last_timestamp_delta: int = 0) -> bytes:
    """`count` records of 7 bytes (no key, no value, offset delta 0), then the last one at offset
    delta count - 1 (the header's lastOffsetDelta) and `last_timestamp_delta` from the base."""
    from kbroker.protocol import record_batch as rb

    last = b"\x00" + rb.zigzag_varint(last_timestamp_delta) + rb.zigzag_varint(count - 1) + b"\x01\x01\x00"
    return _TINY * (count - 1) + rb.zigzag_varint(len(last)) + last


def requests(scale: float) -> list[tuple[str, bytes, int]]:
    """(kind, batch, how many times one Produce carries it), `scale` of the full sizes."""
    from kbroker.protocol import record_batch as rb

    big = rb.encode_batch([rb.Record(0, int(time.time() * 1000), None, bytes(int(60 * 2**20 * scale)))],
                          compression=rb.COMPRESSION_GZIP)
    tiny = int(9_000_000 * scale)
    plain = ((1 << 20) - 200) // len(_TINY)
    return [(KINDS[0], big, 10),
            (KINDS[1], raw_batch(tiny_records(tiny), tiny, rb.COMPRESSION_GZIP), 2),
            (KINDS[2], raw_batch(tiny_records(plain), plain, rb.COMPRESSION_NONE), max(4, int(40 * scale))),
            (KINDS[3], _empty_members(int(((1 << 20) - 200) * scale)), 10)]


def _empty_members(size: int) -> bytes:
    """A batch whose gzip payload is `size` bytes of empty members: each one a step in Python for
    a decompressor, nothing inflated (the batch is refused once read: it holds no record)."""
    import gzip

    from kbroker.protocol import record_batch as rb

    member = gzip.compress(b"", mtime=0)
    batch = bytearray(raw_batch(tiny_records(1), 1, rb.COMPRESSION_NONE))
    out = batch[:rb.HEADER_SIZE] + member * ((size - rb.HEADER_SIZE) // len(member))
    fields = list(rb.HEADER_STRUCT.unpack_from(out, 0))
    fields[1], fields[5] = len(out) - rb.LOG_OVERHEAD, rb.COMPRESSION_GZIP
    rb.HEADER_STRUCT.pack_into(out, 0, *fields)
    rb._U32.pack_into(out, rb.CRC_OFFSET, rb.compute_crc(out, 0, len(out)))
    return bytes(out)


async def _one(bootstrap: str, topic: str, batch: bytes, copies: int) -> dict:
    from kbroker.bench.wire import Connection, worst_round_trip
    from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
    from kbroker.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData

    hostile = await Connection.open(bootstrap, "hostile")
    other = await Connection.open(bootstrap, "other")
    await hostile.send(3, 9, MetadataRequest(topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=True))
    started = time.perf_counter()
    answer = hostile.send(0, 9, ProduceRequest(None, 1, 60000, [TopicProduceData(topic, partition_data=[
        PartitionProduceData(0, batch) for _ in range(copies)])]))
    worst, pings = await worst_round_trip(other, answer)
    errors = sorted({p.error_code for p in (await answer).responses[0].partition_responses})
    took = time.perf_counter() - started
    await hostile.close()
    await other.close()
    return {"answer_s": took, "worst_ms": 1000 * worst, "pings": pings, "errors": errors}


def report(quick: bool) -> list[dict]:
    from kbroker.bench.brokers import start_kbroker

    rows = []
    broker = start_kbroker(flush="always")
    try:
        for i, (kind, batch, copies) in enumerate(requests(0.1 if quick else 1.0)):
            r = asyncio.run(_one(broker.bootstrap, f"hostile-{i}", batch, copies))
            r.update(kind=kind, wire_bytes=len(batch) * copies)
            rows.append(r)
            print(f"  {kind:<34} {copies:>3} x {len(batch):>9,} B: answered in {r['answer_s']:.2f} s; another client's"
                  f" worst round trip {r['worst_ms']:.0f} ms over {r['pings']} pings (errors {r['errors']})")
    finally:
        broker.stop()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile_produce", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a tenth of the sizes")
    report(parser.parse_args(argv).quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
