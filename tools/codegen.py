"""Generate `protocol/messages/*.py` from Kafka's JSON message definitions.

Run with `make codegen` (or `python -m kbroker.tools.codegen`). The output is checked in;
`tests/unit/test_codegen_fresh.py` fails when it is stale. Each JSON file becomes one module with
slotted dataclasses (one per struct, the union of the fields of every version) and a `SPEC`
describing every version; `tools/codegen_codecs.py` then compiles each spec's codec with construct.
"""

from __future__ import annotations

import json
import keyword
import re
import sys
from pathlib import Path

PROTOCOL_DIR = Path(__file__).resolve().parent.parent / "protocol"
SCHEMA_DIR = PROTOCOL_DIR / "schema"
OUT_DIR = PROTOCOL_DIR / "messages"
SOURCE_DIRS = ("clients", "group-coordinator", "share-coordinator")
# Kafka 3.9's versions that Kafka 4 removed, written by us (see protocol/schema/legacy/NOTES.md).
LEGACY_DIR = SCHEMA_DIR / "legacy"
APIS_DIR = PROTOCOL_DIR.parent / "broker" / "apis"
# Record schemas of __consumer_offsets (and __share_group_state) that we write or read: every group type's.
_UNSERVED_RECORD_PREFIXES: tuple[str, ...] = ()
_API_KEY_LINE = re.compile(r"^API_KEY = (\d+)\b", re.MULTILINE)

# Types that stay Python primitives, with their zero default.
_ZERO = {
    "bool": "False", "int8": "0", "int16": "0", "uint16": "0", "int32": "0", "int64": "0",
    "float64": "0.0", "string": '""', "bytes": 'b""', "records": "None", "uuid": "ZERO_UUID",
}
_PYTYPE = {
    "bool": "bool", "int8": "int", "int16": "int", "uint16": "int", "int32": "int", "int64": "int",
    "float64": "float", "string": "str", "bytes": "bytes", "records": "bytes | memoryview | None", "uuid": "UUID",
}


def strip_comments(text: str) -> str:
    """Remove // comments outside strings (Kafka's JSON files carry licence headers as comments)."""
    out, i, in_str = [], 0, False
    while i < len(text):
        ch = text[i]
        if in_str:
            out.append(ch)
            if ch == "\\":
                out.append(text[i + 1])
                i += 1
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
            out.append(ch)
        elif text.startswith("//", i):
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def load_json(path: Path) -> dict:
    return json.loads(strip_comments(path.read_text(encoding="utf-8")))


def parse_versions(text: str | None) -> tuple[int, int | None] | None:
    if text is None or text == "none":
        return None
    text = text.strip()
    if text.endswith("+"):
        return (int(text[:-1]), None)
    if "-" in text:
        low, high = text.split("-")
        return (int(low), int(high))
    return (int(text), int(text))


def snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s)
    s = s.lower()
    return s + "_" if keyword.iskeyword(s) else s


def served_api_keys() -> set[int]:
    """The API keys of the handler modules in broker/apis/, read as text rather than imported, so
    that generating never depends on the code it generates. A test checks they are what the router
    serves."""
    keys: set[int] = set()
    for path in APIS_DIR.glob("*.py"):
        keys.update(int(k) for k in _API_KEY_LINE.findall(path.read_text(encoding="utf-8")))
    return keys


def wanted(msg: dict, served: set[int]) -> bool:
    kind = msg["type"]
    if kind in ("request", "response"):
        return msg.get("apiKey") in served
    if kind.startswith("coordinator-"):
        return not msg["name"].startswith(_UNSERVED_RECORD_PREFIXES)
    return True  # the headers and the consumer protocol's embedded data


