"""The data directory's identity: cluster id and node id, created once and kept (Kafka's meta.properties).

The file ends with a checksum line over the properties (issue 38; broker/storage/state_file.py
seal_text), a comment to any properties reader: a flipped bit in the cluster id or the node id would
otherwise be read as another identity. A file that fails it is damaged, and the start is refused
with what to do (as for one that does not parse): which identity is right cannot be told. A file
without the line (an older kbroker's) is read as it is."""

from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path

from .storage.state_file import seal_text, unseal_text

FILE = "meta.properties"


def new_cluster_id() -> str:
    # Kafka's format: a random UUID, URL-safe base64 without padding (22 characters).
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def read(path: Path) -> dict:
    """The stored identity; ValueError says what is wrong with a damaged file."""
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise ValueError("not a text file") from None
    text, damage = unseal_text(text)
    if damage is not None:
        raise ValueError(f"{damage}: restore it from a backup; if you changed it on purpose, delete its "
                         f"'# kbroker crc32c' line")
    props: dict[str, str | int] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ValueError(f"line {line[:40]!r} is not key=value")
        props[key.strip()] = value.strip()
    if not props.get("cluster.id"):
        raise ValueError("no cluster.id")
    try:
        props["node.id"] = int(props["node.id"])
    except (KeyError, ValueError):
        raise ValueError(f"node.id {props.get('node.id')!r} is not an integer") from None
    return props


def load_or_create(data_dir: Path, node_id: int, cluster_id: str = "") -> tuple[str, int]:
    """Return (cluster id, node id), creating the file on first start.

    A data directory written by another node id is refused: its logs belong to that node.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / FILE
    if path.exists():
        props = read(path)  # kbroker.broker.startup has already refused a damaged file
        stored_node = props["node.id"]
        if stored_node != node_id:
            raise ValueError(f"{path} belongs to node.id={stored_node}, not {node_id}")
        return props["cluster.id"], stored_node
    cid = cluster_id or new_cluster_id()
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(seal_text(f"#kbroker data directory\nversion=1\ncluster.id={cid}\nnode.id={node_id}\n",
                              "of the lines above"))
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return cid, node_id
