"""File plumbing shared by the log modules: the broker-wide cache of open segment and index files,
and durable whole-file writes (with a lock for rewrites two processes may make).

The file-descriptor budget: every segment has three files, and a broker with thousands of partitions
(or tiny rolling segments) would run out of descriptors if each stayed open. Instead every access
leases a descriptor from one bounded LRU cache; idle ones are closed when the cache is full and
reopened by path on the next access. Leases make this safe across threads (fsyncs, compaction and
replay run in worker threads): a leased descriptor is never closed under its user, eviction and
`forget` only close it once the lease is released.
"""

from __future__ import annotations

import errno
import fcntl
import os
import resource
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

_MIN_CAPACITY = 8


def default_capacity() -> int:
    """A quarter of the soft RLIMIT_NOFILE: the rest stays for sockets, snapshots and the runtime."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        soft = 65536
    return max(_MIN_CAPACITY, soft // 4)


class _Entry:
    __slots__ = ("fd", "leases", "forgotten")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.leases = 0
        self.forgotten = False


class FileHandleCache:
    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = max(_MIN_CAPACITY, capacity if capacity is not None else default_capacity())
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self.opens = 0  # descriptors opened since start (a cache-miss count, for tests and stats)
        self._forgets = 0  # bumped by every forget(): an open that raced one is not cached

    def __len__(self) -> int:
        return len(self._entries)

    def lease(self, path: Path | str, *, create: bool = False) -> _Lease:
        """`with cache.lease(path) as fd:` an open read-write descriptor of `path` for the block.

        Raises FileNotFoundError when the file is gone (and `create` is false)."""
        return _Lease(self, path if isinstance(path, str) else str(path), create)

    def create(self, path: Path | str) -> int:
        """Create `path` if missing and return its size, without caching a descriptor: a new segment
        of an idle partition then holds no cache entry (and no descriptor) until it is first used."""
        key = path if isinstance(path, str) else str(path)
        if key in self._entries:
            with self.lease(key) as fd:
                return os.fstat(fd).st_size
        fd = os.open(key, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            return os.fstat(fd).st_size
        finally:
            os.close(fd)

    def _acquire(self, key: str, create: bool) -> _Entry:
        flags = os.O_RDWR | (os.O_CREAT if create else 0) | getattr(os, "O_CLOEXEC", 0)
        while True:
            with self._lock:
                entry = self._entries.get(key)
                if entry is not None:
                    self._entries.move_to_end(key)
                    entry.leases += 1
                    return entry
                forgets = self._forgets
            # Open outside the lock (a syscall; two threads racing here just open twice). A `forget`
            # meanwhile may mean the path now names another file than the one opened: open again.
            fd = os.open(key, flags, 0o644)
            with self._lock:
                self.opens += 1
                if self._forgets != forgets:
                    os.close(fd)
                    continue
                existing = self._entries.get(key)
                if existing is not None:
                    os.close(fd)
                    existing.leases += 1
                    self._entries.move_to_end(key)
                    return existing
                entry = _Entry(fd)
                entry.leases = 1
                self._entries[key] = entry
                self._evict_locked()
                return entry

    def _release(self, entry: _Entry) -> None:
        with self._lock:
            entry.leases -= 1
            if entry.leases == 0 and entry.forgotten:
                os.close(entry.fd)
                entry.fd = -1
            else:
                self._evict_locked()

    def _evict_locked(self) -> None:
        excess = len(self._entries) - self.capacity
        if excess <= 0:
            return
        for key in list(self._entries):
            entry = self._entries[key]
            if entry.leases:
                continue
            del self._entries[key]
            os.close(entry.fd)
            excess -= 1
            if excess <= 0:
                return

    def forget(self, path: Path | str) -> None:
        """Close the cached descriptor of `path` (now, or when its last lease ends): the file is being
        deleted or replaced, so the next lease must open whatever is at the path then."""
        with self._lock:
            self._forgets += 1
            entry = self._entries.pop(str(path), None)
            if entry is None:
                return
            entry.forgotten = True
            if entry.leases == 0:
                os.close(entry.fd)
                entry.fd = -1

    def close_all(self) -> None:
        with self._lock:
            keys = list(self._entries)
        for key in keys:
            self.forget(key)


class _Lease:
    """The context manager of one lease (a class, not @contextmanager: it sits on every append and read)."""

    __slots__ = ("_cache", "_key", "_create", "_entry")

    def __init__(self, cache: FileHandleCache, key: str, create: bool) -> None:
        self._cache, self._key, self._create = cache, key, create

    def __enter__(self) -> int:
        self._entry = self._cache._acquire(self._key, self._create)
        return self._entry.fd

    def __exit__(self, *_: object) -> None:
        self._cache._release(self._entry)


# One budget for the whole process: descriptors are a process-wide resource. The LogManager sizes it.
FILES = FileHandleCache()


# The longest file name Linux file systems take (NAME_MAX, bytes). A topic of Kafka's longest name
# (249 characters) has a metadata file of 254: names made from such a name must be shortened to fit.
NAME_MAX = 255


def bounded_name(stem: str, suffix: str) -> str:
    """`stem + suffix`; past NAME_MAX bytes, the stem's end gives way to a digest of the whole stem,
    so two long stems sharing a beginning still make different names."""
    name = stem + suffix
    if len(name.encode()) <= NAME_MAX:
        return name
    import hashlib  # only for names this long: not on every start's path

    digest = hashlib.blake2b(stem.encode(), digest_size=8).hexdigest()
    keep = NAME_MAX - len(suffix.encode()) - len(digest) - 1
    return stem.encode()[:keep].decode(errors="ignore") + "." + digest + suffix


def write_file_durably(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write-temp, fsync, rename, fsync the directory: the file is either old or new after a crash."""
    tmp = path.with_name(bounded_name(path.name, ".tmp"))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    try:
        fd = os.open(tmp, flags, mode)
    except FileExistsError:  # left by a crash mid-write, with a mode that may not be `mode`
        os.unlink(tmp)
        fd = os.open(tmp, flags, mode)
    try:
        view = memoryview(data)
        while view:  # a write may take less than it was given
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


