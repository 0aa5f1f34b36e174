"""Reading docker/Dockerfile the way `docker build` would, for tests that cannot run Docker here."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"


def instructions() -> list[tuple[str, str]]:
    """(instruction, arguments) pairs, continuation lines joined, comments dropped."""
    text = (DOCKER / "Dockerfile").read_text()
    joined = text.replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), " ".join(rest.split())))
    return out


def env() -> dict[str, str]:
    out = {}
    for word, args in instructions():
        if word == "ENV":
            for item in shlex.split(args):
                key, _, value = item.partition("=")
                out[key] = value
    return out


def healthcheck_command() -> list[str]:
    args = next(a for w, a in instructions() if w == "HEALTHCHECK")
    return json.loads(args.split(" CMD ", 1)[1])


def copy_build_context(target: Path) -> Path:
    """Exactly what the Dockerfile's COPY lines bring into the image, laid out as they land."""
    target.mkdir(parents=True)
    for word, args in instructions():
        if word != "COPY":
            continue
        *sources, dest = shlex.split(args)
        for src in sources:
            place = target / (dest if dest.rstrip("/") not in (".", "./") else Path(src).name)
            if (ROOT / src).is_dir():
                shutil.copytree(ROOT / src, place, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                place.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(ROOT / src, place)
    return target
