"""Start-up checks that run before the broker writes anything.

A broker that cannot start should say why in one line and leave the data directory as it found it.
So, in this order, before any log event and before the first byte is written:

1. the data directory: not a file, writable by this user, not on a read-only filesystem;
2. what is stored there: `meta.properties` parses and names this node (a damaged one is named, never
   silently replaced). A damaged topic record does not stop the start: that topic alone is fenced,
   with an error event naming the file (broker/storage/log/topic_files.py), and the others serve;
3. every listener's socket is bound (a port in use or a host that is not ours is named);
4. only then is the directory created and `.lock` taken with an OS lock (flock), as Kafka does, so
   a second broker on the same directory is refused while the first runs.

The bound sockets are handed to the servers, so nothing can take a port between check and serve.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

from . import cluster_meta
from .config import BrokerConfig, Sources
from .listeners import Endpoint

LOCK_FILE = ".lock"


class StartupError(Exception):
    """Why the broker cannot start: one line, printed as is."""


@dataclass
class Prepared:
    """What the checks leave the broker: bound sockets per listener, and the held lock."""

    sockets: dict[str, socket.socket] = field(default_factory=dict)
    lock_fd: int | None = None

    def close(self) -> None:
        for sock in self.sockets.values():
            sock.close()
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None


def prepare(config: BrokerConfig, sources: Sources | None = None) -> Prepared:
    src = sources or Sources()
    data_dir = Path(config.data_dir)
    label = src.label("data_dir")
    check_data_dir(data_dir, label)
    check_stored_files(data_dir, config, src)
    prepared = Prepared()
    try:
        listeners = config.listener_set(src)
        option = src.label("listeners") if config.listeners.strip() else src.label("listen")
        for endpoint in listeners.bind:
            prepared.sockets[endpoint.name] = bind(endpoint, option)
        prepared.lock_fd = lock_data_dir(data_dir, label)
    except BaseException:
        prepared.close()
        raise
    return prepared


# --- 1. the directory ---------------------------------------------------------------------------------

def check_data_dir(path: Path, label: str) -> None:
    if path.exists() and not path.is_dir():
        raise StartupError(f"{label}: {path} is a file, not a directory")
    existing = path
    while not existing.exists():  # a directory we will create: its nearest existing parent decides
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise StartupError(f"{label}: cannot create {path}: {existing} is a file")
    if _read_only_fs(existing):
        raise StartupError(f"{label}: {path} is on a read-only filesystem")
    if not os.access(existing, os.W_OK | os.X_OK):
        who = f"uid {os.getuid()}"
        what = f"{path} is not writable" if existing == path else f"cannot create {path}: {existing} is not writable"
        raise StartupError(f"{label}: {what} by this user ({who})")
    for child in (path / cluster_meta.FILE, path / "topics"):
        if child.exists() and not os.access(child, os.W_OK):
            raise StartupError(f"{label}: {child} is not writable by this user (uid {os.getuid()})")


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


# --- 2. what is stored ----------------------------------------------------------------------------------

def check_stored_files(path: Path, config: BrokerConfig, src: Sources) -> None:
    meta = path / cluster_meta.FILE
    if meta.exists():
        try:
            props = cluster_meta.read(meta)
        except ValueError as e:
            raise StartupError(f"{meta}: damaged: {e}") from None
        except OSError as e:
            raise StartupError(f"{meta}: cannot read: {e.strerror or e}") from None
        if props["node.id"] != config.node_id:
            raise StartupError(f"{meta}: this data directory belongs to node.id={props['node.id']}, "
                               f"not {config.node_id} ({src.label('node_id')})")
        if config.cluster_id and props["cluster.id"] != config.cluster_id:
            raise StartupError(f"{meta}: this data directory belongs to cluster {props['cluster.id']}, not "
                               f"{config.cluster_id} ({src.label('cluster_id')}): give a new cluster its own "
                               f"--data-dir, or set the cluster id back")


# --- 3. the sockets -------------------------------------------------------------------------------------

def bind(endpoint: Endpoint, option: str) -> socket.socket:
    host = endpoint.host
    where = f"{option}: {endpoint.url()}"
    try:
        if host == "":  # Kafka: an empty host binds every interface
            if socket.has_dualstack_ipv6():
                return socket.create_server(("", endpoint.port), family=socket.AF_INET6, dualstack_ipv6=True,
                                            backlog=128)
            return socket.create_server(("0.0.0.0", endpoint.port), backlog=128)
        family = _literal_family(host)
        if family is not None:  # an address: nothing to resolve (getaddrinfo imports the idna codec, ~1 ms)
            return socket.create_server((host, endpoint.port), family=family, backlog=128)
        infos = socket.getaddrinfo(host, endpoint.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, _, _, _, address = infos[0]
        return socket.create_server(address, family=family, backlog=128)
    except socket.gaierror as e:
        raise StartupError(f"{where}: cannot resolve host {host!r} ({e.strerror})") from None
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise StartupError(f"{where}: port {endpoint.port} is already in use (another broker?); "
                               f"{_move_hint(option)}") from None
        if e.errno == errno.EADDRNOTAVAIL:
            raise StartupError(f"{where}: {host} is not an address of this machine") from None
        if e.errno == errno.EACCES:
            raise StartupError(f"{where}: not permitted to bind port {endpoint.port} as this user") from None
        raise StartupError(f"{where}: cannot listen: {e.strerror or e}") from None


def _literal_family(host: str) -> socket.AddressFamily | None:
    """AF_INET or AF_INET6 for an IP address literal, None for a name."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
            return family
        except OSError:
            pass
    return None


# --- 4. the lock ----------------------------------------------------------------------------------------

def lock_data_dir(path: Path, label: str) -> int:
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(path / LOCK_FILE, os.O_CREAT | os.O_RDWR, 0o644)
    except OSError as e:
        raise StartupError(f"{label}: cannot use {path}: {e.strerror or e}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StartupError(f"{label}: {path} is in use by another kbroker (it holds {path / LOCK_FILE}); give this one "
                           f"its own directory: --data-dir DIR (KBROKER_DATA_DIR=DIR, make run DATA_DIR=DIR)") from None
    return fd


def _move_hint(option: str) -> str:
    """How to listen elsewhere, in the terms of the option that chose this port."""
    if option in ("--listen", "KBROKER_LISTEN"):
        return "listen elsewhere: --listen HOST:PORT (KBROKER_LISTEN=HOST:PORT, make run LISTEN=HOST:PORT)"
    return f"change the port in {option}"
