"""The codec's caches (protocol/codec.py) are keyed by the spec object, never by a name two specs can
share or by an id another object can get once the first is collected."""

from __future__ import annotations

import gc
from dataclasses import dataclass

from kbroker.protocol import codec, compiler
from kbroker.protocol.spec import FieldSpec, MessageSpec, StructSpec


def _spec(name: str, wire_type: str) -> tuple[MessageSpec, type]:
    @dataclass(slots=True)
    class Body:
        a: int = 0

    struct = StructSpec(Body, (FieldSpec("a", "A", "primitive", wire_type, versions=(0, None)),))
    return MessageSpec(name=name, kind="data", api_key=None, valid=(0, 0), flexible=None, struct=struct), Body


def test_two_specs_sharing_a_name_each_get_their_own_codec():
    narrow, narrow_body = _spec("SameName", "int32")
    wide, wide_body = _spec("SameName", "int64")
    assert codec.encode(narrow, 0, narrow_body(7)) == b"\x00\x00\x00\x07"
    assert codec.encode(wide, 0, wide_body(7)) == b"\x00" * 7 + b"\x07"
    assert codec.decode(wide, 0, b"\x00" * 7 + b"\x09") == wide_body(9)


def test_specs_made_and_dropped_never_reuse_a_collected_specs_codec():
    for i in range(30):
        wire_type = ("int32", "int64", "int16")[i % 3]
        spec, body = _spec("Temporary", wire_type)
        assert len(codec.encode(spec, 0, body(1))) == {"int16": 2, "int32": 4, "int64": 8}[wire_type]
        del spec, body
        gc.collect()


def test_equal_struct_specs_that_are_distinct_objects_get_distinct_structs():
    spec, _ = _spec("Twin", "int32")
    twin = StructSpec(spec.struct.cls, spec.struct.fields)
    assert twin == spec.struct and twin is not spec.struct
    first = compiler.KafkaStruct.of(spec.struct, 0, False)
    assert compiler.KafkaStruct.of(spec.struct, 0, False) is first
    second = compiler.KafkaStruct.of(twin, 0, False)
    assert second is not first and second.spec is twin and first.spec is spec.struct
    assert compiler.compiled_struct(first) is compiler.compiled_struct(first)
    assert compiler.compiled_struct(second) is not compiler.compiled_struct(first)
