"""Small JSON files with a checksum: the producer snapshots, the partition checkpoints, the topic
records and the producer-id block (issue 38: Kafka's producer snapshot carries a CRC32C and a
mismatch is an error; a bit flipped in ours used to change what read_committed consumers saw).

The file stays one JSON object, so what reads it offline (the analytics pipeline reads the topic
records and checkpoints) reads it as before: beside its fields it holds `"crc32c"`, the CRC32C of
the object's other fields in a canonical encoding (sorted keys, no spaces). A reader re-encodes
what it parsed and compares: a flipped bit in a value, a key or the checksum itself is a
`ChecksumMismatch`; a file that no longer parses is a `ValueError` as before. A file without the
field was written by a kbroker before checksums: it is read as it is (`Loaded.legacy`), and the
next write of it adds one.

What a caller does with a mismatch is its own to decide (a snapshot is rebuilt from the log, a
checkpoint is treated as missing, a topic is fenced), but it never trusts the content and always
logs an error event naming the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ...protocol.crc import crc32c

FIELD = "crc32c"


class ChecksumMismatch(ValueError):
    """The file parses but its checksum does not match its content (`body`: what it says, untrusted)."""

    def __init__(self, stored: object, computed: str, body: dict[str, Any]) -> None:
        super().__init__(f"checksum mismatch: the file says {stored!r}, its content gives {computed}")
        self.stored = stored
        self.computed = computed
        self.body = body


def _canonical(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def _checksum(body: dict[str, Any]) -> str:
    return f"{crc32c(_canonical(body)):08x}"


def dumps(body: dict[str, Any], *, indent: int | None = None) -> bytes:
    """`body` as JSON with its checksum (`body` must not hold the field itself)."""
    assert FIELD not in body
    framed = dict(body)
    framed[FIELD] = _checksum(body)
    if indent is None:
        return json.dumps(framed, separators=(",", ":")).encode()
    return json.dumps(framed, indent=indent, sort_keys=True).encode()


@dataclass(slots=True)
class Loaded:
    body: dict[str, Any]
    legacy: bool  # no checksum: written by a kbroker before checksums (trusted as before)


def loads(raw: bytes | str) -> Loaded:
    """The object a file holds, its checksum checked. ValueError when it does not parse as a JSON
    object, ChecksumMismatch (a ValueError) when its checksum is wrong."""
    body = json.loads(raw)
    if not isinstance(body, dict):
        raise ValueError(f"expected a JSON object, found {type(body).__name__}")
    if FIELD not in body:
        return Loaded(body, legacy=True)
    stored = body.pop(FIELD)
    computed = _checksum(body)
    if stored != computed:
        raise ChecksumMismatch(stored, computed, body)
    return Loaded(body, legacy=False)
