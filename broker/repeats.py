"""Requests that name one id more than once: each id is answered once, and repeats are bounded.

Kafka answers every occurrence of an id in DescribeGroups, ConsumerGroupDescribe, OffsetFetch v8+,
DescribeConfigs and DescribeTransactions, and so does kbroker. But an answer can be far larger than
its id: one group's 1,000 committed offsets named 20,000 times in a 240 KB OffsetFetch came to
400 MB, took the broker to 3.5 GB of memory and held its loop for over two minutes. So a handler
asks for each distinct id once (`distinct`), and the one answer object stands in every place the id
was named (`in_request_order`). What the repeats add to the answer is bounded by REPEATS_BYTES:
past that no client is asking in good faith, and the connection is closed (`request_rejected`),
the answer never built.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from .server import CloseConnection

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# The bytes the answers to ids named more than once may add, beyond one answer per distinct id.
REPEATS_BYTES = 1 << 20


def distinct(ids: Iterable[K]) -> list[K]:
    """Each id once, in the order it was first named."""
    return list(dict.fromkeys(ids))


def in_request_order(ids: Sequence[K], answers: Mapping[K, V]) -> list[V]:
    """The answer of each id in the order the request named them, the same object for a repeat;
    closes the connection when the repeats would add more than REPEATS_BYTES."""
    if len(answers) < len(ids):
        added = 0
        for key, times in Counter(ids).items():
            if times > 1:
                added += (times - 1) * approximate_size(answers[key])
                if added > REPEATS_BYTES:
                    raise CloseConnection(f"ids named more than once would add over {REPEATS_BYTES} bytes "
                                          f"to the answer ({len(ids)} ids, {len(answers)} distinct)")
    return [answers[key] for key in ids]


def approximate_size(value: Any) -> int:
    """About what `value` (a message struct, list, string, bytes or number) takes on the wire: at
    least one byte per field, a string or bytes its length; close enough to bound, not to frame."""
    if value is None or isinstance(value, (bool, int, float)):
        return 8 if isinstance(value, (int, float)) and not isinstance(value, bool) else 1
    if isinstance(value, (str, bytes, bytearray, memoryview)):
        return 2 + len(value)
    if isinstance(value, (list, tuple)):
        return 4 + sum(approximate_size(item) for item in value)
    if dataclasses.is_dataclass(value):
        return sum(approximate_size(getattr(value, f.name)) for f in dataclasses.fields(value))
    return 16
