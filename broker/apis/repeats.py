"""Requests that name one id more than once: each id is answered once, and repeats are bounded.

Kafka answers every occurrence of an id in DescribeGroups, ConsumerGroupDescribe, OffsetFetch v8+,
DescribeConfigs, DescribeProducers and DescribeTransactions (and of a filter in DeleteAcls), and so
does kbroker. But an answer can be far larger than
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

from ..network.server import CloseConnection

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# The bytes the answers to ids named more than once may add, beyond one answer per distinct id.
REPEATS_BYTES = 1 << 20


def distinct(ids: Iterable[K]) -> list[K]:
    """Each id once, in the order it was first named."""
    return list(dict.fromkeys(ids))


def in_request_order(ids: Sequence[K], answers: Mapping[K, V], added: int = 0) -> list[V]:
    """The answer of each id in the order the request named them, the same object for a repeat;
    closes the connection when the repeats would add more than REPEATS_BYTES (with `added`, what
    answers the caller already counted as repeats add: `charge`)."""
    if len(answers) < len(ids):
        for key, times in Counter(ids).items():
            if times > 1:
                added = charge(added, answers[key], times - 1)
    return [answers[key] for key in ids]


def charge(added: int, answer: Any, times: int = 1) -> int:
    """`added` plus `times` copies of `answer`, an answer for an id answered already: a different
    key of the same resource (a group with another member epoch, a broker named "01") is a repeat
    too. Raises CloseConnection past REPEATS_BYTES."""
    added += times * approximate_size(answer)
    if added > REPEATS_BYTES:
        raise CloseConnection(f"ids named more than once would add over {REPEATS_BYTES} bytes to the answer")
    return added


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
