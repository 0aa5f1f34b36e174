"""The deliberate differences (tests/reference/differences/<level>.toml) against what a run observed.

Each `[[difference]]` names the checks it covers (`check`, a glob over check ids, or a list of them:
`Produce v[0-2]: *`)
and, optionally, the fields they may differ on (`fields`, a glob over the differing paths, `*` by
default: `*.error_message` keeps a listed difference from hiding a new one elsewhere in the same
check), then what Kafka does, what kbroker does, the reason, and the issue that will change it (0 when
none will). An observed difference that no entry covers is a defect; an entry that covers nothing
observed is stale. Both fail the level's test.
"""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .runner import Result

HERE = Path(__file__).resolve().parent.parent / "differences"
REQUIRED = ("check", "kafka", "kbroker", "reason", "issue")


@dataclass
class Listed:
    check: str | list[str]
    kafka: str
    kbroker: str
    reason: str
    issue: int
    fields: str = "*"
    matched: list[str] = field(default_factory=list)

    @property
    def globs(self) -> list[str]:
        return [self.check] if isinstance(self.check, str) else list(self.check)

    def covers(self, result: Result) -> bool:
        return (result.error is None and any(fnmatch.fnmatchcase(result.check.id, g) for g in self.globs)
                and all(fnmatch.fnmatchcase(path, self.fields) for path, _, _ in result.diffs))

    def as_json(self) -> dict[str, Any]:
        return {"check": self.check, "fields": self.fields, "kafka": self.kafka, "kbroker": self.kbroker,
                "reason": self.reason, "issue": self.issue, "checks": len(self.matched)}


def load(level: str, path: Path | None = None) -> list[Listed]:
    path = path or HERE / f"{level}.toml"
    entries = tomllib.loads(path.read_text()).get("difference", [])
    out = []
    for i, entry in enumerate(entries):
        missing = [k for k in REQUIRED if k not in entry]
        unknown = set(entry) - {*REQUIRED, "fields"}
        if missing or unknown:
            raise ValueError(f"{path.name} difference #{i + 1}: missing {missing}, unknown {sorted(unknown)}")
        out.append(Listed(**entry))
    return out


@dataclass
class Verdict:
    """A run judged against the list: what the level's JSON says and what its test asserts."""

    level: str
    results: list[Result]
    listed: list[Listed]
    defects: list[Result]
    stale: list[Listed]

    @property
    def counted(self) -> list[Result]:
        return [r for r in self.results if r.check.table != "setup"]

    def as_json(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        counted = self.counted
        return {
            "level": self.level,
            "checks": len(counted),
            "equal": sum(r.equal for r in counted),
            "deliberate": [entry.as_json() for entry in self.listed],
            "defects": [{"check": r.check.id, "kafka": r.summary("kafka"), "kbroker": r.summary("kbroker")}
                        for r in self.defects],
            **(extra or {}),
        }

    def failure(self) -> str:
        """What a reviewer needs to see when the run and the list disagree (empty when they agree)."""
        parts = []
        if self.defects:
            parts.append(f"{len(self.defects)} difference(s) no entry of {self.level}.toml covers "
                         "(fix kbroker, or list them with a reason):")
            parts += [r.diff_text() for r in self.defects]
        if self.stale:
            parts.append(f"{len(self.stale)} entry(ies) of {self.level}.toml cover nothing this run observed "
                         "(remove them):")
            parts += [f"  {entry.globs} ({entry.fields})" for entry in self.stale]
        return "\n".join(parts)


def judge(level: str, results: list[Result], listed: list[Listed]) -> Verdict:
    defects = []
    for result in results:
        if result.equal:
            continue
        entry = next((e for e in listed if e.covers(result)), None)
        if entry is None:
            defects.append(result)
        else:
            entry.matched.append(result.check.id)
    return Verdict(level, results, listed, defects, [e for e in listed if not e.matched])
