"""Decoding throughput of the `kbroker-log` data source: records per second on local[1] and local[2].

    python -m kbroker.pipeline.bench [--records 10000000] [--cores 1,2] [--codec none] [--keep DIR]

Writes a synthetic data directory (one batch template copied with new base offsets, which sit outside
the CRC, so 10 million records take seconds to lay down), measures the in-process decoder on one
segment, then times a full read of every record through Spark (`write.format("noop")` forces every
column to be materialised) once per core count, one session at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import sys
import tempfile
import time
import uuid
from pathlib import Path

from ..protocol.record_batch import COMPRESSION_NAMES, Record, encode_batch

TOPIC = "bench"
_I64 = struct.Struct(">q")


def write_data_dir(root: Path, records: int, *, partitions: int = 4, batch_records: int = 500,
                   value_bytes: int = 64, codec: int = 0, segment_bytes: int = 64 << 20) -> dict[str, int]:
    """A data directory of `records` records in `partitions` partitions, rolled at `segment_bytes`."""
    (root / "topics").mkdir(parents=True, exist_ok=True)
    meta = {"name": TOPIC, "topic_id": str(uuid.uuid4()), "partitions": partitions,
            "configs": {"segment.bytes": str(segment_bytes)}}
    (root / "topics" / f"{TOPIC}.json").write_text(json.dumps(meta))
    now = int(time.time() * 1000)
    template = encode_batch([
        Record(i, now + i, b"key-%06d" % i, (b"v%05d-" % i).ljust(value_bytes, b"x"),
               [("h", b"1")] if i % 10 == 0 else [])
        for i in range(batch_records)
    ], compression=codec)
    per_partition = [records // partitions + (1 if p < records % partitions else 0) for p in range(partitions)]
    segments = 0
    total_bytes = 0
    for p, count in enumerate(per_partition):
        pdir = root / f"{TOPIC}-{p}"
        pdir.mkdir(exist_ok=True)
        offset = 0
        out = None
        size = 0
        tail = None
        while offset < count:
            n = min(batch_records, count - offset)
            if n == batch_records:
                batch = bytearray(template)
            else:
                if tail is None or tail[0] != n:
                    tail = (n, encode_batch([Record(i, now + i, b"key-%06d" % i, (b"v%05d-" % i).ljust(value_bytes, b"x"))
                                             for i in range(n)], compression=codec))
                batch = bytearray(tail[1])
            _I64.pack_into(batch, 0, offset)
            if out is None or size + len(batch) > segment_bytes:
                if out is not None:
                    out.close()
                out = open(pdir / f"{offset:020d}.log", "wb")
                segments += 1
                size = 0
            out.write(batch)
            size += len(batch)
            total_bytes += len(batch)
            offset += n
        if out is not None:
            out.close()
    return {"records": records, "segments": segments, "bytes": total_bytes}


def decode_in_process(root: Path) -> tuple[int, float]:
    """(records, seconds) for the largest segment decoded to Arrow in this process (one core, no Spark)."""
    from . import decode, schemas
    from .logdir import list_segments

    segment = max(list_segments(str(root)), key=lambda s: s.size)
    schema = schemas.arrow_schema(schemas.RECORDS)
    started = time.perf_counter()
    rows = sum(b.num_rows for b in decode.record_batches(segment, schema))
    return rows, time.perf_counter() - started


def spark_read(root: Path, cores: int) -> tuple[int, float]:
    """(records, seconds) for a full read of every record on local[cores] (session start excluded)."""
    from . import source
    from .job import make_session

    spark = make_session(f"local[{cores}]", f"kbroker-bench-{cores}", extra={
        "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"})
    try:
        source.register(spark)
        df = spark.read.format("kbroker-log").load(str(root))
        started = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        elapsed = time.perf_counter() - started
        count = spark.read.format("kbroker-log").option("view", "batches").load(str(root)).groupBy().sum("records").first()[0]
        return int(count), elapsed
    finally:
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbroker.pipeline.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--cores", default="1,2", help="comma-separated core counts, one local[N] run each")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--segment-mb", type=int, default=64)
    parser.add_argument("--batch-records", type=int, default=500)
    parser.add_argument("--value-bytes", type=int, default=64)
    parser.add_argument("--codec", default="none", choices=list(COMPRESSION_NAMES.values()))
    parser.add_argument("--keep", metavar="DIR", help="write (or reuse) the data directory here and keep it")
    args = parser.parse_args(argv)
    codec = {name: cid for cid, name in COMPRESSION_NAMES.items()}[args.codec]
    cores = [int(c) for c in args.cores.split(",") if c.strip()]

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="kbroker-bench-")) / "data"
    try:
        started = time.perf_counter()
        if args.keep and (root / "topics" / f"{TOPIC}.json").exists():
            print(f"reusing {root}")
        else:
            info = write_data_dir(root, args.records, partitions=args.partitions, batch_records=args.batch_records,
                                  value_bytes=args.value_bytes, codec=codec, segment_bytes=args.segment_mb << 20)
            print(f"wrote {info['records']:,} records, {info['bytes'] / 1e6:,.0f} MB in {info['segments']} segments "
                  f"({args.codec}, {args.batch_records} records per batch) in {time.perf_counter() - started:.1f}s")
        rows, secs = decode_in_process(root)
        print(f"in-process decode, one segment, 1 core: {rows:,} records in {secs:.2f}s = {rows / secs:,.0f} records/s")
        results = {}
        for n in cores:
            count, secs = spark_read(root, n)
            results[n] = count / secs
            print(f"spark local[{n}]: {count:,} records in {secs:.2f}s = {results[n]:,.0f} records/s", flush=True)
        if len(results) > 1:
            base = results[min(results)]
            for n in sorted(results)[1:]:
                print(f"  scaling local[{min(results)}] -> local[{n}]: {results[n] / base:.2f}x "
                      f"(ideal {n / min(results):.0f}x)")
        print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        if not args.keep:
            shutil.rmtree(root.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
