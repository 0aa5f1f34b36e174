"""Compile a message spec at one version into a construct: the source of the codec.

`KafkaStruct` is a `construct.Construct` whose compiled form is one plain Python function per
struct and version: fields are read into locals with the primitives' expressions and the
generated dataclass is built positionally. `make codegen` writes the compiled functions of every
message we vendor into `protocol/compiled/` (`module_source`), so the broker serves without
importing construct; `protocol/codec.py` compiles here only a spec that has no generated module
(a test's, or a checkout whose generated code is stale, which `make test` reports).
"""

from __future__ import annotations

import dataclasses
import re
import struct
import sys
from typing import Any

import construct

from . import primitives as P
from . import wire
from .spec import FieldSpec, MessageSpec, StructSpec, in_range



# Fixed-width primitives by struct format: a run of them next to each other on the wire is read and
# written with one Struct (Fetch's partition fields, Produce's answers: five to six numbers each).
_FIXED_FORMATS = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "int64": "q", "float64": "d"}


def _fixed_format(f: FieldSpec) -> str | None:
    return _FIXED_FORMATS.get(f.type) if f.kind == "primitive" else None


def _struct_of(code: construct.core.CodeGen, formats: str) -> str:
    """The name of a module-level Struct for big-endian `formats` (CodeGen keeps one copy of a block)."""
    code.append("from struct import Struct")
    name = f"S_{formats}"
    code.append(f"{name} = Struct('>{formats}')")
    return name


def _default_expr(dc_field: dataclasses.Field, code: construct.core.CodeGen) -> str:
    """A Python expression producing a fresh default value for a dataclass field."""
    if dc_field.default_factory is not dataclasses.MISSING:
        factory = dc_field.default_factory
        if factory is list:
            return "[]"
        return _link(code, factory) + "()"
    value = dc_field.default
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return repr(value)
    if value == wire.ZERO_UUID:
        return "ZERO_UUID"
    raise TypeError(f"unsupported default {value!r}")


