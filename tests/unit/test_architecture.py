"""The house's shape, checked: no import cycle between modules, small modules, relative imports.

The layer contracts themselves (protocol and purgatory import nothing of ours, the coordinator never
the broker, ...) are import-linter's, in pyproject.toml, run by `make test`."""

from __future__ import annotations

import re
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ("broker", "protocol", "coordinator", "purgatory", "pipeline", "admin")
GENERATED = (ROOT / "protocol" / "messages", ROOT / "protocol" / "compiled")  # make codegen writes them
MAX_LINES = 700  # "about 600": a module past this is two modules


def _runtime_modules(graph) -> set[str]:
    return {m for m in graph.modules if m.split(".")[1:2] and m.split(".")[1] in RUNTIME}


def test_no_import_cycle_between_modules() -> None:
    graph = grimp.build_graph("kbroker", exclude_type_checking_imports=True)
    modules = _runtime_modules(graph)
    cycles = set()
    for module in modules:
        for imported in graph.find_modules_directly_imported_by(module):
            if imported in modules and imported != module and graph.chain_exists(imported, module):
                if not (module.startswith(imported + ".") or imported.startswith(module + ".")):
                    cycles.add(tuple(sorted((module, imported))))
    assert not cycles, sorted(cycles)


def test_modules_stay_readable_in_one_sitting() -> None:
    long = {}
    for top in RUNTIME:
        for path in (ROOT / top).rglob("*.py"):
            if any(folder in path.parents for folder in GENERATED):
                continue
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_LINES:
                long[str(path.relative_to(ROOT))] = lines
    assert not long, long


def test_imports_between_our_folders_are_relative() -> None:
    # So the tree read as files shows its arrows (the package maps `kbroker` to this folder).
    absolute = re.compile(r"^\s*(from|import) kbroker\b", re.MULTILINE)
    found = [str(p.relative_to(ROOT)) for top in RUNTIME for p in (ROOT / top).rglob("*.py")
             if absolute.search(p.read_text(encoding="utf-8"))]
    assert not found, found
