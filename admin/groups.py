"""`kbroker group ...`: consumer, streams and share groups over the Kafka protocol (any broker), plus
the rebalance history, which only kbroker keeps and serves on its HTTP endpoint (Kafka has no API for
it). A share group (KIP-932) is described by ShareGroupDescribe and its offsets are its share-partitions'
start offsets and lags (DescribeShareGroupOffsets), as kafka-share-groups.sh shows them."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone
from typing import Any

from ..protocol.consumer_protocol import assigned_partitions
from ..protocol.errors import ErrorCode
from ..protocol.messages.consumer_group_describe_request import ConsumerGroupDescribeRequest
from ..protocol.messages.streams_group_describe_request import StreamsGroupDescribeRequest
from ..protocol.messages.delete_groups_request import DeleteGroupsRequest
from ..protocol.messages.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from ..protocol.messages.share_group_describe_request import ShareGroupDescribeRequest
from ..protocol.messages.describe_groups_request import DescribeGroupsRequest
from ..protocol.messages.list_groups_request import ListGroupsRequest
from ..protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from ..protocol.messages.offset_delete_request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from ..protocol.messages.offset_fetch_request import OffsetFetchRequest

from . import share_offsets as share_offsets_admin
from .client import Admin, AdminError, error_name
from .topics import EARLIEST, LATEST, log_offsets, partitions_of


def list_groups(admin: Admin) -> list[dict]:
    resp = admin.conn.request(16, ListGroupsRequest())
    if resp.error_code:
        raise AdminError(f"broker {admin.bootstrap}: ListGroups failed with {error_name(resp.error_code)}")
    return [{"group": g.group_id, "state": g.group_state, "protocol_type": g.protocol_type}
            for g in sorted(resp.groups, key=lambda g: g.group_id)]


CONSUMER_GROUP_DESCRIBE = 69
STREAMS_GROUP_DESCRIBE = 89
SHARE_GROUP_DESCRIBE = 77
DESCRIBE_SHARE_GROUP_OFFSETS = 90


def _described(admin: Admin, group_id: str, api_key: int, request: object) -> Any:
    """The one group a streams or share group describe answers; None when it is not such a group."""
    described = admin.group_request(group_id, api_key, request, lambda r: r.groups[0].error_code).groups[0]
    if described.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        return None
    if described.error_code:
        raise AdminError(f"group {group_id}: {error_name(described.error_code)}")
    return described


def _describe_share(admin: Admin, group_id: str) -> dict | None:
    """A share group as ShareGroupDescribe shows it (members may share a partition); None when there
    is no such share group."""
    described = _described(admin, group_id, SHARE_GROUP_DESCRIBE, ShareGroupDescribeRequest(group_ids=[group_id]))
    if described is None:
        return None
    return {"state": described.group_state, "protocol_type": "share", "protocol": described.assignor_name,
            "members": [{"member_id": m.member_id, "group_instance_id": None, "client_id": m.client_id,
                         "host": m.client_host,
                         "assignment": sorted((t.topic_name, p) for t in m.assignment.topic_partitions
                                              for p in t.partitions)}
                        for m in described.members]}


def share_offsets(admin: Admin, group_id: str) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (start offset, lag) of each of a share group's share-partitions with a
    state (DescribeShareGroupOffsets, every topic)."""
    resp = admin.group_request(group_id, DESCRIBE_SHARE_GROUP_OFFSETS, DescribeShareGroupOffsetsRequest(
        groups=[DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=None)]),
        lambda r: r.groups[0].error_code)
    group = resp.groups[0]
    if group.error_code:
        raise AdminError(f"group {group_id}: DescribeShareGroupOffsets failed with {error_name(group.error_code)}")
    return {(t.topic_name, p.partition_index): (p.start_offset, p.lag)
            for t in group.topics for p in t.partitions if not p.error_code and p.start_offset >= 0}


def _describe_streams(admin: Admin, group_id: str) -> dict | None:
    """A streams group (KIP-1071) as StreamsGroupDescribe shows it, its members' active tasks as the
    partitions they read (the source and repartition topics of each task's subtopology); None when
    there is no such streams group."""
    described = _described(admin, group_id, STREAMS_GROUP_DESCRIBE, StreamsGroupDescribeRequest(group_ids=[group_id]))
    if described is None:
        return None
    subtopologies = described.topology.subtopologies if described.topology is not None else None
    reads = {s.subtopology_id: [*s.source_topics, *(t.name for t in s.repartition_source_topics)]
             for s in subtopologies or ()}
    return {"state": described.group_state, "protocol_type": "streams", "protocol": described.assignor_name or "",
            "members": [{"member_id": m.member_id, "group_instance_id": m.instance_id, "client_id": m.client_id,
                         "host": m.client_host,
                         "assignment": sorted((topic, p) for task in m.assignment.active_tasks
                                              for topic in reads.get(task.subtopology_id, ()) for p in task.partitions),
                         "member_epoch": m.member_epoch,
                         "active_tasks": _task_names(m.assignment.active_tasks),
                         "standby_tasks": _task_names(m.assignment.standby_tasks)}
                        for m in described.members]}


