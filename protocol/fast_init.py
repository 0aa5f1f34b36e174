"""A faster `__init__` for the frozen, slotted dataclasses every request builds.

A frozen dataclass's generated `__init__` sets each field with `object.__setattr__(self, name,
value)` (its own `__setattr__` refuses), a Python-level lookup and call per field: about 1 us for
an OffsetCommitRecord, several of which every OffsetCommit builds. The slot descriptors' own
`__set__` does the same store directly, in about half the time. The class stays what `dataclass`
made it (frozen, hashable, compared and printed by its fields); only `__init__` is replaced, and
tests/unit/test_fast_init.py checks it against the generated one.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T", bound=type)


def fast_init(cls: T) -> T:
    """Give a `@dataclass(frozen=True, slots=True)` class an `__init__` that stores through its slot
    descriptors. Only plain fields (no default_factory, no init=False, no InitVar or kw_only) and no
    `__post_init__`: anything else keeps the generated one (raised here, so it is seen at import)."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__ or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: fast_init takes a frozen, slotted dataclass without __post_init__")
    namespace: dict[str, Any] = {}
    args, body = [], []
    for f in dataclasses.fields(cls):
        if not f.init or f.kw_only or f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: fast_init takes plain fields only")
        if f.default is dataclasses.MISSING:
            args.append(f.name)
        else:
            namespace[f"_default_{f.name}"] = f.default
            args.append(f"{f.name}=_default_{f.name}")
        namespace[f"_set_{f.name}"] = cls.__dict__[f.name].__set__
        body.append(f"    _set_{f.name}(self, {f.name})\n")
    source = f"def __init__(self, {', '.join(args)}):\n{''.join(body) or '    pass'}\n"
    exec(source, namespace)  # noqa: S102 - our own generated source, as dataclasses does
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    cls.__init__ = init  # type: ignore[misc]
    return cls
