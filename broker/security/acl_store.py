"""The ACLs, persisted in `<data-dir>/security/acls.json` and read back at start-up.

Every CreateAcls/DeleteAcls rewrites the file durably before it is answered (broker/storage/state_file.py:
rendered and written off the event loop, changes made meanwhile sharing one write), so an
acknowledged change survives a crash.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Callable, Iterable

from ..storage.state_file import StateFile, json_rows
from .acl import AclBinding


class AclStore:
    def __init__(self, data_dir: str | Path, current: Callable[[], Iterable[AclBinding]] = tuple) -> None:
        self.path = Path(data_dir) / "security" / "acls.json"
        self._current = current  # the ACLs in force (the authorizer's)
        self._file = StateFile(self.path, self._capture, mode=0o600)

    def load(self) -> list[AclBinding]:
        if not self.path.exists():
            return []
        data = json.loads(self.path.read_text(encoding="utf-8"))
        return [AclBinding.from_json(row) for row in data.get("acls", [])]

    async def save(self) -> None:
        """Returns once the file holds the ACLs in force now, durably."""
        await self._file.save()

    async def caught_up(self) -> None:
        """Returns once every change saved so far is durable (state_file.StateFile.caught_up)."""
        await self._file.caught_up()

    def _capture(self) -> Callable[[], bytes]:
        return partial(_render, list(self._current()))  # AclBinding is frozen: the list is a snapshot


def _render(acls: list[AclBinding]) -> bytes:
    return ('{"version": 1, "acls": ' + json_rows(acl.to_json() for acl in acls) + "}\n").encode()
