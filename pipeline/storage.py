"""Where the job reads and writes: a local path, or any URI a Hadoop-compatible file system serves.

Spark writes the Parquet tables itself (its Hadoop file systems take `file:`, `hdfs:`, `s3a:`, ...).
Everything the job's own Python code touches - listing the data directory on the driver, reading
segment files on the executors, writing the report on the driver - goes through here: plain paths and
`file:` URIs with the os module (segments memory-mapped), other schemes through `pyarrow.fs`
(`s3a:`/`s3n:` are pyarrow's `s3:`; `hdfs:` needs libhdfs, as pyarrow's HadoopFileSystem does;
`gs:` its GCS file system). No import of Spark: executors use this too.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from typing import Any, Iterator
from urllib.parse import unquote, urlparse

_ALIASES = {"s3a": "s3", "s3n": "s3"}


def is_local(location: str) -> bool:
    scheme = urlparse(str(location)).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def local_path(location: str) -> str:
    """The file system path of a local location (`file:///x`, `file:/x` or a plain path)."""
    text = str(location)
    if text.startswith("file:"):
        return unquote(urlparse(text).path) or "/"
    return text


def join(location: str, *names: str) -> str:
    if is_local(location):
        return os.path.join(local_path(location), *names)
    return posixpath.join(str(location), *names)


def for_spark(location: str) -> str:
    """What to hand Spark's readers and writers: absolute local paths, other URIs as they are."""
    return os.path.abspath(local_path(location)) if is_local(location) else str(location)


def _remote(location: str) -> tuple[Any, str]:
    from pyarrow import fs as pafs

    parsed = urlparse(str(location))
    scheme = _ALIASES.get(parsed.scheme, parsed.scheme)
    uri = parsed._replace(scheme=scheme).geturl()
    filesystem, path = pafs.FileSystem.from_uri(uri)
    return filesystem, path


@dataclass(frozen=True, slots=True)
class Entry:
    name: str
    location: str
    is_dir: bool
    size: int


def listdir(location: str) -> list[Entry]:
    """The entries of a directory, sorted by name; FileNotFoundError when it is not one."""
    if is_local(location):
        root = local_path(location)
        with os.scandir(root) as entries:
            out = [Entry(e.name, e.path, e.is_dir(), e.stat().st_size if e.is_file() else 0) for e in entries]
        return sorted(out, key=lambda e: e.name)
    from pyarrow import fs as pafs

    filesystem, path = _remote(location)
    infos = filesystem.get_file_info(pafs.FileSelector(path, recursive=False))
    prefix = str(location).rstrip("/")
    return sorted((Entry(posixpath.basename(i.path), f"{prefix}/{posixpath.basename(i.path)}",
                         i.type == pafs.FileType.Directory, i.size or 0) for i in infos), key=lambda e: e.name)


def kind(location: str) -> str:
    """"dir", "file" or "missing"."""
    if is_local(location):
        path = local_path(location)
        return "dir" if os.path.isdir(path) else "file" if os.path.exists(path) else "missing"
    from pyarrow import fs as pafs

    filesystem, path = _remote(location)
    info = filesystem.get_file_info(path)
    return {pafs.FileType.Directory: "dir", pafs.FileType.File: "file"}.get(info.type, "missing")


def read_text(location: str) -> str:
    if is_local(location):
        with open(local_path(location), encoding="utf-8") as f:
            return f.read()
    filesystem, path = _remote(location)
    with filesystem.open_input_stream(path) as f:
        return f.read().decode("utf-8")


def read_lines(location: str) -> Iterator[str]:
    yield from read_text(location).splitlines()


def write_bytes(location: str, data: bytes) -> None:
    if is_local(location):
        path = local_path(location)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        return
    filesystem, path = _remote(location)
    filesystem.create_dir(posixpath.dirname(path), recursive=True)
    with filesystem.open_output_stream(path) as f:
        f.write(data)


class RandomAccess:
    """Byte ranges of one file: memory-mapped when local, ranged reads through pyarrow otherwise."""

    def __init__(self, location: str) -> None:
        self.location = location
        self._mm: Any = None
        self._fd: int | None = None
        self._remote: Any = None
        if is_local(location):
            import mmap

            self._fd = os.open(local_path(location), os.O_RDONLY)
            self.size = os.fstat(self._fd).st_size
            self._mm = mmap.mmap(self._fd, 0, access=mmap.ACCESS_READ) if self.size else b""
        else:
            filesystem, path = _remote(location)
            self._remote = filesystem.open_input_file(path)
            self.size = self._remote.size()

    def read(self, position: int, length: int) -> tuple[Any, int]:
        """(buffer, offset): `length` bytes (fewer at the end of the file) start at `offset` of
        `buffer`. Local files answer the whole mapping and `position` itself (no copy, and no view
        left behind to keep the mapping from closing); remote ones the bytes read and 0."""
        if self._remote is not None:
            return self._remote.read_at(length, position), 0
        return self._mm, position

    def close(self) -> None:
        if self._remote is not None:
            self._remote.close()
        if self._fd is not None:
            if not isinstance(self._mm, bytes):
                self._mm.close()
            os.close(self._fd)

    def __enter__(self) -> RandomAccess:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()
