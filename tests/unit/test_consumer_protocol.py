"""protocol/consumer_protocol.py: the one owner of ConsumerProtocolAssignment (and Subscription) bytes.
The assignments real clients sent in the golden SyncGroup frames read the same through every caller:
the coordinator's migration, the admin CLI, the pipeline and the benchmarks."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbroker.protocol import consumer_protocol, framing
from kbroker.protocol.wire import MalformedMessage

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _golden_assignments() -> list[bytes]:
    out = []
    for path in sorted(GOLDEN.glob("*-sync_group-v*.hex")):
        req = framing.decode_request_header(bytes.fromhex(path.read_text().strip()))
        out += [a.assignment for a in framing.decode_body(req).assignments if a.assignment]
    return out


def test_golden_sync_groups_carry_assignments() -> None:
    assert _golden_assignments(), "a golden SyncGroup frame with the leader's assignments"


@pytest.mark.parametrize("data", _golden_assignments())
def test_every_caller_reads_a_real_clients_assignment_alike(data: bytes) -> None:
    from kbroker.admin.groups import decode_assignment as admin_decode
    from kbroker.bench.group_load import decode_assignment as bench_decode
    from kbroker.pipeline.decode import decode_assignment as pipeline_decode

    pairs = consumer_protocol.assigned_partitions(data)
    assert pairs and all(isinstance(topic, str) and parts for topic, parts in pairs)
    assert pipeline_decode(data) == pairs
    assert admin_decode(data) == [(topic, p) for topic, parts in pairs for p in parts]
    assert bench_decode(data) == [p for _, parts in pairs for p in parts]
    # what migration reads (the same function), and what downgrade writes reads back
    assert consumer_protocol.assigned_partitions(consumer_protocol.encode_assignment(pairs, 3)) == pairs


@pytest.mark.parametrize("version", [0, 1, 2, 3, 7])
def test_an_assignment_round_trips_at_each_version_and_a_newer_one_reads_as_the_newest(version: int) -> None:
    data = consumer_protocol.encode_assignment([("orders", [0, 2]), ("payments", [1])], version)
    assert int.from_bytes(data[:2], "big") == min(version, consumer_protocol.MAX_VERSION)
    newer = (9).to_bytes(2, "big") + data[2:]
    for raw in (data, newer):
        assert consumer_protocol.assigned_partitions(raw) == [("orders", [0, 2]), ("payments", [1])]


def test_empty_is_the_empty_assignment_and_garbage_raises_for_the_caller_to_judge() -> None:
    assert consumer_protocol.assigned_partitions(b"") == []
    with pytest.raises(MalformedMessage):
        consumer_protocol.decode_assignment(b"\x00\x00\x00\x00\x00\x05")
    from kbroker.admin.groups import decode_assignment as admin_decode
    from kbroker.pipeline.decode import decode_assignment as pipeline_decode

    assert admin_decode(b"\x00\x00\x00\x00\x00\x05") == [] and pipeline_decode(b"\x00\x00\x00\x00\x00\x05") is None
