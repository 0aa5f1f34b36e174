"""The config and tools levels of the differential checks: one observation taken from Apache Kafka 4.4
and from kbroker (a config entry, a tool's output), compared after normalising what must differ (ids,
ports, paths, timestamps), against the list of differences a reviewer accepted. (The wire level plays
crafted requests through runner.py and judges them with differences.py; these levels observe through
clients and tools, so a check here is a pair of values.)

    level = Level("config", part="describe-configs")
    level.compare("DescribeConfigs.topic:retention.ms", kafka_fields, kbroker_fields)
    ...
    level.settle()       # writes the figures, then fails on a difference not listed or a listed one not seen

A check is one named observation (an API's range, one config entry, one tool's output); it is equal
or it has differences, each a (check, kafka, kbroker) triple of short strings. The deliberate ones
are listed in tests/reference/differences/<level>.toml, one `[[difference]]` table each:

    [[difference]]
    check = "DescribeConfigs.broker:remote.log.*"   # `*` matches any run of characters
    kafka = "*"
    kbroker = "absent"
    reason = "no tiered storage: ..."
    issue = 43                                       # where the difference is planned work; else omitted

An observed difference must match a listed entry (check, kafka and kbroker patterns all match),
else it is a defect; a listed entry that matches nothing observed by the parts that claim it (by
the entry's check prefix) is stale. Both fail the test that settles.

Figures: every part writes build/differential/parts/<level>/<part>.json, and
build/differential/<level>.json is rebuilt from all parts of the level under a lock (test files
of one level run in different pytest-xdist workers): {"level", "checks", "equal", "deliberate":
[{"check", "kafka", "kbroker", "reason", "issue", "checks"}], "defects": [{"check", "kafka", "kbroker"}]},
what report.py renders into docs/differential.md. When every part of a level (PARTS) has settled in
this test run, the part that settles last checks that the page's section for the level is this run's.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from . import report

DIFFERENCES_DIR = Path(__file__).resolve().parent.parent / "differences"
FIGURES_DIR = report.RESULTS
ABSENT = "absent"
# The parts each level is made of (the `part` of each test module's Level).
PARTS = {
    "config": frozenset({"config"}),
    "tools": frozenset({"kafka-acls", "cluster", "kafka-configs", "kafka-consumer-groups", "records",
                        "kafka-share-groups", "kafka-topics", "kafka-transactions"}),
}


@dataclass(frozen=True, order=True)
class Difference:
    check: str
    kafka: str
    kbroker: str


def _pattern(text: str) -> re.Pattern[str]:
    return re.compile("^" + ".*".join(re.escape(piece) for piece in text.split("*")) + "$", re.DOTALL)


@dataclass(frozen=True)
class Listed:
    """One deliberate difference from the level's TOML file."""

    check: str
    kafka: str
    kbroker: str
    reason: str
    issue: int | None = None

    def matches(self, diff: Difference) -> bool:
        return all(_pattern(pattern).match(value) for pattern, value in
                   ((self.check, diff.check), (self.kafka, diff.kafka), (self.kbroker, diff.kbroker)))

    def claimed_by(self, prefixes: Iterable[str]) -> bool:
        """Whether a part checking these prefixes is the one that should observe this entry."""
        head = self.check.split("*", 1)[0]
        return any(head.startswith(p) or p.startswith(head) for p in prefixes)


def load_listed(level: str) -> list[Listed]:
    path = DIFFERENCES_DIR / f"{level}.toml"
    if not path.exists():
        return []
    with open(path, "rb") as fh:
        tables = tomllib.load(fh).get("difference", [])
    out = []
    for table in tables:
        unknown = set(table) - {"check", "kafka", "kbroker", "reason", "issue"}
        assert not unknown, f"{path}: unknown keys {sorted(unknown)} in {table}"
        assert table.get("reason", "").strip(), f"{path}: a difference without a reason: {table}"
        out.append(Listed(table["check"], str(table["kafka"]), str(table["kbroker"]), table["reason"].strip(),
                          table.get("issue")))
    return out


