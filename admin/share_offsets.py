"""`kbroker group reset-offsets` and `delete-offsets` of a share group (KIP-932), as Kafka 4.4's
kafka-share-groups.sh does them: a share group has no committed offsets but a start offset per
share-partition, set by AlterShareGroupOffsets (91) and forgotten, topic by topic, by
DeleteShareGroupOffsets (92). Both are refused while the group has members: the tool's own check
("Share group 'g' is not empty."), then the coordinator's NON_EMPTY_GROUP."""

from __future__ import annotations

from ..protocol.messages.alter_share_group_offsets_request import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from ..protocol.messages.delete_share_group_offsets_request import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
)
from .client import Admin, AdminError, error_name

ALTER_SHARE_GROUP_OFFSETS = 91
DELETE_SHARE_GROUP_OFFSETS = 92


def not_empty(group_id: str) -> AdminError:
    """kafka-share-groups.sh's refusal of a group with members (ShareGroupCommand.resetOffsets)."""
    return AdminError(f"Share group '{group_id}' is not empty.")


def _refused(group_id: str, code: int, message: str | None) -> AdminError:
    return AdminError(f"group {group_id}: {error_name(code)}" + (f" ({message})" if message else ""))


def alter_starts(admin: Admin, group_id: str, topic: str, starts: dict[int, int]) -> None:
    """Set the start offset of each share-partition of `topic` in `starts` (partition -> offset)."""
    request = AlterShareGroupOffsetsRequest(group_id=group_id, topics=[AlterShareGroupOffsetsRequestTopic(
        topic_name=topic, partitions=[AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o)
                                      for p, o in sorted(starts.items())])])
    resp = admin.group_request(group_id, ALTER_SHARE_GROUP_OFFSETS, request, lambda r: r.error_code)
    if resp.error_code:
        raise _refused(group_id, resp.error_code, resp.error_message)
    for t in resp.responses:
        for p in t.partitions:
            if p.error_code:
                raise AdminError(f"group {group_id}: {t.topic_name}-{p.partition_index}: {error_name(p.error_code)}"
                                 + (f" ({p.error_message})" if p.error_message else ""))


def delete_starts(admin: Admin, group_id: str, topic: str) -> list[dict]:
    """Forget the state of every share-partition of `topic` (a share group's offsets go topic by topic:
    kafka-share-groups.sh --delete-offsets takes no partitions)."""
    topic_name, _, only = topic.partition(":")
    if only:
        raise AdminError("a share group's offsets are deleted for whole topics (DeleteShareGroupOffsets "
                         "names no partitions): give --topic TOPIC")
    request = DeleteShareGroupOffsetsRequest(group_id=group_id, topics=[
        DeleteShareGroupOffsetsRequestTopic(topic_name=topic_name)])
    resp = admin.group_request(group_id, DELETE_SHARE_GROUP_OFFSETS, request, lambda r: r.error_code)
    if resp.error_code:
        raise _refused(group_id, resp.error_code, resp.error_message)
    rows = []
    for t in resp.responses:
        if t.error_code:
            raise AdminError(f"group {group_id}: {t.topic_name}: {error_name(t.error_code)}"
                             + (f" ({t.error_message})" if t.error_message else ""))
        rows.append({"group": group_id, "topic": t.topic_name, "deleted": True})
    return rows
