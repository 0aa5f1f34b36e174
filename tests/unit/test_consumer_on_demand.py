"""The consumer-group (KIP-848) machine of a partition is imported with its first command or record
(coordinator/groups/consumer/consumer_on_demand.py): a shard of classic groups and offsets never loads it, and the
first consumer-protocol command or record loads it and is handled as before. Each case runs in a
fresh interpreter, since this one has imported everything already."""

from __future__ import annotations

import json
import subprocess
import sys

# what a classic-only coordinator must not import
ON_DEMAND = ["kbroker.coordinator.groups.consumer.consumer_machine", "kbroker.coordinator.groups.consumer.consumer_heartbeat",
             "kbroker.coordinator.groups.consumer.consumer_describe", "kbroker.coordinator.groups.consumer.migration",
             "kbroker.coordinator.groups.consumer.assignors", "kbroker.coordinator.groups.consumer.reconcile",
             "kbroker.protocol.records.consumer_codec",
             "kbroker.protocol.messages.consumer_group_metadata_key"]

PRELUDE = """
import json, sys
from kbroker.coordinator.groups import commands as c
from kbroker.coordinator.groups.shard import GroupCoordinatorShard
from kbroker.protocol.records.codec import decode_record, encode_record
from kbroker.protocol.records.classic_records import OffsetCommitRecord
m = GroupCoordinatorShard(0)
m.begin_load()
m.replay(decode_record(*encode_record(OffsetCommitRecord("g", "t", 0, 5, -1, "", 1))))
m.finish_load(1)
out = m.handle(c.OffsetFetch("g"), 2)
assert m.offsets.of("g")[("t", 0)].offset == 5
assert [g.group_id for g in m.list_groups()] == ["g"]
m.handle(c.DescribeGroup("g"), 3)
"""


def _run(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PRELUDE + code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_classic_groups_and_offsets_never_import_the_consumer_machine() -> None:
    found = _run(f"print(json.dumps({{m: m in sys.modules for m in {ON_DEMAND!r}}}))")
    assert found == {m: False for m in ON_DEMAND}


def test_a_consumer_record_loads_the_machine_and_is_replayed() -> None:
    found = _run("""
from kbroker.protocol.records.consumer_records import ConsumerGroupMetadataRecord
record = decode_record(*encode_record(ConsumerGroupMetadataRecord("cg", 3)))
m.begin_load()
m.replay(record)
m.finish_load(4)
loaded = "kbroker.coordinator.groups.consumer.consumer_machine" in sys.modules
print(json.dumps({"loaded": loaded, "epoch": m.group("cg").group_epoch,
                  "listed": sorted((g.group_id, g.group_type) for g in m.list_groups())}))
""")
    assert found == {"loaded": True, "epoch": 3, "listed": [["cg", "consumer"]]}


def test_a_consumer_request_loads_the_machine_and_is_answered() -> None:
    found = _run("""
from kbroker.coordinator.groups.consumer import consumer_commands as cc
out = m.handle(cc.ConsumerGroupDescribe("nobody", reply_to=object()), 4)
[reply] = out.replies
print(json.dumps({"loaded": "kbroker.coordinator.groups.consumer.consumer_machine" in sys.modules,
                  "error": int(reply.result.error), "classic_still_there": m.group("g") is not None}))
""")
    assert found == {"loaded": True, "error": 69, "classic_still_there": True}  # GROUP_ID_NOT_FOUND
