"""pyproject.toml against the code: the `bench` extra installs every third-party module the
benchmarks import (directly or through the kbroker modules they use)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _module_file(name: str) -> Path | None:
    """kbroker.x.y -> its source file in this checkout."""
    parts = name.split(".")[1:]
    base = ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def third_party_imports(start: list[Path]) -> set[str]:
    """Top-level names of non-stdlib, non-kbroker modules imported from `start`, following kbroker
    imports transitively."""
    seen: set[Path] = set()
    todo = list(start)
    found: set[str] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                top = name.split(".")[0]
                if top == "kbroker":
                    target = _module_file(name)
                    if target is not None:
                        todo.append(target)
                elif top not in sys.stdlib_module_names and top != "__future__":
                    found.add(top)
    return found


def _requirement_name(req: str) -> str:
    return re.split(r"[\s\[<>=!~;]", req, maxsplit=1)[0].lower().replace("_", "-")


def _extra(name: str) -> set[str]:
    """Distribution names an extra brings in, following `kbroker[other]` references."""
    out: set[str] = set()
    for req in PYPROJECT["project"]["optional-dependencies"][name]:
        dist = _requirement_name(req)
        if dist == "kbroker":
            for nested in re.search(r"\[(.*)\]", req)[1].split(","):
                out |= _extra(nested.strip())
        else:
            out.add(dist)
    return out


def test_bench_extra_covers_every_benchmark_import() -> None:
    imports = third_party_imports(sorted((ROOT / "bench").glob("*.py")))
    assert "confluent_kafka" in imports  # the one `[bench]` used to miss
    provided = _extra("bench") | {_requirement_name(r) for r in PYPROJECT["project"]["dependencies"]}
    by_module = importlib.metadata.packages_distributions()
    missing = {}
    for module in sorted(imports):
        dists = {d.lower().replace("_", "-") for d in by_module.get(module, [])}
        assert dists, f"{module} is imported by the benchmarks but not installed in the test environment"
        if not dists & provided:
            missing[module] = sorted(dists)
    assert missing == {}, f"not installed by kbroker[bench]: {missing}"
