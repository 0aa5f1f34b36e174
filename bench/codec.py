"""Codec throughput: decode+encode per second for typical messages, ours beside kio's.

    python -m bench.codec [--seconds S]
"""

from __future__ import annotations

import argparse
import time
import uuid
from io import BytesIO
from typing import Callable

from kbroker.protocol import codec, framing


def _rate(fn: Callable[[], object], seconds: float) -> float:
    n, start = 0, time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(200):
            fn()
        n += 200
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start)


def _samples() -> list[tuple[str, int, int, str, object]]:
    from kbroker.protocol.messages import fetch_response as fr
    from kbroker.protocol.messages import heartbeat_request as hb
    from kbroker.protocol.messages import join_group_request as jg
    from kbroker.protocol.messages import offset_commit_request as oc
    from kbroker.protocol.record_batch import Record, encode_batch

    member = "consumer-1-" + str(uuid.UUID(int=7))
    subscription = b"\x00\x01\x00\x00\x00\x01\x00\x05topic\xff\xff\xff\xff"
    records = encode_batch([Record(i, 1_700_000_000_000 + i, b"k%d" % i, b"v" * 100) for i in range(10)])
    return [
        ("Heartbeat v4 request", 12, 4, "request",
         hb.HeartbeatRequest(group_id="my-group", generation_id=7, member_id=member, group_instance_id=None)),
        ("JoinGroup v5 request", 11, 5, "request",
         jg.JoinGroupRequest(group_id="my-group", session_timeout_ms=45000, rebalance_timeout_ms=300000,
                             member_id=member, group_instance_id=None, protocol_type="consumer",
                             protocols=[jg.JoinGroupRequestProtocol("range", subscription),
                                        jg.JoinGroupRequestProtocol("cooperative-sticky", subscription)])),
        ("OffsetCommit v8 request", 8, 8, "request",
         oc.OffsetCommitRequest(group_id="my-group", generation_id_or_member_epoch=7, member_id=member,
                                topics=[oc.OffsetCommitRequestTopic(name="topic", partitions=[
                                    oc.OffsetCommitRequestPartition(partition_index=p, committed_offset=1000 + p,
                                                                    committed_leader_epoch=0,
                                                                    committed_metadata="")
                                    for p in range(6)])])),
        ("Fetch v12 response, 10 partitions", 1, 12, "response",
         fr.FetchResponse(throttle_time_ms=0, error_code=0, session_id=1, responses=[
             fr.FetchableTopicResponse(topic="topic", partitions=[
                 fr.PartitionData(partition_index=p, error_code=0, high_watermark=5000, last_stable_offset=5000,
                                  log_start_offset=0, aborted_transactions=[], preferred_read_replica=-1,
                                  records=records)
                 for p in range(10)])])),
    ]


def run(seconds: float = 1.0) -> list[dict]:
    from kio.index import load_payload_module
    from kio.serial import entity_reader, entity_writer
    from kio.static.constants import EntityType

    rows = []
    for label, api_key, version, kind, obj in _samples():
        spec = framing.request_spec(api_key) if kind == "request" else framing.response_spec(api_key)
        wire = codec.encode(spec, version, obj)
        compiled = codec.compiled_message(spec, version)

        def ours() -> None:
            out = BytesIO()
            compiled.buildfunc(compiled.parsefunc(BytesIO(wire), None), out, None)

        entity = EntityType.request if kind == "request" else EntityType.response
        module = load_payload_module(api_key, version, entity)
        kio_cls = next(v for v in vars(module).values()
                       if isinstance(v, type) and getattr(v, "__type__", None) == entity
                       and v.__module__ == module.__name__)
        read, write = entity_reader(kio_cls), entity_writer(kio_cls)
        check = BytesIO()
        write(check, read(wire, 0)[0])
        assert check.getvalue() == wire, f"kio and kbroker disagree on {label}"

        def theirs() -> None:
            write(BytesIO(), read(wire, 0)[0])

        def ours_decode() -> None:
            compiled.parsefunc(BytesIO(wire), None)

        def theirs_decode() -> None:
            read(wire, 0)

        a, b = _rate(ours, seconds), _rate(theirs, seconds)
        c, d = _rate(ours_decode, seconds), _rate(theirs_decode, seconds)
        rows.append({"message": label, "bytes": len(wire), "kbroker_per_s": a, "kio_per_s": b, "ratio": a / b,
                     "kbroker_decode_per_s": c, "kio_decode_per_s": d, "decode_ratio": c / d})
    return rows


def report(seconds: float = 1.0) -> list[dict]:
    """Measure, print the table, and return the rows (for `python -m bench`'s summary)."""
    print("codec: decode+encode per second (one core), kbroker (compiled construct) beside kio (native)")
    print("(kio decodes in native code and encodes in Python; decode-only columns shown too)")
    print(f"{'message':36} {'bytes':>6} {'kbroker/s':>10} {'kio/s':>10} {'ratio':>6} "
          f"{'dec kbroker/s':>14} {'dec kio/s':>10} {'ratio':>6}")
    rows = run(seconds)
    for r in rows:
        print(f"{r['message']:36} {r['bytes']:6d} {r['kbroker_per_s']:10,.0f} {r['kio_per_s']:10,.0f} "
              f"{r['ratio']:6.2f} {r['kbroker_decode_per_s']:14,.0f} {r['kio_decode_per_s']:10,.0f} "
              f"{r['decode_ratio']:6.2f}")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args(argv)
    report(args.seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