# How long a rewrite waits for another process's: a holder that never lets go (a stopped `kbroker
# user add`) must not hold the broker's state-file writes, which share one worker, or its exit.
REWRITE_LOCK_WAIT_S = 5.0


class RewriteLockTimeout(OSError):
    pass


@contextmanager
def held_for_rewrite(path: Path) -> Iterator[None]:
    """An exclusive advisory lock (flock) on the directory holding `path`, for a read-modify-write of
    `path` that another process may make at the same time: `kbroker user add` beside a running
    broker. Without it, one's rewrite could drop the other's change, or (`write_file_durably` clears
    a temporary file it takes for a crash's leftover) rename the other's half-written file into
    place. Raises RewriteLockTimeout after REWRITE_LOCK_WAIT_S.

    The directory, not a lock file beside `path`: a lock file deleted while held (by hand, or by a
    clean-up of stray files) let the next writer lock a new one and rewrite beside the holder. A
    directory cannot be removed while it holds `path`. Writers of other files in the same directory
    wait for each other too; the rewrites it guards take milliseconds. Where a directory cannot be
    locked (NFS emulates flock with record locks, which want a file open for writing) it falls back
    to `<path>.lock`, left in place."""
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pass  # held by another writer: waited for below
    except OSError as e:
        os.close(fd)
        if e.errno not in _NO_DIRECTORY_LOCKS:
            raise
        fd = os.open(path.with_name(bounded_name(path.name, ".lock")), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + REWRITE_LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise RewriteLockTimeout(f"{path.parent} (to rewrite {path.name}) is held by another "
                                             f"process") from None
                time.sleep(0.01)
        yield
    finally:
        os.close(fd)  # releases the lock


_NO_DIRECTORY_LOCKS = (errno.EBADF, errno.ENOLCK, errno.EINVAL, errno.EOPNOTSUPP)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