def render(value: Any) -> str:
    """One field's value as the short string a difference shows."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(render(v) for v in value) + "]"
    return str(value)


class Level:
    """The checks one test module makes at one level; `settle()` writes its part and judges it."""

    def __init__(self, level: str, part: str, prefixes: Iterable[str] | None = None) -> None:
        self.level = level
        self.part = part
        self.checks: dict[str, list[Difference]] = {}
        self.prefixes = tuple(prefixes) if prefixes is not None else None
        self.listed = load_listed(level)

    # --- observing ---------------------------------------------------------------------------------

    def record(self, check: str, differences: Iterable[Difference] = ()) -> list[Difference]:
        assert check not in self.checks, f"check {check!r} made twice"
        found = self.checks[check] = sorted(set(differences))
        return found

    def compare(self, check: str, kafka: Mapping[str, Any] | None, kbroker: Mapping[str, Any] | None) -> list[Difference]:
        """Compare two observations field by field; None stands for "absent" on that side. A differing
        field is one difference `field=value`; absence on one side is a single difference."""
        if kafka is None or kbroker is None:
            if kafka is None and kbroker is None:
                return self.record(check)
            return self.record(check, [Difference(check, _summary(kafka), _summary(kbroker))])
        diffs = []
        for name in sorted(set(kafka) | set(kbroker)):
            a, b = kafka.get(name, ABSENT), kbroker.get(name, ABSENT)
            if a != b:
                diffs.append(Difference(check, f"{name}={render(a)}", f"{name}={render(b)}"))
        return self.record(check, diffs)

    def compare_value(self, check: str, kafka: Any, kbroker: Any) -> list[Difference]:
        if kafka == kbroker:
            return self.record(check)
        return self.record(check, [Difference(check, render(kafka), render(kbroker))])

    def compare_lines(self, check: str, kafka: list[str], kbroker: list[str]) -> list[Difference]:
        """Two outputs line by line: each differing run of lines is one difference, its lines joined
        by ' | ' (an added or missing run shows `absent` on the side that lacks it)."""
        import difflib

        diffs = []
        matcher = difflib.SequenceMatcher(a=kafka, b=kbroker, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag != "equal":
                diffs.append(Difference(check, " | ".join(kafka[i1:i2]) or ABSENT, " | ".join(kbroker[j1:j2]) or ABSENT))
        return self.record(check, diffs)

    # --- judging -----------------------------------------------------------------------------------

    @property
    def differences(self) -> list[Difference]:
        return [d for diffs in self.checks.values() for d in diffs]

    def _mine(self) -> list[Listed]:
        if self.prefixes is None:
            return self.listed
        return [entry for entry in self.listed if entry.claimed_by(self.prefixes)]

    def judge(self) -> tuple[list[Difference], list[Listed], list[Listed]]:
        """(defects: differences no entry lists, stale: entries of this part nothing matched, used)."""
        defects = [d for d in self.differences if not any(entry.matches(d) for entry in self.listed)]
        used = [entry for entry in self._mine() if any(entry.matches(d) for d in self.differences)]
        stale = [entry for entry in self._mine() if entry not in used]
        return defects, stale, used

    def counted(self) -> dict[Listed, set[str]]:
        """The checks each listed entry accounts for: a difference counts under the first entry that
        matches it."""
        out: dict[Listed, set[str]] = {}
        for diff in self.differences:
            entry = next((e for e in self.listed if e.matches(diff)), None)
            if entry is not None:
                out.setdefault(entry, set()).add(diff.check)
        return out

    def settle(self) -> None:
        """Write this part's figures and the level's, then fail on defects and stale entries, and on
        docs/differential.md when this part completes the level's run and the page is not its figures."""
        defects, stale, used = self.judge()
        counted = self.counted()
        part = {
            "run": RUN,
            "checks": sorted(self.checks),
            "equal": sorted(check for check, diffs in self.checks.items() if not diffs),
            "deliberate": [{"check": e.check, "kafka": e.kafka, "kbroker": e.kbroker, "reason": e.reason,
                            "issue": e.issue, "matched": sorted(counted.get(e, ()))} for e in used],
            "defects": [asdict(d) for d in defects],
            "differences": [asdict(d) for d in self.differences],
        }
        merged, complete = write_part(self.level, self.part, part)
        problems = []
        if defects:
            problems.append("differences not listed in tests/reference/differences/"
                            f"{self.level}.toml (fix kbroker, or list them with a reason):\n"
                            + "\n".join(_as_toml(d) for d in defects))
        if stale:
            problems.append("listed differences no longer observed (remove them):\n"
                            + "\n".join(f"  {e.check}: kafka={e.kafka!r} kbroker={e.kbroker!r}" for e in stale))
        if complete and not problems:
            page = report.section_is_current(merged)
            if page:
                problems.append(page)
        assert not problems, "\n\n".join(problems)


def _summary(value: Mapping[str, Any] | None) -> str:
    if value is None:
        return ABSENT
    return ", ".join(f"{k}={render(v)}" for k, v in sorted(value.items()))


def _as_toml(diff: Difference) -> str:
    return (f"[[difference]]\ncheck = {json.dumps(diff.check)}\nkafka = {json.dumps(diff.kafka)}\n"
            f"kbroker = {json.dumps(diff.kbroker)}\nreason = \"\"\n")


# One test run: pytest-xdist's workers share its id; without xdist, the one process is the run.
RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid-{os.getpid()}"


def write_part(level: str, part: str, figures: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """Store one part and rebuild the level's figures from every stored part of the level, under a
    lock: (the level's figures, whether every part of it was stored by this run)."""
    parts_dir = FIGURES_DIR / "parts" / level
    parts_dir.mkdir(parents=True, exist_ok=True)
    with open(FIGURES_DIR / f".{level}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _write_atomically(parts_dir / f"{part}.json", figures)
        known = PARTS.get(level)
        stored = {p.stem: json.loads(p.read_text()) for p in sorted(parts_dir.glob("*.json"))
                  if known is None or p.stem in known}
        merged = merge_parts(level, list(stored.values()))
        _write_atomically(FIGURES_DIR / f"{level}.json", merged)
    complete = known is not None and set(stored) == known and all(p.get("run") == RUN for p in stored.values())
    return merged, complete


def merge_parts(level: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The level's figures in report.py's shape; an entry several parts used counts their checks once."""
    checks = {c for p in parts for c in p["checks"]}
    unequal = {d["check"] for p in parts for d in p.get("differences", [])}
    deliberate: dict[tuple, dict[str, Any]] = {}
    matched: dict[tuple, set[str]] = {}
    for p in parts:
        for entry in p["deliberate"]:
            key = (entry["check"], entry["kafka"], entry["kbroker"], entry["reason"])
            deliberate.setdefault(key, {k: v for k, v in entry.items() if k != "matched"})
            matched.setdefault(key, set()).update(entry.get("matched", ()))
    for key, entry in deliberate.items():
        entry["checks"] = len(matched[key])
    return {
        "level": level,
        "checks": len(checks),
        "equal": len(checks - unequal),
        "deliberate": sorted(deliberate.values(), key=lambda e: (e["check"], e["kafka"], e["kbroker"])),
        "defects": sorted((d for p in parts for d in p["defects"]), key=lambda d: (d["check"], d["kafka"])),
    }


def _write_atomically(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)
