"""The `__consumer_offsets` record types of group types beyond classic and consumer (share groups, a
test's own), registered by their codecs: codec.py writes and reads them like its own. Apart from
codec.py so that a record codec registering itself does not import the codec that imports it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# classic group record types (codec.py's LEGACY_OFFSET_COMMIT, OFFSET_COMMIT, GROUP_METADATA)
_CLASSIC = (0, 1, 2)

# The record types of group types beyond classic and consumer (share, streams, a test's own): each
# registers its codec here with its group type, and the writer and the loader of `__consumer_offsets`
# carry its records like any other (a record type nobody registered is skipped at load, as Kafka's
# loader skips what it does not know).
_ENCODERS: dict[type, Callable[[Any], tuple[bytes, bytes | None]]] = {}
_DECODERS: dict[int, Callable[[bytes, bytes | None], Any]] = {}


def register_record_codec(record_type: int, classes: tuple[type, ...],
                          encode: Callable[[Any], tuple[bytes, bytes | None]],
                          decode: Callable[[bytes, bytes | None], Any]) -> None:
    """Records of `classes` are written with `encode` (a key starting with the int16 `record_type`)
    and keys of that type are read with `decode`."""
    if record_type in _CLASSIC:
        raise ValueError(f"record type {record_type} is the classic group's")
    for cls in classes:
        _ENCODERS[cls] = encode
    _DECODERS[record_type] = decode


