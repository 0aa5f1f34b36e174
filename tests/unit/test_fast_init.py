"""protocol/fast_init.py: the replaced `__init__` builds what the dataclass-generated one builds
(positional and keyword arguments, defaults, missing and unknown arguments refused), and the class
stays frozen, hashable and compared by its fields."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, strategies as st

from kbroker.coordinator.groups import commands as c
from kbroker.coordinator.runtime import outcome
from kbroker.coordinator.groups import results
from kbroker.protocol.records import classic_records as records
from kbroker.protocol.fast_init import fast_init

FAST = [c.OffsetCommitPartition, c.OffsetCommitTopic, c.HeartbeatExpired, records.OffsetCommitRecord,
        results.PartitionError, results.TopicErrors, results.OffsetCommitResult, results.HeartbeatResult,
        outcome.Reply, outcome.ScheduleTimer]


def reference(cls: type) -> type:
    """The same fields with the `__init__` dataclasses generates."""
    return dataclasses.make_dataclass(
        "Ref" + cls.__name__,
        [(f.name, object, dataclasses.field(default=f.default)) if f.default is not dataclasses.MISSING
         else (f.name, object) for f in dataclasses.fields(cls)],
        frozen=True, slots=True)


values = st.one_of(st.integers(), st.text(max_size=5), st.none(), st.tuples(st.integers()))


@pytest.mark.parametrize("cls", FAST, ids=lambda cls: cls.__name__)
@given(data=st.data())
def test_builds_what_the_generated_init_builds(cls: type, data) -> None:
    assert cls.__init__.__module__ == cls.__module__ and "__init__" in cls.__init__.__qualname__
    ref = reference(cls)
    fields = dataclasses.fields(cls)
    required = [f for f in fields if f.default is dataclasses.MISSING]
    given_count = data.draw(st.integers(len(required), len(fields)))
    args = [data.draw(values) for _ in range(given_count)]
    by_keyword = data.draw(st.booleans())
    if by_keyword:
        kwargs = {f.name: a for f, a in zip(fields, args)}
        fast, slow = cls(**kwargs), ref(**kwargs)
    else:
        fast, slow = cls(*args), ref(*args)
    assert dataclasses.astuple(fast) == dataclasses.astuple(slow)
    assert fast == cls(*dataclasses.astuple(fast)) and hash(fast) == hash(cls(*dataclasses.astuple(fast)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(fast, fields[0].name, 1)
    with pytest.raises(TypeError):
        cls(*args, **{"no_such_field": 1})
    if required:
        with pytest.raises(TypeError):
            cls(*args[:len(required) - 1])


def test_refuses_what_it_cannot_replace() -> None:
    @dataclasses.dataclass(slots=True)
    class NotFrozen:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Factory:
        a: list = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(frozen=True, slots=True)
    class PostInit:
        a: int

        def __post_init__(self) -> None:
            pass

    for cls in (NotFrozen, Factory, PostInit):
        with pytest.raises(TypeError):
            fast_init(cls)
