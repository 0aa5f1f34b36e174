"""Tables for people, JSON for scripts. No `None` or `1.0` in a table: empty cells are `-`,
whole numbers print as integers, times in UTC with their zone."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from typing import Any, TextIO


def cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value)) or "-"
    return str(value)


def utc(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def table(rows: list[dict], columns: list[str] | None = None, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    if not rows:
        print("(none)", file=out)
        return
    columns = columns or list(rows[0])
    cells = [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    print("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths)).rstrip(), file=out)
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip(), file=out)


def emit(value: Any, as_json: bool, render) -> None:
    if as_json:
        print(json.dumps(value, indent=2, default=str))
    else:
        render(value)
