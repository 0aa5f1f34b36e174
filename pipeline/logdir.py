"""Find the segment files of a kbroker data directory (see broker/storage/log/manager.py for the layout).

Pure Python and cheap: it lists directories and stats files, it never opens a segment. The data source
calls it on the driver to plan one input partition per segment file; executors only receive paths, so
on a cluster the directory must be visible at the same path on every node (a shared file system).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..protocol.data_dir import TOPICS_DIR

OFFSETS_TOPIC = "__consumer_offsets"
_PARTITION_DIR = re.compile(r"(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>\d+)")
_SEGMENT_FILE = re.compile(r"(?P<base>\d{20})\.log")


class DataDirError(Exception):
    """The data directory cannot be read at all (missing, not a directory, no kbroker layout)."""


@dataclass(frozen=True, slots=True)
class SegmentFile:
    topic: str
    partition: int
    base_offset: int
    path: str
    size: int
    last_in_partition: bool  # the active segment: a partial tail there is an in-flight write, not damage


@dataclass(frozen=True, slots=True)
class PartitionDir:
    topic: str
    partition: int
    path: str
    log_start_offset: int | None  # from checkpoint.json when present


def _read_topic_names(data_dir: Path) -> dict[str, int] | None:
    """topic -> partition count from `topics/*.json`; None when the directory has no topics folder."""
    meta_dir = data_dir / TOPICS_DIR
    if not meta_dir.is_dir():
        return None
    topics: dict[str, int] = {}
    for meta_path in sorted(meta_dir.glob("*.json")):
        try:
            raw = json.loads(meta_path.read_text())
            topics[str(raw["name"])] = int(raw["partitions"])
        except (OSError, ValueError, KeyError, TypeError):
            # A damaged metadata file must not hide the topic's logs: fall back to the file name and
            # whatever partition directories exist.
            topics[meta_path.stem] = -1
    return topics


def check_data_dir(data_dir: str | os.PathLike[str]) -> Path:
    path = Path(data_dir)
    if not path.exists():
        raise DataDirError(f"data directory {str(path)!r} does not exist")
    if not path.is_dir():
        raise DataDirError(f"data directory {str(path)!r} is not a directory")
    return path


def partition_dirs(data_dir: str | os.PathLike[str], topics: set[str] | None = None) -> list[PartitionDir]:
    """Every `<topic>-<partition>` directory of a known topic (topics/*.json is the source of truth;
    without a topics folder every directory that looks like a partition is taken)."""
    root = check_data_dir(data_dir)
    known = _read_topic_names(root)
    out: list[PartitionDir] = []
    for child in sorted(root.iterdir()):
        match = _PARTITION_DIR.fullmatch(child.name)
        if match is None or not child.is_dir():
            continue
        topic, partition = match["topic"], int(match["partition"])
        if known is not None and topic not in known:
            continue  # orphan or being deleted (`*-delete`): the broker sweeps these
        if topics is not None and topic not in topics:
            continue
        start: int | None = None
        try:
            start = int(json.loads((child / "checkpoint.json").read_text())["log_start_offset"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        out.append(PartitionDir(topic, partition, str(child), start))
    return out


def list_segments(data_dir: str | os.PathLike[str], topics: set[str] | None = None) -> list[SegmentFile]:
    """Segment files of every partition, ordered by topic, partition and base offset."""
    out: list[SegmentFile] = []
    for pdir in partition_dirs(data_dir, topics):
        found: list[tuple[int, str, int]] = []
        with os.scandir(pdir.path) as entries:
            for entry in entries:
                match = _SEGMENT_FILE.fullmatch(entry.name)
                if match is not None and entry.is_file():
                    found.append((int(match["base"]), entry.path, entry.stat().st_size))
        found.sort()
        for i, (base, path, size) in enumerate(found):
            out.append(SegmentFile(pdir.topic, pdir.partition, base, path, size, i == len(found) - 1))
    return out


def parse_topics_option(value: str | None) -> set[str] | None:
    if value is None or not value.strip():
        return None
    return {t.strip() for t in value.split(",") if t.strip()}
