"""A timestamp search through a costly batch: how long one ListOffsets holds every other client.

    python -m bench.offset_search_stall [--records N]

Produces one gzip batch of N 7-byte records (nine million: 90 KiB on the wire) whose last record is
the only one at its timestamp, then asks ListOffsets for that timestamp: the search walks every
record of the batch. Meanwhile a second client sends ApiVersions every 20 ms; its worst round trip
is how long any client waited behind the search. On the event loop the search held everyone for
its whole walk (11.3 s at nine million records on the slow host); past a request's inline budget
kbroker walks the batch on a worker (broker/storage/log/timestamp_search.py). Not part of `make bench`: no
peer, and what is measured is that the loop is free.
"""

from __future__ import annotations

import argparse
import asyncio
import time


def costly_batch(records: int, now: int) -> bytes:
    """A sound gzip batch of `records` tiny records, all at `now` but the last, at now + 5 (the
    header's max timestamp)."""
    from kbroker.bench.hostile_produce import raw_batch, tiny_records
    from kbroker.protocol import record_batch as rb

    out = bytearray(raw_batch(tiny_records(records, last_timestamp_delta=5), records, rb.COMPRESSION_GZIP,
                              timestamp=now))
    fields = list(rb.HEADER_STRUCT.unpack_from(out, 0))
    fields[8] = now + 5
    rb.HEADER_STRUCT.pack_into(out, 0, *fields)
    rb._U32.pack_into(out, rb.CRC_OFFSET, rb.compute_crc(out, 0, len(out)))
    return bytes(out)


async def _run(bootstrap: str, records: int) -> dict:
    from kbroker.bench.wire import Connection, worst_round_trip
    from kbroker.protocol.messages.list_offsets_request import (
        ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
    )
    from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
    from kbroker.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData

    now = int(time.time() * 1000)
    searcher = await Connection.open(bootstrap, "searcher")
    other = await Connection.open(bootstrap, "other")
    await searcher.call(3, 9, MetadataRequest(topics=[MetadataRequestTopic(name="searched")],
                                              allow_auto_topic_creation=True))
    produced = await searcher.call(0, 9, ProduceRequest(None, -1, 120_000, [TopicProduceData("searched", partition_data=[
        PartitionProduceData(0, costly_batch(records, now))])]))
    assert produced.responses[0].partition_responses[0].error_code == 0
    started = time.perf_counter()
    answer = searcher.send(2, 7, ListOffsetsRequest(-1, 0, [ListOffsetsTopic("searched", [
        ListOffsetsPartition(0, -1, now + 5)])]))
    worst, _ = await worst_round_trip(other, answer)
    found = (await answer).topics[0].partitions[0]
    took = time.perf_counter() - started
    await searcher.close()
    await other.close()
    return {"search_s": took, "worst_ms": 1000 * worst, "offset": found.offset, "error": found.error_code}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.offset_search_stall", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=9_000_000)
    args = parser.parse_args(argv)
    from kbroker.bench.brokers import start_kbroker

    broker = start_kbroker(flush="never")
    try:
        r = asyncio.run(_run(broker.bootstrap, args.records))
    finally:
        broker.stop()
    print(f"{args.records:,} records in one gzip batch: the search answered offset {r['offset']} (error {r['error']}) "
          f"in {r['search_s']:.2f} s; another client's worst round trip {r['worst_ms']:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
