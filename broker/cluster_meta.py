"""The data directory's identity: cluster id and node id, created once and kept (Kafka's meta.properties).

The file ends with a checksum line over the properties (issue 38; broker/storage/state_file.py
seal_text), a comment to any properties reader: a flipped bit in the cluster id or the node id would
otherwise be read as another identity. A file that fails it is damaged, and the start is refused
with what to do (as for one that does not parse): which identity is right cannot be told. A file
without the line (an older kbroker's, or one an operator edited and took the line out of, as the
refusal tells them to) is read as it is and sealed by that start, with a `meta_properties_sealed`
event: from then on its identity is checked too."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

import structlog

from .storage.log.files import write_file_durably
from .storage.state_file import is_sealed, seal_text, unseal_text

log = structlog.get_logger("kbroker.cluster_meta")

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
        text = path.read_text()
        if not is_sealed(text):
            _write(path, text if text.endswith("\n") else text + "\n")
            log.info("meta_properties_sealed", file=str(path), cluster_id=props["cluster.id"], node_id=stored_node,
                     detail="the file had no checksum line (written by a kbroker before issue 38, or edited by "
                            "hand with the line taken out): it has one now, over the lines as they were read")
        return props["cluster.id"], stored_node
    cid = cluster_id or new_cluster_id()
    _write(path, f"#kbroker data directory\nversion=1\ncluster.id={cid}\nnode.id={node_id}\n")
    return cid, node_id


def _write(path: Path, body: str) -> None:
    """`body` and its checksum line, replacing the file whole (a crash leaves the old one or the new)."""
    write_file_durably(path, seal_text(body, "of the lines above"))


# Several nodes (issue 41): how many a cluster grew to with `kbroker test node-add`, kept so that a
# restart serves the added nodes again (on the same ports: node k on each listener's port + k).
NODES_FILE = "cluster-nodes.properties"


def stored_node_count(data_dir: Path) -> int | None:
    """The node count an earlier run grew to (None: never grown). A damaged file is reported and
    left out: the nodes are then those the settings say."""
    path = data_dir / NODES_FILE
    if not path.exists():
        return None
    try:
        text, damage = unseal_text(path.read_text())
        if damage is not None:
            raise ValueError(damage)
        values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))
        return int(values["nodes"])
    except (OSError, UnicodeDecodeError, ValueError, KeyError) as e:
        log.error("cluster_nodes_file_damaged", file=str(path), error=str(e),
                  detail="the nodes added at run time are not served; the settings' count is")
        return None


def store_node_count(data_dir: Path, nodes: int) -> None:
    _write(data_dir / NODES_FILE, f"#kbroker nodes, with those added at run time\nnodes={nodes}\n")
