"""Topic regular expressions of consumer groups, in RE2 syntax as Kafka (re2j) reads them.

A client's pattern runs in RE2 (google-re2): linear time, no backtracking, so a hostile pattern
cannot stall the coordinator, which Python's `re` could not promise. A topic matches when the
whole name matches, as Java's `Matcher.matches()` requires.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import re2


class InvalidRegularExpression(ValueError):
    pass


@lru_cache(maxsize=1)
def _options() -> "re2.Options":
    # RE2 (and the C++ runtime it loads, a few MiB of a broker's memory) only once a group subscribes
    # by regex
    import re2

    options = re2.Options()
    options.log_errors = False
    return options


# The pattern is stored in __consumer_offsets as an int16-length string (its regular-expression
# record's key); Kafka's own write of a longer one fails. Refused here, before anything is compiled.
MAX_PATTERN_CHARS = 32767
# Compiled patterns are kept for this many distinct patterns of at most CACHED_PATTERN_CHARS each: a
# 3 MB pattern compiles to about 15 MiB, and caching every such one a client sends grew without end.
CACHED_PATTERNS = 1024
CACHED_PATTERN_CHARS = 4096


def compile_regex(pattern: str) -> "re2._Regexp":
    if len(pattern) > MAX_PATTERN_CHARS or len(pattern.encode()) > MAX_PATTERN_CHARS:
        raise InvalidRegularExpression(f"SubscribedTopicRegex of {len(pattern.encode())} bytes is longer than "
                                       f"the {MAX_PATTERN_CHARS} a group can store.")
    if len(pattern) <= CACHED_PATTERN_CHARS:
        return _compile_cached(pattern)
    return _compile(pattern)


@lru_cache(maxsize=CACHED_PATTERNS)
def _compile_cached(pattern: str) -> "re2._Regexp":
    return _compile(pattern)


def _compile(pattern: str) -> "re2._Regexp":
    import re2

    try:
        return re2.compile(pattern, _options())
    except re2.error as exc:
        detail = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise InvalidRegularExpression(f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: "
                                       f"{detail}.") from None
