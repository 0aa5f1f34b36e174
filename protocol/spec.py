"""The normalised form of Kafka's JSON message definitions.

`tools/codegen.py` turns each JSON file into a module under `protocol/messages/` holding
dataclasses plus one `MessageSpec` built from the classes below. `protocol/codec.py` turns a
spec and a version into a compiled construct. Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# A version range is (low, high) with high None meaning "and every later version";
# None for the whole range means "never" (Kafka's "none").
VersionRange = tuple[int, int | None] | None

PRIMITIVES = frozenset(
    {"bool", "int8", "int16", "uint16", "int32", "int64", "float64", "string", "bytes", "records", "uuid"}
)


def in_range(version: int, versions: VersionRange) -> bool:
    if versions is None:
        return False
    low, high = versions
    return version >= low and (high is None or version <= high)


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field of a struct.

    `kind` is "primitive", "array" (of `element`: a primitive type name or a struct) or "struct".
    """

    name: str                      # python attribute name (snake_case)
    json_name: str                 # the name in Kafka's JSON
    kind: str
    type: str                      # primitive name, or the element primitive name for arrays of primitives, or ""
    versions: VersionRange
    nullable: VersionRange = None
    tagged: VersionRange = None
    tag: int | None = None
    default: Any = None            # python literal default (already converted)
    struct: "StructSpec | None" = None
    flexible_override: VersionRange | str | None = "inherit"  # "inherit" or an explicit range ("none" -> None)

    def present(self, version: int) -> bool:
        return in_range(version, self.versions)

    def is_tagged(self, version: int) -> bool:
        return in_range(version, self.tagged)

    def is_nullable(self, version: int) -> bool:
        return in_range(version, self.nullable)


@dataclass(frozen=True, slots=True)
class StructSpec:
    cls: type
    fields: tuple[FieldSpec, ...]


@dataclass(frozen=True, slots=True)
class MessageSpec:
    name: str
    kind: str                      # request | response | header | data | coordinator-key | coordinator-value
    api_key: int | None
    valid: VersionRange
    flexible: VersionRange
    struct: StructSpec
    listeners: tuple[str, ...] = ()
    latest_version_unstable: bool = False

    def is_flexible(self, version: int) -> bool:
        return in_range(version, self.flexible)

    @property
    def versions(self) -> range:
        if self.valid is None:
            return range(0)
        low, high = self.valid
        assert high is not None
        return range(low, high + 1)