def _task_names(tasks) -> list[str]:
    """Tasks as Kafka Streams names them: subtopology_partition ("1_0")."""
    return sorted(f"{t.subtopology_id}_{p}" for t in tasks or () for p in t.partitions)


def _describe(admin: Admin, group_id: str) -> dict:
    """A group's state, protocol and members, whichever protocol it runs. DescribeGroups describes
    classic groups; a consumer group (KIP-848) is GROUP_ID_NOT_FOUND there (Dead before v6), so it
    is asked again with ConsumerGroupDescribe when the broker serves it, as Kafka's own tool does, then
    with StreamsGroupDescribe (a streams group is not found by the other two).
    A group that exists in neither is Dead with no members."""
    resp = admin.group_request(group_id, 15, DescribeGroupsRequest(groups=[group_id]),
                               lambda r: r.groups[0].error_code)
    group = resp.groups[0]
    missing = group.error_code == ErrorCode.GROUP_ID_NOT_FOUND or (not group.error_code and group.group_state == "Dead")
    if missing and CONSUMER_GROUP_DESCRIBE in admin.conn.versions:
        described = admin.group_request(group_id, CONSUMER_GROUP_DESCRIBE,
                                        ConsumerGroupDescribeRequest(group_ids=[group_id]),
                                        lambda r: r.groups[0].error_code).groups[0]
        if not described.error_code:
            return {"state": described.group_state, "protocol_type": "consumer", "protocol": described.assignor_name,
                    "members": [{"member_id": m.member_id, "group_instance_id": m.instance_id,
                                 "client_id": m.client_id, "host": m.client_host,
                                 "assignment": sorted((t.topic_name, p) for t in m.assignment.topic_partitions
                                                      for p in t.partitions)}
                                for m in described.members]}
        if described.error_code != ErrorCode.GROUP_ID_NOT_FOUND:
            raise AdminError(f"group {group_id}: {error_name(described.error_code)}")
    if missing and STREAMS_GROUP_DESCRIBE in admin.conn.versions:
        streams = _describe_streams(admin, group_id)
        if streams is not None:
            return streams
    if missing and SHARE_GROUP_DESCRIBE in admin.conn.versions:
        share = _describe_share(admin, group_id)
        if share is not None:
            return share
    if missing:
        return {"state": "Dead", "protocol_type": "", "protocol": "", "members": []}
    if group.error_code:
        raise AdminError(f"group {group_id}: {error_name(group.error_code)}")
    consumer = group.protocol_type == "consumer"
    return {"state": group.group_state, "protocol_type": group.protocol_type, "protocol": group.protocol_data,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "host": m.client_host,
                         "assignment": decode_assignment(m.member_assignment) if consumer else []}
                        for m in group.members]}


def committed_offsets(admin: Admin, group_id: str) -> dict[tuple[str, int], int]:
    resp = admin.group_request(group_id, 9, OffsetFetchRequest(group_id=group_id, topics=None),
                               lambda r: r.error_code)
    if resp.error_code:
        raise AdminError(f"group {group_id}: OffsetFetch failed with {error_name(resp.error_code)}")
    return {(t.name, p.partition_index): p.committed_offset
            for t in resp.topics for p in t.partitions if p.committed_offset >= 0}


def decode_assignment(data: bytes) -> list[tuple[str, int]]:
    """The consumer protocol's assignment as (topic, partition) pairs; [] when undecodable."""
    try:
        return [(topic, p) for topic, parts in assigned_partitions(data) for p in parts]
    except ValueError:  # MalformedMessage too
        return []


