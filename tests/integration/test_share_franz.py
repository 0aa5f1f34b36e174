"""Share groups with franz-go's share consumer (kgo.ShareGroup, franz-go 1.22.3:
tests/clients/franz/share.go): three members on a topic of three partitions, acknowledging each
record explicitly. Every record is acknowledged exactly once and no acknowledgement is refused; the
members share the work; the poison record is rejected once and archived (never delivered again, and
the group's lag is 0: nothing left to deliver)."""

from __future__ import annotations

import collections
import subprocess
import uuid

import pytest

from kbroker.admin.client import Admin
from kbroker.admin.groups import share_offsets
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.test_share_java import RECORDS, records_and_a_poison
from kbroker.tests.reference.client_matrix import go_binary, require_go

def acknowledged_once(binary, bootstrap: str, topic: str, group: str, records: int) -> tuple[list[str], list[list[str]]]:
    """Three members of the program from `bootstrap` until `records` are accepted: its lines and its
    ACK lines split, once every record was acknowledged exactly once and none refused."""
    done = subprocess.run([str(binary), "share", bootstrap, topic, group, "3", str(records), "90000"],
                          capture_output=True, text=True, timeout=180)
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and lines and lines[-1] == f"DONE {records}", (lines[-20:], done.stderr[-3000:])
    assert not [line for line in lines if line.startswith(("ACKERR", "FLUSHERR"))], lines
    acks = [line.split() for line in lines if line.startswith("ACK ")]
    seen = collections.Counter((int(p), int(o)) for _, p, o, _, _ in acks)
    assert len(seen) == records and set(seen.values()) == {1}  # every record acknowledged exactly once
    return lines, acks


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("share-franz") / "data", "--num-partitions", "3",
                       "--group-share-heartbeat-interval-ms", "1000") as proc:
        yield proc


def test_franz_share_consumers_acknowledge_every_record_once_and_archive_the_rejected(broker):
    require_go()
    binary = go_binary("franz")
    topic, group = f"sfz-{uuid.uuid4().hex[:6]}", f"sfzg-{uuid.uuid4().hex[:6]}"
    records_and_a_poison(broker, group, topic)

    lines, acks = acknowledged_once(binary, broker.bootstrap, topic, group, RECORDS)
    assert {int(count) for *_, count, _ in acks} == {1}  # nothing was delivered twice
    assert len({member for *_, member in acks}) >= 2  # the members shared the work
    rejected = [line.split() for line in lines if line.startswith("REJECT ")]
    assert [(int(p), int(count)) for _, p, _, count, _ in rejected] == [(0, 1)]  # once, never again
    with Admin(broker.bootstrap) as admin:
        lags = {tp: lag for tp, (_, lag) in share_offsets(admin, group).items()}
    assert lags == {(topic, 0): 0, (topic, 1): 0, (topic, 2): 0}  # the rejected record archived: nothing left
