"""structlog set-up: readable on a terminal, one JSON object per line otherwise."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import structlog


def configure_logging(log_format: str = "auto", level: str = "info") -> None:
    if log_format == "auto":
        log_format = "console" if sys.stderr.isatty() else "json"
    renderer = (
        structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
        if log_format == "console"
        else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


def read_events(path: Path, name: str) -> list[dict[str, Any]]:
    """The lines of event `name` in a JSON log this set-up wrote (other lines skipped; a missing
    file has none): for tests and benchmarks that read what a broker said."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        if f'"{name}"' not in line:
            continue
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and item.get("event") == name:
            out.append(item)
    return out