def describe_group(admin: Admin, group_id: str) -> dict:
    group = _describe(admin, group_id)
    if group["state"] == "Dead":
        raise AdminError(f"group {group_id} does not exist")
    if group["protocol_type"] == "share":
        return _describe_share_group(admin, group_id, group)
    owner: dict[tuple[str, int], str] = {}
    members = []
    for m in group["members"]:
        for tp in m["assignment"]:
            owner[tp] = m["member_id"]
        members.append({**m, "assignment": [f"{t}-{p}" for t, p in sorted(m["assignment"])]})
    committed = committed_offsets(admin, group_id)
    wanted: dict[str, set[int]] = {}
    for t, p in [*committed, *owner]:
        wanted.setdefault(t, set()).add(p)
    ends = log_offsets(admin, {t: sorted(ps) for t, ps in wanted.items()}, LATEST)
    partitions = []
    for tp in sorted(set(committed) | set(owner)):
        end, offset = ends.get(tp), committed.get(tp)
        partitions.append({
            "topic": tp[0], "partition": tp[1], "committed": offset, "log_end": end,
            "lag": (end - offset) if end is not None and offset is not None else None,
            "member": owner.get(tp),
        })
    return {"group": group_id, "state": group["state"], "protocol_type": group["protocol_type"],
            "protocol": group["protocol"], "members": members, "partitions": partitions,
            "total_lag": sum(p["lag"] or 0 for p in partitions)}


def _describe_share_group(admin: Admin, group_id: str, group: dict) -> dict:
    """A share group's members and share-partitions: each one's start offset, the log end and the lag
    (the records from the start not yet delivered for good), and the members it is assigned to."""
    owners: dict[tuple[str, int], list[str]] = {}
    members = []
    for m in group["members"]:
        for tp in m["assignment"]:
            owners.setdefault(tp, []).append(m["member_id"])
        members.append({**m, "assignment": [f"{t}-{p}" for t, p in sorted(m["assignment"])]})
    offsets = share_offsets(admin, group_id)
    wanted: dict[str, set[int]] = {}
    for t, p in [*offsets, *owners]:
        wanted.setdefault(t, set()).add(p)
    ends = log_offsets(admin, {t: sorted(ps) for t, ps in wanted.items()}, LATEST)
    partitions = [{"topic": tp[0], "partition": tp[1], "start": offsets[tp][0] if tp in offsets else None,
                   "log_end": ends.get(tp), "lag": offsets[tp][1] if tp in offsets and offsets[tp][1] >= 0 else None,
                   "members": ",".join(sorted(owners.get(tp, ())))}
                  for tp in sorted(set(offsets) | set(owners))]
    return {"group": group_id, "state": group["state"], "protocol_type": "share", "protocol": group["protocol"],
            "members": members, "partitions": partitions, "total_lag": sum(p["lag"] or 0 for p in partitions)}


def reset_offsets(admin: Admin, group_id: str, topic: str, *, to: str, value: str | None,
                  dry_run: bool, share: bool = False) -> list[dict]:
    """Kafka's rule: a group's offsets are reset only while it has no members. A share group's are its
    share-partitions' start offsets (admin/share_offsets.py): `share` for one that does not exist yet,
    which kafka-share-groups.sh may reset (the group is made so)."""
    group = _describe(admin, group_id)
    share = share or group["protocol_type"] == "share"
    if group["state"] not in ("Empty", "Dead"):
        if share:
            raise share_offsets_admin.not_empty(group_id)
        raise AdminError(f"group {group_id} is {group['state']} with {len(group['members'])} member(s); "
                         f"offsets can only be reset while it is empty (stop its consumers)")
    if share and to == "shift-by":
        raise AdminError("--shift-by is not for share groups (kafka-share-groups.sh has none)")
    topic_name, _, only = topic.partition(":")
    parts = partitions_of(admin, [topic_name])[topic_name]
    if only:
        parts = [p for p in parts if str(p) in only.split(",")]
    targets = {topic_name: parts}
    current = ({tp: start for tp, (start, _) in share_offsets(admin, group_id).items()} if share
               else committed_offsets(admin, group_id))
    starts = log_offsets(admin, targets, EARLIEST)
    ends = log_offsets(admin, targets, LATEST)
    if to == "earliest":
        new = starts
    elif to == "latest":
        new = ends
    elif to == "datetime":
        ms = parse_time_ms(value or "")
        new = {tp: (o if o >= 0 else ends[tp]) for tp, o in log_offsets(admin, targets, ms).items()}
    elif to == "offset":
        new = {tp: int(value or 0) for tp in starts}
    elif to == "shift-by":
        new = {tp: current.get(tp, ends[tp]) + int(value or 0) for tp in starts}
    else:
        raise AdminError(f"unknown reset target {to!r}")
    # Like kafka-consumer-groups.sh: a target outside the log is clamped to its bounds.
    new = {tp: min(max(o, starts[tp]), ends[tp]) for tp, o in new.items()}
    rows = [{"topic": t, "partition": p, "previous": current.get((t, p)), "new": new[(t, p)]}
            for t, p in sorted(new)]
    if dry_run:
        return rows
    if share:
        share_offsets_admin.alter_starts(admin, group_id, topic_name, {p: new[(topic_name, p)] for p in parts})
        return rows
    request = OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=-1, member_id="", topics=[
        OffsetCommitRequestTopic(name=topic_name, partitions=[
            OffsetCommitRequestPartition(partition_index=p, committed_offset=new[(topic_name, p)])
            for p in parts])])
    resp = admin.group_request(group_id, 8, request,
                               lambda r: r.topics[0].partitions[0].error_code if r.topics and r.topics[0].partitions
                               else 0)
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code:
                raise AdminError(f"group {group_id}: commit to {t.name}-{p.partition_index} failed with "
                                 f"{error_name(p.error_code)}")
    return rows