def _link(code: construct.core.CodeGen, obj: Any) -> str:
    """Make a Python object (a dataclass) reachable by name from the compiled module.

    A class at the top level of an importable module is imported by name, so the source stands on
    its own (the generated modules are written to disk); anything else (a class defined inside a
    test function) is passed in through `linkedinstances`, which only a codec compiled in this
    process has."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "")
    if module and "." not in qualname and getattr(sys.modules.get(module), qualname, None) is obj:
        name = f"{module.rsplit('.', 1)[-1]}__{qualname}"
        code.append(f"from {module} import {qualname} as {name}")
        return name
    name = f"_obj_{id(obj)}"
    code.linkedinstances[name] = obj  # kept so the module can resolve it after exec
    code.append(f"{name} = linkedinstances[{name!r}]")
    return name


class KafkaStruct(construct.Construct):
    """One Kafka struct (a message body or a nested struct) at one version."""

    # Keyed by the spec's identity: two specs may be equal (or share a name) yet belong to
    # different dataclasses. Each cached struct holds its spec, so no live entry's id can be
    # reused by another object after garbage collection; `of` checks it all the same.
    _cache: dict[tuple[int, int, bool], "KafkaStruct"] = {}

    def __init__(self, spec: StructSpec, version: int, flexible: bool) -> None:
        super().__init__()
        self.spec, self.version, self.flexible = spec, version, flexible
        self.name = None
        self.compiled: construct.Compiled | None = None  # compiled_struct() fills it on first use

    @classmethod
    def of(cls, spec: StructSpec, version: int, flexible: bool) -> "KafkaStruct":
        key = (id(spec), version, flexible)
        found = cls._cache.get(key)
        if found is None or found.spec is not spec:
            found = cls._cache[key] = cls(spec, version, flexible)
        return found

    # Interpreted use goes through the compiled form: there is only one implementation.
    def _parse(self, stream, context, path):
        return compiled_struct(self).parsefunc(stream, None)

    def _build(self, obj, stream, context, path):
        return compiled_struct(self).buildfunc(obj, stream, None)

    # -- helpers -----------------------------------------------------------------------------
    def _field_flexible(self, f: FieldSpec) -> bool:
        if f.flexible_override == "inherit":
            return self.flexible
        return in_range(self.version, f.flexible_override)  # type: ignore[arg-type]

    def _reader(self, f: FieldSpec, code, flexible: bool) -> str:
        nullable = f.is_nullable(self.version)
        if f.kind == "primitive":
            return P.primitive_for(f.type, flexible=flexible, nullable=nullable).reader
        if f.kind == "struct":
            assert f.struct is not None  # a struct field always carries its struct spec
            call = KafkaStruct.of(f.struct, self.version, self.flexible)._compileparse(code)
            return f"(None if U_I8(io.read(1))[0] < 0 else {call})" if nullable else call
        # array
        if f.struct is not None:
            elem = KafkaStruct.of(f.struct, self.version, self.flexible)._compileparse(code)
        else:
            elem = P.primitive_for(f.type, flexible=flexible, nullable=False).reader
        fname = f"parse_array_{code.allocateId()}"
        count = "read_compact_array_count" if flexible else "read_array_count"
        code.append(f"""
            def {fname}(io):
                n = {count}(io, {nullable})
                if n < 0:
                    return None
                return [{elem} for _ in range(n)]
        """)
        return f"{fname}(io)"

    def _writer(self, f: FieldSpec, v: str, code, flexible: bool) -> str:
        nullable = f.is_nullable(self.version)
        if f.kind == "primitive":
            return P.primitive_for(f.type, flexible=flexible, nullable=nullable).writer(v)
        if f.kind == "struct":
            assert f.struct is not None
            build = KafkaStruct.of(f.struct, self.version, self.flexible)._compilebuild(code)
            if not nullable:
                return build.replace("(obj,", f"({v},", 1)
            fname = f"build_nullable_struct_{code.allocateId()}"
            code.append(f"""
                def {fname}(w, obj):
                    if obj is None:
                        w(b"\\xff")
                    else:
                        w(b"\\x01")
                        {build}
            """)
            return f"{fname}(w, {v})"
        if f.struct is not None:
            elem = KafkaStruct.of(f.struct, self.version, self.flexible)._compilebuild(code).replace("(obj,", "(e,", 1)
        else:
            elem = P.primitive_for(f.type, flexible=flexible, nullable=False).writer("e")
        null = 'w(b"\\x00")' if flexible else 'w(b"\\xff\\xff\\xff\\xff")'
        count = "w(encode_uvarint(len(v) + 1))" if flexible else "w(P_I32(len(v)))"
        fname = f"build_array_{code.allocateId()}"
        code.append(f"""
            def {fname}(w, v):
                if v is None:
                    {null if nullable else 'raise ValueError("null in a non-nullable array")'}
                    return
                {count}
                for e in v:
                    {elem}
        """)
        return f"{fname}(w, {v})"

    # -- compiled parse ------------------------------------------------------------------------
    def _emitparse(self, code):
        code.append(P._RUNTIME_IMPORT)
        cls = self.spec.cls
        fname = f"parse_{cls.__name__}_v{self.version}_{code.allocateId()}"
        dc_fields = {f.name: f for f in dataclasses.fields(cls)}
        lines, args, tagged = [], [], []
        run: list[tuple[int, FieldSpec]] = []  # adjacent fixed-width fields, read together

        def read_run() -> None:
            if len(run) == 1:
                i, f = run[0]
                lines.append(f"a{i} = {self._reader(f, code, self._field_flexible(f))}")
            elif run:
                formats = "".join(_fixed_format(f) for _, f in run)  # type: ignore[misc]
                size = struct.calcsize(">" + formats)
                lines.append(f"{', '.join(f'a{i}' for i, _ in run)} = {_struct_of(code, formats)}.unpack(io.read({size}))")
            run.clear()

        for i, f in enumerate(self.spec.fields):
            if not f.present(self.version):
                args.append(_default_expr(dc_fields[f.name], code))
            elif self.flexible and f.is_tagged(self.version):
                tagged.append((i, f))
                args.append(f"t{i}")
            elif _fixed_format(f):
                run.append((i, f))
                args.append(f"a{i}")
            else:
                read_run()
                lines.append(f"a{i} = {self._reader(f, code, self._field_flexible(f))}")
                args.append(f"a{i}")
        read_run()
        # The dataclass may list fields in another order than the wire (legacy-only fields go last).
        by_attr = {f.name: arg for f, arg in zip(self.spec.fields, args)}
        body = "\n                ".join(lines)
        tag_block = ""
        if self.flexible:
            inits = "\n                ".join(f"t{i} = {_default_expr(dc_fields[f.name], code)}" for i, f in tagged)
            branches = ""
            for i, f in tagged:
                sub = f"parse_tagged_{code.allocateId()}"
                code.append(f"""
                    def {sub}(io):
                        return {self._reader(f, code, True)}
                """)
                branches += f"""
                        {'if' if not branches else 'elif'} tag == {f.tag}:
                            t{i} = {sub}(BytesIO(read_exact(io, size)))"""
            tail = f"""
                        else:
                            read_exact(io, size)""" if branches else """
                        read_exact(io, size)"""
            # Almost always no tagged field: the count's one zero byte is checked without a call.
            tag_block = f"""
                {inits}
                count = io.read(1)
                if count != b"\\x00":
                    for _ in range(uvarint_from(io, count)):
                        tag = read_uvarint(io)
                        size = read_uvarint(io){branches}{tail}"""
        code.append(f"""
            def {fname}(io):
                {body}{tag_block}
                return {_link(code, cls)}({', '.join(by_attr[name] for name in dc_fields)})
        """)
        return f"{fname}(io)"

    # -- compiled build ------------------------------------------------------------------------
    def _emitbuild(self, code):
        code.append(P._RUNTIME_IMPORT)
        cls = self.spec.cls
        fname = f"build_{cls.__name__}_v{self.version}_{code.allocateId()}"
        dc_fields = {f.name: f for f in dataclasses.fields(cls)}
        lines, tagged = [], []
        run: list[FieldSpec] = []  # adjacent fixed-width fields, written together

        def write_run() -> None:
            if len(run) == 1:
                lines.append(self._writer(run[0], f"obj.{run[0].name}", code, self._field_flexible(run[0])))
            elif run:
                formats = "".join(_fixed_format(f) for f in run)  # type: ignore[misc]
                values = ", ".join(f"obj.{f.name}" for f in run)
                lines.append(f"w({_struct_of(code, formats)}.pack({values}))")
            run.clear()

        for f in self.spec.fields:
            if not f.present(self.version):
                continue
            if self.flexible and f.is_tagged(self.version):
                tagged.append(f)
                continue
            if _fixed_format(f):
                run.append(f)
                continue
            write_run()
            lines.append(self._writer(f, f"obj.{f.name}", code, self._field_flexible(f)))
        write_run()
        if self.flexible:
            if not tagged:
                lines.append('w(b"\\x00")')
            else:
                lines.append("tags = []")
                for f in sorted(tagged, key=lambda f: f.tag or 0):  # a tagged field always has its tag
                    default = _default_expr(dc_fields[f.name], code)
                    sub = f"build_tagged_{code.allocateId()}"
                    code.append(f"""
                        def {sub}(v):
                            b = BytesIO()
                            w = b.write
                            {self._writer(f, 'v', code, True)}
                            return b.getvalue()
                    """)
                    # Like Kafka's generated code, a tagged field holding its default is not
                    # written: librdkafka before 2.2 cannot parse tagged fields it didn't expect.
                    lines.append(f"if obj.{f.name} != {default}:")
                    lines.append(f"    tags.append(({f.tag}, {sub}(obj.{f.name})))")
                lines.append("w(encode_uvarint(len(tags)))")
                lines.append("for tag, data in tags:")
                lines.append("    w(encode_uvarint(tag))")
                lines.append("    w(encode_uvarint(len(data)))")
                lines.append("    w(data)")
        body = "\n                ".join(lines) or "pass"
        code.append(f"""
            def {fname}(obj, w):
                {body}
                return obj
        """)
        return f"{fname}(obj, w)"


def _build_into_io(struct: KafkaStruct, code: construct.core.CodeGen) -> str:
    """The call that builds a message into the stream `io` (a struct's build writes through `w`)."""
    return struct._compilebuild(code).replace("(obj, w)", "(obj, io.write)")


def compiled_struct(struct: KafkaStruct) -> construct.Compiled:
    found = struct.compiled
    if found is None:
        found = struct.compiled = _Root(struct).compile()
    return found


class _Root(construct.Construct):
    """Compiles a KafkaStruct into construct's `Compiled(parseall, buildall)`.

    construct's own `compile()` links helper objects by id after executing the module; our
    emitted code binds the generated dataclasses at module level, so the mapping must exist
    before the code runs. This is the only difference from `Construct.compile`.
    """

    def __init__(self, struct: KafkaStruct) -> None:
        super().__init__()
        self.struct = struct

    def _emitparse(self, code):
        return self.struct._compileparse(code)

    def _emitbuild(self, code):
        return _build_into_io(self.struct, code)

    def compile(self, filename=None):
        code = construct.core.CodeGen()
        code.append("from construct import Compiled")
        code.append(f"""
            def parseall(io, this):
                try:
                    return {self._compileparse(code)}
                except StructError as e:
                    raise MalformedMessage(f"truncated: {{e}}") from None
            def buildall(obj, io, this):
                return {self._compilebuild(code)}
            compiled = Compiled(parseall, buildall)
        """)
        source = code.toString()
        if filename:
            with open(filename, "w") as f:
                f.write(source)
        namespace: dict[str, Any] = {"linkedinstances": code.linkedinstances, "__name__": "kbroker_codec"}
        label = f"<kbroker codec {self.struct.spec.cls.__name__} v{self.struct.version}>"
        exec(compile(source, label, "exec"), namespace)
        compiled = namespace["compiled"]
        compiled.source = source
        compiled.defersubcon = self
        return compiled


def module_source(spec: MessageSpec) -> str:
    """The compiled codec of every version of a message as one module's source: `CODECS` maps a
    version to its (parse, build) functions, called as `parse(io, None)` and `build(obj, io, None)`
    like construct's `Compiled.parsefunc` / `buildfunc`. Deterministic, so the checked-in files can
    be compared with a fresh generation."""
    code = construct.core.CodeGen()
    entries = []
    for version in spec.versions:
        struct = KafkaStruct.of(spec.struct, version, spec.is_flexible(version))
        code.append(f"""
            def parse_v{version}(io, this):
                try:
                    return {struct._compileparse(code)}
                except StructError as e:  # a fixed-width field past the end (primitives.py)
                    raise MalformedMessage(f"truncated: {{e}}") from None
        """)
        code.append(f"""
            def build_v{version}(obj, io, this):
                return {_build_into_io(struct, code)}
        """)
        entries.append(f"{version}: (parse_v{version}, build_v{version})")
    if code.linkedinstances:
        raise ValueError(f"{spec.name}: a class the generated module cannot import")
    code.append(f"CODECS = {{{', '.join(entries)}}}")
    source = "\n".join(_without_twins(code.blocks)) + "\n"
    # The module lives in protocol/compiled/: our imports are relative, as everywhere in the package.
    return re.sub(rf"^from {re.escape(__package__)}\.", "from ..", source, flags=re.MULTILINE)


_DEF = re.compile(r"def (\w+)\(")


def _without_twins(blocks: list[str]) -> list[str]:
    """Drop each function whose source is another's but for its name, and call that other instead.

    Most versions of a message read and write the same fields (Heartbeat v0-v2, Fetch's partition
    structs across a dozen versions), so without this a message's module would hold as many copies
    of the same code as it has versions. Blocks come in definition order (a function after those it
    calls), so renaming the calls in later blocks is enough."""
    kept: list[str] = []
    first_of: dict[str, str] = {}   # source with its own name blanked -> the kept function's name
    alias: dict[str, str] = {}      # a dropped function's name -> the kept twin's
    for block in blocks:
        if alias:
            block = re.sub(r"\b(?:parse|build)_\w+\b", lambda m: alias.get(m.group(0), m.group(0)), block)
        found = _DEF.match(block)
        if found:
            blank = block.replace(f"def {found.group(1)}(", "def _(", 1)
            twin = first_of.get(blank)
            if twin is not None:
                alias[found.group(1)] = twin
                continue
            first_of[blank] = found.group(1)
        kept.append(block)
    return kept
