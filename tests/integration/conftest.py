"""Session fixtures shared by the packaging and docker tests: the wheel is built once."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from kbroker.tests.integration.dockerfile import copy_build_context


@dataclass
class BuiltWheel:
    path: Path
    build_output: str


@pytest.fixture(scope="session")
def docker_wheel(tmp_path_factory) -> BuiltWheel:
    """The wheel the image installs, built (with build isolation, as `docker build` does) from
    exactly the files the Dockerfile copies."""
    base = tmp_path_factory.mktemp("wheel")
    context = copy_build_context(base / "context")
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-v",
                          "-w", str(base / "dist"), str(context)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (wheel,) = (base / "dist").glob("kbroker-*.whl")
    return BuiltWheel(wheel, out.stdout + out.stderr)


@pytest.fixture(scope="session")
def wheel_venv(docker_wheel, tmp_path_factory) -> Path:
    """A fresh virtual environment with the wheel installed (not editable) and its dependencies."""
    venv = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([str(venv / "bin" / "pip"), "install", "--disable-pip-version-check", "-q",
                          str(docker_wheel.path)], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return venv


@pytest.fixture(scope="module")
def postgres():
    """A scratch PostgreSQL server for the module's tests (tests/integration/postgres.py); each test
    makes its own database on it (`postgres.create_database()`). Skips when PostgreSQL is absent,
    fails then under `make test`."""
    from kbroker.tests.integration.postgres import require_postgres, start_postgres

    require_postgres()
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop("immediate")
        server.remove()