def _find_fields(msg: dict, path: str) -> list[dict]:
    """The field list of the struct at `path` (field names joined by dots; "" is the top level)."""
    fields = msg["fields"]
    for name in filter(None, path.split(".")):
        (holder,) = [f for f in fields if f["name"] == name]
        fields = holder["fields"] if "fields" in holder else next(
            c for c in msg.get("commonStructs", []) if c["name"] == holder["type"].lstrip("[]"))["fields"]
    return fields


def apply_legacy(msg: dict, overlay: dict) -> dict:
    """Widen `msg` to Kafka 3.9's range with the fields only its removed versions have."""
    old, new = parse_versions(msg["validVersions"]), parse_versions(overlay["validVersions"])
    if old is None or new is None or not (new[0] <= old[0] and (new[1] is not None and old[1] is not None and new[1] >= old[1])):
        raise ValueError(f"{msg['name']}: legacy range {overlay['validVersions']} must contain {msg['validVersions']}")
    msg["validVersions"] = overlay["validVersions"]
    for add in overlay.get("addFields", []):
        fields = _find_fields(msg, add["struct"])
        if any(f["name"] == add["field"]["name"] for f in fields):
            raise ValueError(f"{msg['name']}: {add['field']['name']} already exists")
        at = len(fields) if add["before"] is None else [f["name"] for f in fields].index(add["before"])
        # Marked so the dataclass lists it last: code that builds these classes positionally keeps working.
        fields.insert(at, dict(add["field"], legacyOnly=True))
    return msg


def legacy_overlays() -> dict[str, dict]:
    return {path.stem: load_json(path) for path in sorted(LEGACY_DIR.glob("*.json"))}


def docstring(text: str) -> str:
    """One line of Kafka's `about` text as a string literal that is safe whatever it contains."""
    text = " ".join(text.split())
    return repr(text) if '"' in text or "\\" in text else f'"""{text}"""'


def module_name(json_name: str) -> str:
    return snake(json_name)


