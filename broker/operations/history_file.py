"""`<data-dir>/rebalances.jsonl`: every completed rebalance, one JSON line in the shape of the
`rebalance_completed` log event, so the analytics job (`kbroker analyze`) has the coordinator's
reasons without the broker's log file (`make run` keeps none). Rotated to `.1` past 16 MiB."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import TextIO

import structlog

FILE_NAME = "rebalances.jsonl"
MAX_BYTES = 16 << 20
log = structlog.get_logger("kbroker.history_file")


class RebalanceHistoryFile:
    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / FILE_NAME
        self._out: TextIO | None = None
        self._failed = False

    def __call__(self, entry) -> None:
        """A RebalanceHistory listener."""
        if entry.kind != "rebalance" or self._failed:
            return
        line = json.dumps({
            "event": "rebalance_completed",
            "timestamp": datetime.fromtimestamp(entry.time_ms / 1000, tz=timezone.utc).isoformat().replace("+00:00", "Z"),
            "group_id": entry.group_id, "group_type": entry.group_type,
            "old_generation": entry.old_generation, "new_generation": entry.new_generation,
            "reason": entry.reason, "client_reason": entry.client_reason, "trigger_member": entry.trigger_member,
            "members_in": list(entry.members_in), "members_out": list(entry.members_out),
            "members_moved": list(entry.members_moved),
            "member_count": entry.member_count, "duration_ms": entry.duration_ms,
            "session_timeout_ms": entry.session_timeout_ms,
        }) + "\n"
        try:
            if self._out is None:
                self._out = open(self.path, "a", encoding="utf-8", buffering=1)
            self._out.write(line)
            if self._out.tell() > MAX_BYTES:
                self._out.close()
                os.replace(self.path, self.path.with_name(FILE_NAME + ".1"))
                self._out = None
        except OSError as e:  # a full disk must not break the coordinator: stop writing, say so once
            self._failed = True
            log.warning("rebalance_history_file_failed", path=str(self.path), error=str(e))

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
