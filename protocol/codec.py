"""Encode and decode a message at one version with its compiled codec.

The codec of every message we vendor was compiled ahead of time with construct (`make codegen`
writes `protocol/compiled/<message>.py`, `protocol/compiler.py` holds how) and is imported here on
first use of that message, so serving imports no construct and a client's first request of a kind
pays an import, not a compilation. A spec without a generated module (one built by a test) is
compiled at run time by the same compiler, the only place construct is imported.
"""

from __future__ import annotations

import importlib
import sys
from io import BytesIO
from typing import Any, Callable, NamedTuple

from .spec import MessageSpec

_MESSAGES = f"{__package__}.messages."
_COMPILED = f"{__package__}.compiled."


class Codec(NamedTuple):
    """One message version's compiled functions, named as construct's `Compiled` names them."""

    parsefunc: Callable[[BytesIO, None], Any]
    buildfunc: Callable[[Any, BytesIO, None], Any]


# (id(spec), version) -> (spec, its codec). Not keyed by name: two specs may share one (a test's, a
# legacy schema's). The entry holds the spec, so while it exists no other object can have that id;
# the identity check makes a stale entry impossible to return all the same.
_MESSAGE_CACHE: dict[tuple[int, int], tuple[MessageSpec, Codec]] = {}


def _generated(spec: MessageSpec, version: int) -> Codec | None:
    """The ahead-of-time codec, if `spec` is the SPEC of a generated message module."""
    module = spec.struct.cls.__module__
    if not module.startswith(_MESSAGES) or getattr(sys.modules.get(module), "SPEC", None) is not spec:
        return None
    compiled = importlib.import_module(_COMPILED + module[len(_MESSAGES):])  # codegen writes one per message
    functions = compiled.CODECS.get(version)
    return Codec(*functions) if functions is not None else None


def _compiled_now(spec: MessageSpec, version: int) -> Codec:
    from . import compiler  # construct, imported only for a spec without generated code

    struct = compiler.KafkaStruct.of(spec.struct, version, spec.is_flexible(version))
    found = compiler.compiled_struct(struct)
    return Codec(found.parsefunc, found.buildfunc)


def compiled_message(spec: MessageSpec, version: int) -> Codec:
    entry = _MESSAGE_CACHE.get((id(spec), version))
    if entry is None or entry[0] is not spec:
        codec = _generated(spec, version) or _compiled_now(spec, version)
        entry = _MESSAGE_CACHE[(id(spec), version)] = (spec, codec)
    return entry[1]


def decode(spec: MessageSpec, version: int, data: bytes | BytesIO) -> Any:
    io = data if isinstance(data, BytesIO) else BytesIO(data)
    return compiled_message(spec, version).parsefunc(io, None)


def encode(spec: MessageSpec, version: int, obj: Any) -> bytes:
    io = BytesIO()
    compiled_message(spec, version).buildfunc(obj, io, None)
    return io.getvalue()


def encode_into(spec: MessageSpec, version: int, obj: Any, io: BytesIO) -> None:
    compiled_message(spec, version).buildfunc(obj, io, None)