class _Gen:
    def __init__(self, message: dict) -> None:
        self.msg = message
        self.common = {s["name"]: s for s in message.get("commonStructs", [])}
        self.classes: list[str] = []         # class source, dependencies first
        self.emitted: dict[str, str] = {}    # struct name -> spec variable name
        self.spec_lines: list[str] = []

    # -- defaults ---------------------------------------------------------------------------
    def default_literal(self, field: dict, ftype: str) -> str:
        nullable_always = field.get("nullableVersions") is not None
        raw = field.get("default")
        if ftype.startswith("[]"):
            return "None" if raw == "null" else "[]"
        if ftype not in _ZERO:  # a single struct
            return "None" if raw == "null" else f"{self.struct_class_name(field)}()"
        if raw is None:
            return _ZERO[ftype]
        raw = str(raw).lower() if isinstance(raw, bool) else str(raw)
        if raw == "null":
            if not nullable_always:
                raise ValueError(f"{field['name']}: null default on a non-nullable field")
            return "None"
        if ftype == "bool":
            return "True" if raw == "true" else "False"
        if ftype == "string":
            return repr(raw)
        if ftype in ("int8", "int16", "uint16", "int32", "int64"):
            return str(int(raw, 16) if raw.lower().startswith("0x") else int(raw))
        if ftype == "float64":
            return repr(float(raw))
        raise ValueError(f"unsupported default {raw!r} for {ftype}")

    def struct_class_name(self, field: dict) -> str:
        t = field["type"]
        return t[2:] if t.startswith("[]") else t

    # -- structs ----------------------------------------------------------------------------
    def struct(self, name: str, fields: list[dict]) -> str:
        """Emit a dataclass and a StructSpec for `name`; return the spec variable name."""
        if name in self.emitted:
            return self.emitted[name]
        spec_var = f"_{name}_SPEC"
        self.emitted[name] = spec_var
        # Children first so their classes and specs exist when this one refers to them.
        for f in fields:
            t = f["type"]
            elem = t[2:] if t.startswith("[]") else t
            if elem not in _ZERO:
                sub = f.get("fields")
                if sub is None:
                    sub = self.common[elem]["fields"]
                self.struct(elem, sub)

        lines = ["@dataclass(slots=True)", f"class {name}:"]
        if not fields:
            lines.append("    pass")
        spec_fields = []
        legacy_lines: list[str] = []
        for f in fields:
            class_lines = legacy_lines if f.get("legacyOnly") else lines
            t = f["type"]
            attr = snake(f["name"])
            default = self.default_literal(f, t)
            nullable = f.get("nullableVersions") is not None
            if t.startswith("[]"):
                elem = t[2:]
                elem_py = _PYTYPE.get(elem, elem)
                pytype = f"list[{elem_py}]" + (" | None" if nullable else "")
                kind, ptype, struct_ref = "array", elem if elem in _ZERO else "", None if elem in _ZERO else f"_{elem}_SPEC"
            elif t in _ZERO:
                pytype = _PYTYPE[t] + (" | None" if nullable and t not in ("records",) else "")
                kind, ptype, struct_ref = "primitive", t, None
            else:
                pytype = t + (" | None" if nullable else "")
                kind, ptype, struct_ref = "struct", "", f"_{t}_SPEC"
            if default in ("[]",) or default.endswith("()"):
                factory = "list" if default == "[]" else default[:-2]
                class_lines.append(f"    {attr}: {pytype} = field(default_factory={factory})")
            else:
                class_lines.append(f"    {attr}: {pytype} = {default}")
            if f.get("about"):
                class_lines.append(f"    {docstring(f['about'])}")
            args = [
                repr(attr), repr(f["name"]), repr(kind), repr(ptype),
                # A field without "versions" has its taggedVersions (Kafka's FieldSpec defaults it so).
                f"versions={parse_versions(f.get('versions') or f.get('taggedVersions'))!r}",
            ]
            if f.get("nullableVersions"):
                args.append(f"nullable={parse_versions(f['nullableVersions'])!r}")
            if f.get("taggedVersions"):
                args.append(f"tagged={parse_versions(f['taggedVersions'])!r}")
                args.append(f"tag={int(f['tag'])}")
            if kind == "struct":
                # "new" asks the codec for a fresh default instance of the struct class.
                args.append("default=None" if default == "None" else "default='new'")
            elif kind == "array":
                args.append(f"default={default}")
            elif default != _ZERO[ptype]:
                args.append(f"default={default}")
            if struct_ref:
                args.append(f"struct={struct_ref}")
            if "flexibleVersions" in f:
                args.append(f"flexible_override={parse_versions(f['flexibleVersions'])!r}")
            spec_fields.append(f"    F({', '.join(args)}),")
        self.classes.append("\n".join(lines + legacy_lines))
        body = "\n".join(spec_fields)
        self.spec_lines.append(f"{spec_var} = StructSpec({name}, (\n{body}\n    ))" if spec_fields
                               else f"{spec_var} = StructSpec({name}, ())")
        return spec_var

    def render(self, rel_source: str) -> str:
        m = self.msg
        top = self.struct(m["name"], m.get("fields", []))
        header = [
            f"# Code generated by tools/codegen.py from protocol/schema/{rel_source}. DO NOT EDIT.",
            f'"""{m["name"]}: Kafka\'s definition as dataclasses and a per-version spec."""',
            "",
            "from __future__ import annotations",
            "",
            "from dataclasses import dataclass, field",
            "from uuid import UUID",
            "",
            "from ..spec import FieldSpec as F, MessageSpec, StructSpec",
            "",
            "ZERO_UUID = UUID(int=0)",
            "",
        ]
        out = header + ["", *(c + "\n\n" for c in self.classes)]
        out += [*(s + "\n" for s in self.spec_lines)]
        listeners = tuple(m.get("listeners", ()))
        out.append(
            "SPEC = MessageSpec(\n"
            f"    name={m['name']!r},\n"
            f"    kind={m['type']!r},\n"
            f"    api_key={m.get('apiKey')!r},\n"
            f"    valid={parse_versions(m.get('validVersions'))!r},\n"
            f"    flexible={parse_versions(m.get('flexibleVersions'))!r},\n"
            f"    struct={top},\n"
            f"    listeners={listeners!r},\n"
            f"    latest_version_unstable={bool(m.get('latestVersionUnstable', False))!r},\n"
            ")\n"
        )
        text = "\n".join(out)
        return re.sub(r"\n{3,}", "\n\n\n", text).rstrip() + "\n"


