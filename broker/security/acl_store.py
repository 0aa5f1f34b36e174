"""The ACLs, persisted in `<data-dir>/security/acls.json` and read back at start-up.

Every CreateAcls/DeleteAcls rewrites the file durably before it is answered (broker/storage/state_file.py:
rendered and written off the event loop, changes made meanwhile sharing one write), so an
acknowledged change survives a crash.

The file holds one ACL per line, each with its CRC32C (a version-2 state file; one from before
checksums loads as it did). An ACL that fails its checksum cannot be told from what it was: a DENY
whose bits changed may read as anything, and dropping it would open what it closed. So any damage
(an entry, the header's count, a file that no longer parses or cannot be read) locks the authorizer
down: only super users are authorized, ACL changes are refused so the damaged file stays as it is
for the operator, and `acl_file_damaged` (error) says what was found and what to do. Nothing about
it stops the broker from starting.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable

import structlog

from ..storage.state_file import StateFile, read_rows, render_rows
from .acl import AclBinding

log = structlog.get_logger("kbroker.acl_store")


class AclStore:
    def __init__(self, data_dir: str | Path, current: Callable[[], Iterable[AclBinding]] = tuple) -> None:
        self.path = Path(data_dir) / "security" / "acls.json"
        self._current = current  # the ACLs in force (the authorizer's)
        self._file = StateFile(self.path, self._capture, mode=0o600)
        # Why the file cannot be trusted, once load() found it damaged; None while it is sound.
        self.damaged: str | None = None

    def load(self) -> list[AclBinding]:
        """The ACLs that verify; `damaged` says whether anything else was there."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            self._report([f"the file cannot be read: {exc!r}"], [])
            return []
        read = read_rows(raw, "acls", _legacy_rows)
        acls, reasons = [], read.reasons()
        for row in read.rows:
            try:
                acls.append(AclBinding.from_json(row["acl"]))
            except Exception as exc:  # noqa: BLE001 - an entry whose checksum holds but whose content is not ours
                reasons.append(f"entry {row!r}: {exc!r}")
        if reasons:
            self._report(reasons, [d.body for d in read.damage if d.body is not None])
        return acls

    def _report(self, reasons: list[str], entries: list[dict[str, Any]]) -> None:
        self.damaged = f"{self.path} is damaged: {'; '.join(reasons[:3])}"
        log.error("acl_file_damaged", file=str(self.path), damage=reasons[:20], damaged_places=len(reasons),
                  damaged_entries_read_as=entries[:20],
                  detail="only super users are authorized until the file is repaired, and ACL changes are refused "
                         "so that it stays as it is: restore it from a backup, or delete its damaged lines and "
                         "re-create what they held (kafka-acls --add), then restart the broker. The ACLs that "
                         "verify are listed by kafka-acls --list meanwhile")

    async def save(self) -> None:
        """Returns once the file holds the ACLs in force now, durably."""
        await self._file.save()

    async def caught_up(self) -> None:
        """Returns once every change saved so far is durable (state_file.StateFile.caught_up)."""
        await self._file.caught_up()

    def _capture(self) -> Callable[[], bytes]:
        return partial(_render, list(self._current()))  # AclBinding is frozen: the list is a snapshot


def _legacy_rows(data: Any) -> list[dict[str, Any]]:
    """A file from before checksums: {"version": 1, "acls": [[...], ...]}."""
    return [{"acl": row} for row in data.get("acls", [])]


def _render(acls: list[AclBinding]) -> bytes:
    return render_rows("acls", ({"acl": acl.to_json()} for acl in acls))
