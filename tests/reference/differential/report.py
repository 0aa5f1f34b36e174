"""docs/differential.md from the levels' results: `python -m kbroker.tests.reference.differential.report`.

Each level's test writes build/differential/<level>.json ({"level", "checks", "equal", "deliberate",
"defects"}, and whatever else its section shows); this renders a section per level from the files that
exist and keeps, as they are, the page's sections of the levels whose file does not (a run of one
level's test does not erase the others'). Each level's test checks its own section against its fresh
run (`section_is_current`), so the page cannot go stale: it is generated, never edited by hand.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "build" / "differential"
PAGE = ROOT / "docs" / "differential.md"
LEVELS = {  # level -> title, in the page's order
    "wire": "Wire: crafted requests, answers compared field by field",
    "clients": "Clients: the same scenario through real clients",
    "config": "Configuration and metadata",
    "tools": "Kafka's own tools against kbroker",
}
HEAD = """# kbroker beside Apache Kafka 4.4: the differential checks

The same steps run against Apache Kafka 4.4.0 (one KRaft node, started by the test suite from the jars
`make kafka-jars` resolves) and against kbroker, and what a client can observe is compared, after
normalising what must differ between two brokers (node and cluster ids, hosts and ports, clocks,
generated member and producer ids; the wire level's rules are in
`tests/reference/differential/normalise.py`). Every difference is either fixed in kbroker or listed
below with its reason, in `tests/reference/differences/<level>.toml`; a difference that is neither
fails the suite.

This page is generated: `python -m kbroker.tests.reference.differential.report` after the levels'
tests have run (`pytest tests/reference`), and each level's test fails when its section here is not
what its run produced.
"""
_SECTION = re.compile(r"<!-- level: (?P<level>[a-z]+) -->\n.*?<!-- end: (?P=level) -->\n", re.S)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _issue(issue: int) -> str:
    return f"#{issue}" if issue else "none"


def section(result: dict[str, Any]) -> str:
    level = result["level"]
    deliberate = result["deliberate"]
    covered = sum(entry.get("checks", 0) for entry in deliberate)
    lines = [f"<!-- level: {level} -->", f"## {LEVELS.get(level, level)}", "",
             f"**{result['checks']} checks, {result['equal']} equal**; {covered} differ in "
             f"{len(deliberate)} deliberate ways listed below; {len(result['defects'])} other differences.", ""]
    if result["defects"]:
        lines += ["Differences that are neither fixed nor listed (the suite fails on them):", ""]
        lines += [f"- `{_cell(d['check'])}`: Kafka {_cell(d['kafka'])}; kbroker {_cell(d['kbroker'])}"
                  for d in result["defects"]]
        lines.append("")
    if level == "wire":
        lines += _wire_body(result)
    if deliberate:
        lines += ["### Deliberate differences", "", "| checks | Kafka | kbroker | why | issue |", "|---|---|---|---|---|"]
        for entry in deliberate:
            globs = [entry["check"]] if isinstance(entry["check"], str) else entry["check"]
            where = ", ".join(f"`{_cell(g)}`" for g in globs) + (
                f" (on {_cell(entry['fields'])})" if entry.get("fields", "*") != "*" else "")
            lines.append(f"| {where}: {entry.get('checks', 0)} | {_cell(entry['kafka'])} | {_cell(entry['kbroker'])} "
                         f"| {_cell(entry['reason'])} | {_issue(entry['issue'])} |")
        lines.append("")
    lines.append(f"<!-- end: {level} -->")
    return "\n".join(lines) + "\n"


def _wire_body(result: dict[str, Any]) -> list[str]:
    lines = ["### Every API and version kbroker serves", "",
             "Crafted requests per version: a well-formed one and the error paths (unknown topic and topic id, "
             "partitions out of range, invalid values Kafka validates, wrong states), sent raw and decoded with "
             "kbroker's generated codec.", "",
             "| API | versions | checks | equal |", "|---|---|---|---|"]
    for api in result.get("apis", []):
        lines.append(f"| {api['api']} | {api['versions']} | {api['checks']} | {api['equal']} |")
    only = result.get("kbroker_only", {})
    if only:
        lines += ["", "Versions kbroker serves that Kafka 4.4 does not (Kafka closes the connection, so there is "
                  "no answer to compare; kbroker keeps them for old clients): "
                  + "; ".join(f"{api} v{_ranges(versions)}" for api, versions in only.items()) + ".", ""]
    for table, title in (("classic", "The classic group protocol's state machine"),
                         ("consumer", "The consumer group protocol's state machine (KIP-848)")):
        rows = result.get("coordinator", {}).get(table, [])
        if not rows:
            continue
        equal = sum(r["equal"] for r in rows)
        lines += [f"### {title}", "", f"{len(rows)} rows, {equal} equal. Each row's answers, step by step.", "",
                  "| row | steps | Kafka answered | kbroker answered | equal |", "|---|---|---|---|---|"]
        for r in rows:
            theirs = "the same" if r["equal"] and r["kafka"] == r["kbroker"] else _cell(r["kbroker"])
            lines.append(f"| {_cell(r['row'])} | {_cell(r['steps'])} | {_cell(r['kafka'])} | {theirs} | "
                         f"{'yes' if r['equal'] else 'no'} |")
        lines.append("")
    return lines


def _ranges(versions: list[int]) -> str:
    if not versions:
        return ""
    spans, start, prev = [], versions[0], versions[0]
    for v in versions[1:] + [None]:  # type: ignore[list-item]
        if v is not None and v == prev + 1:
            prev = v
            continue
        spans.append(f"{start}" if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    return ", ".join(spans)


def sections_of(page: str) -> dict[str, str]:
    return {m.group("level"): m.group(0) for m in _SECTION.finditer(page)}


def render(results: dict[str, dict[str, Any]], old_page: str = "") -> str:
    kept = sections_of(old_page)
    parts = [HEAD]
    for level in [*LEVELS, *sorted(set(results) - set(LEVELS))]:
        if level in results:
            parts.append(section(results[level]))
        elif level in kept:
            parts.append(kept[level])
    return "\n".join(parts)


def read_results(directory: Path = RESULTS) -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted(directory.glob("*.json")):
        data = json.loads(path.read_text())
        out[data.get("level", path.stem)] = data
    return out


def section_is_current(result: dict[str, Any], page: Path = PAGE) -> str:
    """"" when the page's section for this level is what `result` renders; else what to do about it."""
    found = sections_of(page.read_text()).get(result["level"]) if page.exists() else None
    if found == section(result):
        return ""
    where = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
    return (f"{where}'s '{result['level']}' section is not this run's: regenerate it with "
            f"`python -m kbroker.tests.reference.differential.report` and commit it")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="where the levels' JSON files are")
    parser.add_argument("--page", type=Path, default=PAGE, help="the page to write")
    args = parser.parse_args()
    results = read_results(args.results)
    old = args.page.read_text() if args.page.exists() else ""
    args.page.parent.mkdir(parents=True, exist_ok=True)
    args.page.write_text(render(results, old))
    print(f"{args.page}: {', '.join(sorted(results)) or 'no results'} rendered from {args.results}")


if __name__ == "__main__":
    main()
