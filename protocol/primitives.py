"""Kafka's wire primitives as compilable `construct` classes.

Each primitive is a real `construct.Construct` (it parses and builds on its own), and also knows
the Python expression that reads it from a stream `io` and the expression that writes a value
through `w` (a bound `write`). A fixed-width reader unpacks what `io.read` gives with no call of
ours around it: at the end of the input that raises `struct.error`, which each message's parse
function turns into `MalformedMessage` (`compiler.py`), as the other readers raise it. `protocol/compiler.py` stitches those expressions into one compiled
function per struct and version, which is what makes the compiled codec fast: no per-field
Container, no context dictionaries, the dataclass is built directly. The functions the expressions
call live in `protocol/wire.py`, which imports no construct.
"""

from __future__ import annotations

import construct

from . import wire

_RUNTIME = {name: getattr(wire, name) for name in wire.__all__}
_RUNTIME_IMPORT = f"from {wire.__name__} import *"


# -- the primitives as constructs ------------------------------------------------------------
class KafkaPrimitive(construct.Construct):
    """A primitive that can describe itself as expressions for the compiled codec.

    `reader` reads from a stream named `io`; `writer(v)` writes the value expression `v`
    through a callable named `w`.
    """

    reader: str = ""
    writer_template: str = ""

    def writer(self, v: str) -> str:
        return self.writer_template.format(v=v)

    def _parse(self, stream, context, path):
        try:  # interpreted path; the compiled one inlines the reader
            return eval(self.reader, _RUNTIME, {"io": stream})
        except wire.StructError as e:
            raise wire.MalformedMessage(f"truncated {type(self).__name__}: {e}") from None

    def _build(self, obj, stream, context, path):
        eval(self.writer("v"), _RUNTIME, {"w": stream.write, "v": obj})
        return obj

    def _emitparse(self, code):
        code.append(_RUNTIME_IMPORT)
        return self.reader

    def _emitbuild(self, code):
        code.append(_RUNTIME_IMPORT)
        return f"({self.writer('obj')}, obj)[1]".replace("w(", "io.write(").replace("(w,", "(io.write,")


def _prim(name: str, reader: str, writer: str) -> KafkaPrimitive:
    cls = type(name, (KafkaPrimitive,), {"reader": reader, "writer_template": writer})
    return cls()


Int8 = _prim("Int8", "U_I8(io.read(1))[0]", "w(P_I8({v}))")
Int16 = _prim("Int16", "U_I16(io.read(2))[0]", "w(P_I16({v}))")
UInt16 = _prim("UInt16", "U_U16(io.read(2))[0]", "w(P_U16({v}))")
Int32 = _prim("Int32", "U_I32(io.read(4))[0]", "w(P_I32({v}))")
Int64 = _prim("Int64", "U_I64(io.read(8))[0]", "w(P_I64({v}))")
Float64 = _prim("Float64", "U_F64(io.read(8))[0]", "w(P_F64({v}))")
Bool = _prim("Bool", "read_bool(io)", "w(b'\\x01' if {v} else b'\\x00')")
Uuid = _prim("Uuid", "read_uuid(io)", "w({v}.bytes)")
UVarInt = _prim("UVarInt", "read_uvarint(io)", "w(encode_uvarint({v}))")
String = _prim("String", "read_string(io)", "write_string(w, {v})")
NullableString = _prim("NullableString", "read_nullable_string(io)", "write_nullable_string(w, {v})")
CompactString = _prim("CompactString", "read_compact_string(io)", "write_compact_string(w, {v})")
NullableCompactString = _prim(
    "NullableCompactString", "read_nullable_compact_string(io)", "write_nullable_compact_string(w, {v})"
)
Bytes = _prim("Bytes", "read_bytes(io)", "write_bytes(w, {v})")
NullableBytes = _prim("NullableBytes", "read_nullable_bytes(io)", "write_nullable_bytes(w, {v})")
CompactBytes = _prim("CompactBytes", "read_compact_bytes(io)", "write_compact_bytes(w, {v})")
NullableCompactBytes = _prim(
    "NullableCompactBytes", "read_nullable_compact_bytes(io)", "write_nullable_compact_bytes(w, {v})"
)
NullableRecords = _prim("NullableRecords", "read_nullable_records(io)", "write_nullable_bytes(w, {v})")
NullableCompactRecords = _prim(
    "NullableCompactRecords", "read_nullable_compact_records(io)", "write_nullable_compact_bytes(w, {v})"
)


def primitive_for(type_name: str, *, flexible: bool, nullable: bool) -> KafkaPrimitive:
    """The construct for one of Kafka's primitive type names in a given encoding."""
    if type_name in ("string",):
        return {(False, False): String, (False, True): NullableString,
                (True, False): CompactString, (True, True): NullableCompactString}[(flexible, nullable)]
    if type_name == "records":
        # nullable bytes on the wire whatever the schema says about nullability; views in a FrameIO
        return NullableCompactRecords if flexible else NullableRecords
    if type_name == "bytes":
        return {(False, False): Bytes, (False, True): NullableBytes,
                (True, False): CompactBytes, (True, True): NullableCompactBytes}[(flexible, nullable)]
    return {
        "bool": Bool, "int8": Int8, "int16": Int16, "uint16": UInt16, "int32": Int32,
        "int64": Int64, "float64": Float64, "uuid": Uuid,
    }[type_name]
