"""The ACLs, persisted in `<data-dir>/security/acls.json` and read back at start-up.

Every CreateAcls/DeleteAcls rewrites the file atomically (temporary file, fsync, rename) before it is
answered, so an acknowledged change survives a crash; ACL changes are rare and the set is small.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from .acl import AclBinding
from .credentials import _atomic_write


class AclStore:
    def __init__(self, data_dir: str | Path) -> None:
        self.path = Path(data_dir) / "security" / "acls.json"

    def load(self) -> list[AclBinding]:
        if not self.path.exists():
            return []
        data = json.loads(self.path.read_text(encoding="utf-8"))
        return [AclBinding.from_json(row) for row in data.get("acls", [])]

    def save(self, acls: Iterable[AclBinding]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        rows = [acl.to_json() for acl in acls]
        _atomic_write(self.path, json.dumps({"version": 1, "acls": rows}, indent=0))
