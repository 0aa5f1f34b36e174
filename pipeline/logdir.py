"""Find the segment files of a kbroker data directory (see broker/storage/log/manager.py for the layout), and
plan the tasks that read them.

Cheap: it lists directories and stats files, it never opens a segment. The data source calls it on
the driver; executors only receive locations (a local path, `file:` or any URI storage.py reads), so on
a cluster the directory must be visible at the same location from every node (a shared file system or
an object store).

Tasks (`plan_slices`): every segment is cut into slices of at most `target_bytes` (each slice holds the
batches that start inside it), and small slices are packed together up to that size, so a 1 GiB
segment is several tasks and a thousand 10 KiB segments are a few, not a thousand. A task's memory is
bounded by the rows it keeps before handing Arrow batches on (decode.ROWS_PER_ARROW_BATCH), not by the
size of what it reads.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ..protocol.data_dir import TOPICS_DIR
from . import storage

OFFSETS_TOPIC = "__consumer_offsets"
TARGET_TASK_BYTES = 64 << 20
_PARTITION_DIR = re.compile(r"(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>\d+)")
_SEGMENT_FILE = re.compile(r"(?P<base>\d{20})\.log")


class DataDirError(Exception):
    """The data directory cannot be read at all (missing, not a directory, no kbroker layout)."""


@dataclass(frozen=True, slots=True)
class SegmentFile:
    topic: str
    partition: int
    base_offset: int
    path: str  # a local path or a URI
    size: int
    last_in_partition: bool  # the active segment: a partial tail there is an in-flight write, not damage


@dataclass(frozen=True, slots=True)
class SegmentSlice:
    """The batches of `segment` that start at a byte position in [start, end)."""

    segment: SegmentFile
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class PartitionDir:
    topic: str
    partition: int
    path: str


@dataclass(frozen=True, slots=True)
class TopicMeta:
    name: str
    partitions: int  # -1 when its metadata file is damaged
    topic_id: str | None


def read_topics(data_dir: str) -> dict[str, TopicMeta] | None:
    """topic -> its metadata from `topics/*.json`; None when the directory has no topics folder."""
    meta_dir = storage.join(data_dir, TOPICS_DIR)
    if storage.kind(meta_dir) != "dir":
        return None
    topics: dict[str, TopicMeta] = {}
    for entry in storage.listdir(meta_dir):
        if not entry.name.endswith(".json"):
            continue
        try:
            raw = json.loads(storage.read_text(entry.location))
            topics[str(raw["name"])] = TopicMeta(str(raw["name"]), int(raw["partitions"]), raw.get("topic_id"))
        except (OSError, ValueError, KeyError, TypeError):
            # A damaged metadata file must not hide the topic's logs: fall back to the file name and
            # whatever partition directories exist.
            name = entry.name[: -len(".json")]
            topics[name] = TopicMeta(name, -1, None)
    return topics


def topic_names_by_id(data_dir: str) -> dict[str, str]:
    """topic id (a UUID's string) -> topic name: KIP-848 records name partitions by topic id."""
    return {m.topic_id: m.name for m in (read_topics(data_dir) or {}).values() if m.topic_id}


def check_data_dir(data_dir: str) -> str:
    kind = storage.kind(str(data_dir))
    if kind == "missing":
        raise DataDirError(f"data directory {str(data_dir)!r} does not exist")
    if kind != "dir":
        raise DataDirError(f"data directory {str(data_dir)!r} is not a directory")
    return str(data_dir)


def partition_dirs(data_dir: str, topics: set[str] | None = None) -> list[PartitionDir]:
    """Every `<topic>-<partition>` directory of a known topic (topics/*.json is the source of truth;
    without a topics folder every directory that looks like a partition is taken)."""
    root = check_data_dir(str(data_dir))
    known = read_topics(root)
    out: list[PartitionDir] = []
    for child in storage.listdir(root):
        match = _PARTITION_DIR.fullmatch(child.name)
        if match is None or not child.is_dir:
            continue
        topic, partition = match["topic"], int(match["partition"])
        if known is not None and topic not in known:
            continue  # orphan or being deleted (`*-delete`): the broker sweeps these
        if topics is not None and topic not in topics:
            continue
        out.append(PartitionDir(topic, partition, child.location))
    return out


def list_segments(data_dir: str, topics: set[str] | None = None) -> list[SegmentFile]:
    """Segment files of every partition, ordered by topic, partition and base offset."""
    out: list[SegmentFile] = []
    for pdir in partition_dirs(str(data_dir), topics):
        found = sorted((int(m["base"]), e.location, e.size) for e in storage.listdir(pdir.path)
                       if not e.is_dir and (m := _SEGMENT_FILE.fullmatch(e.name)) is not None)
        for i, (base, path, size) in enumerate(found):
            out.append(SegmentFile(pdir.topic, pdir.partition, base, path, size, i == len(found) - 1))
    return out


def plan_slices(segments: list[SegmentFile], target_bytes: int = TARGET_TASK_BYTES) -> list[list[SegmentSlice]]:
    """Tasks of slices adding up to about `target_bytes` each, largest first (empty files hold no
    rows and cost nothing)."""
    slices: list[SegmentSlice] = []
    for s in segments:
        for start in range(0, s.size, target_bytes):
            slices.append(SegmentSlice(s, start, min(start + target_bytes, s.size)))
    slices.sort(key=lambda sl: -(sl.end - sl.start))
    tasks: list[list[SegmentSlice]] = []
    sizes: list[int] = []
    for sl in slices:  # first fit, decreasing: few tasks, each near the target
        size = sl.end - sl.start
        for i, used in enumerate(sizes):
            if used + size <= target_bytes:
                tasks[i].append(sl)
                sizes[i] += size
                break
        else:
            tasks.append([sl])
            sizes.append(size)
    return tasks


def parse_topics_option(value: str | None) -> set[str] | None:
    if value is None or not value.strip():
        return None
    return {t.strip() for t in value.split(",") if t.strip()}