def parse_time_ms(text: str) -> int:
    """ISO 8601 (a time without zone is UTC) or epoch milliseconds."""
    if text.isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise AdminError(f"--to-datetime {text!r} is neither ISO 8601 nor epoch milliseconds") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return int(when.timestamp() * 1000)


def delete_groups(admin: Admin, group_ids: list[str]) -> list[dict]:
    rows = []
    for group_id in group_ids:
        resp = admin.group_request(group_id, 42, DeleteGroupsRequest(groups_names=[group_id]),
                                   lambda r: r.results[0].error_code)
        code = resp.results[0].error_code
        if code:
            hint = " (it still has members)" if code == ErrorCode.NON_EMPTY_GROUP else ""
            rows.append({"group": group_id, "deleted": False, "error": error_name(code) + hint})
        else:
            rows.append({"group": group_id, "deleted": True})
    return rows


def delete_offsets(admin: Admin, group_id: str, topic: str) -> list[dict]:
    """A consumer group's committed offsets (OffsetDelete), or a share group's share-partition states
    of the topic (DeleteShareGroupOffsets, admin/share_offsets.py)."""
    if _describe(admin, group_id)["protocol_type"] == "share":
        return share_offsets_admin.delete_starts(admin, group_id, topic)
    topic_name, _, only = topic.partition(":")
    parts = partitions_of(admin, [topic_name])[topic_name]
    if only:
        parts = [p for p in parts if str(p) in only.split(",")]
    request = OffsetDeleteRequest(group_id=group_id, topics=[
        OffsetDeleteRequestTopic(name=topic_name, partitions=[OffsetDeleteRequestPartition(p) for p in parts])])
    resp = admin.group_request(group_id, 47, request, lambda r: r.error_code)
    if resp.error_code:
        raise AdminError(f"group {group_id}: {error_name(resp.error_code)}")
    rows = []
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code:
                raise AdminError(f"group {group_id}: {t.name}-{p.partition_index}: {error_name(p.error_code)}")
            rows.append({"group": group_id, "topic": t.name, "partition": p.partition_index, "deleted": True})
    return rows


def wait_for_group(admin: Admin, group_id: str, *, members: int | None, stable: bool, timeout_s: float,
                   admin_url: str | None = None) -> dict:
    """Poll the group's description (any broker, either protocol) until it has `members` members
    and/or is Stable."""
    deadline = time.monotonic() + timeout_s
    while True:
        group = _describe(admin, group_id)
        state, count = group["state"], len(group["members"])
        exists = state != "Dead" or members == 0  # waiting for no members: a group that is gone has none
        if exists and (members is None or count == members) and (not stable or state == "Stable"):
            return {"group": group_id, "state": state, "members": count}
        if time.monotonic() >= deadline:
            why = ""
            if admin_url:
                try:
                    stuck = http_json(admin_url, f"/v1/groups/{group_id}", timeout_s=2).get("rebalance_in_progress")
                    why = f"; {stuck['why']}" if stuck else ""
                except AdminError:
                    pass
            want = f"{members} member(s)" if members is not None else "any members"
            if state in ("Dead", ""):
                raise AdminError(f"group {group_id} does not exist after {timeout_s:g} s")
            raise AdminError(f"group {group_id} is {state or 'unknown'} with {count} member(s) after "
                             f"{timeout_s:g} s (waited for {'Stable with ' if stable else ''}{want}){why}")
        time.sleep(0.05)


def http_json(base_url: str, path: str, *, method: str = "GET", body: dict | None = None,
              timeout_s: float = 10.0, token: str | None = None) -> dict:
    """A request to kbroker's HTTP endpoint (--metrics-listen); errors become one AdminError line.
    `token`: the test controls' bearer token."""
    url = base_url.rstrip("/") + path
    if "://" not in url:
        url = "http://" + url
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as e:
        try:
            message = json.loads(e.read()).get("error", e.reason)
        except ValueError:
            message = e.reason
        raise AdminError(f"{base_url}: {message}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise AdminError(f"kbroker endpoint {base_url} did not answer: {reason} (is --metrics-listen set?)") from None


def history(admin_url: str, group_id: str) -> dict:
    return http_json(admin_url, f"/v1/groups/{group_id}/history")