def generate() -> dict[str, str]:
    """Return {module file name: source} for every JSON definition we vendor."""
    files: dict[str, str] = {}
    index: list[tuple[str, str, str, int | None]] = []
    flexible_from: dict[int, int | None] = {}
    served = served_api_keys()
    overlays = legacy_overlays()
    for sub in SOURCE_DIRS:
        for path in sorted((SCHEMA_DIR / sub).glob("*.json")):
            msg = load_json(path)
            source = f"{sub}/{path.name}"
            if msg["name"] in overlays:
                msg = apply_legacy(msg, overlays.pop(msg["name"]))
                source += f" and legacy/{path.name}"
            if msg.get("validVersions") == "none":
                continue  # removed APIs (LeaderAndIsr, StopReplica, ...)
            if msg["type"] == "request":
                flexible = parse_versions(msg.get("flexibleVersions"))
                flexible_from[msg["apiKey"]] = None if flexible is None else flexible[0]
            if not wanted(msg, served):
                continue
            mod = module_name(msg["name"])
            files[f"{mod}.py"] = _Gen(msg).render(source)
            index.append((mod, msg["name"], msg["type"], msg.get("apiKey")))
    if overlays:
        raise ValueError(f"legacy overlays match no message: {sorted(overlays)}")
    lines = [
        "# Code generated by tools/codegen.py from protocol/schema/. DO NOT EDIT.",
        '"""Index of the generated modules: the APIs broker/apis/ serves and the records we keep."""',
        "",
        "# (module, message name, kind, api key)",
        "MODULES: tuple[tuple[str, str, str, int | None], ...] = (",
        *(f"    ({mod!r}, {name!r}, {kind!r}, {key!r})," for mod, name, kind, key in index),
        ")",
        "",
        "# Every request's first flexible version (None: never flexible), served or not, so that the",
        "# header of any request can be read and logged before the request is refused.",
        "REQUEST_FLEXIBLE_FROM: dict[int, int | None] = {",
        *(f"    {key}: {flexible_from[key]!r}," for key in sorted(flexible_from)),
        "}",
        "",
    ]
    files["__init__.py"] = "\n".join(lines)
    return files


def main(argv: list[str] | None = None) -> int:
    from . import codegen_codecs  # imports the messages written here, so it runs after them

    check = "--check" in (argv if argv is not None else sys.argv[1:])
    files = generate()
    stale = []
    for name, text in files.items():
        target = OUT_DIR / name
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            stale.append(name)
            if not check:
                target.write_text(text, encoding="utf-8")
    extra = {p.name for p in OUT_DIR.glob("*.py")} - set(files)
    if check:
        codecs_stale, codecs_extra = codegen_codecs.sync(check=True) if not (stale or extra) else ([], set())
        if stale or extra or codecs_stale or codecs_extra:
            print(f"stale: {sorted(stale + codecs_stale)} extra: {sorted(extra | codecs_extra)}")
            return 1
        return 0
    for name in extra:
        (OUT_DIR / name).unlink()
    print(f"generated {len(files)} modules ({len(stale)} changed) in {OUT_DIR}")
    codecs_stale, _ = codegen_codecs.sync(check=False)
    print(f"generated {len(files)} codecs ({len(codecs_stale)} changed) in {codegen_codecs.OUT_DIR}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
