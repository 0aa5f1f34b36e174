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


@lru_cache(maxsize=1024)
def compile_regex(pattern: str) -> "re2._Regexp":
    import re2

    try:
        return re2.compile(pattern, _options())
    except re2.error as exc:
        detail = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise InvalidRegularExpression(f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: "
                                       f"{detail}.") from None
