"""A handler's context is typed (broker/services.py): a misspelt or renamed broker service fails the
type check that `make test` runs (`make typecheck`), instead of a client's request in production.

This runs mypy, with the project's configuration, over a tiny handler that misuses the context; the
same handler spelt right passes. mypy reuses the cache `make typecheck` leaves, so this is cheap
after it (and still correct, only slower, without it).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kbroker

ROOT = Path(kbroker.__file__).resolve().parent

HANDLER = '''
from kbroker.broker.network.router import RequestContext


async def handle(ctx: RequestContext, request: object) -> object:
    partition = ctx.broker.coordinator.partition_for("g")
    return ctx.broker.{service}, partition
'''


def _mypy(tmp_path: Path, service: str) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("mypy")
    link = ROOT / "build" / "mypy" / "kbroker"  # what `make typecheck` reads the package through
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        try:
            link.symlink_to(Path("..", ".."))
        except FileExistsError:  # another worker made it meanwhile
            pass
    probe = tmp_path / f"probe_{service}.py"
    probe.write_text(textwrap.dedent(HANDLER.format(service=service)))
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), str(probe)],
        cwd=ROOT, capture_output=True, text=True, timeout=280,
    )


def test_a_misspelt_broker_service_fails_the_type_check(tmp_path: Path) -> None:
    wrong = _mypy(tmp_path, "transaction")
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert '"BrokerServices" has no attribute "transaction"; maybe "transactions"?' in wrong.stdout
    assert "Found 1 error in 1 file" in wrong.stdout  # the rest of the probe type-checks

    right = _mypy(tmp_path, "transactions")
    assert right.returncode == 0, right.stdout + right.stderr
