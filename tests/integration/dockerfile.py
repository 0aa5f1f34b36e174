"""Reading docker/Dockerfile the way `docker build` would, for tests that cannot run Docker here."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

from kbroker.tests.integration.broker_process import free_port

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


def container_env(service_env: dict) -> dict[str, str]:
    """What a compose service's process sees: the image's ENV with the service's environment over it
    (a compose file that sets KBROKER_LISTEN beside the image's KBROKER_LISTENERS gets both)."""
    return {**env(), **{k: str(v) for k, v in service_env.items()}}


_PORT = re.compile(r":(\d+)(?=,|$)")
_ADDRESSES = ("KBROKER_LISTENERS", "KBROKER_ADVERTISED_LISTENERS", "KBROKER_LISTEN", "KBROKER_ADVERTISED_LISTENER",
              "KBROKER_METRICS_LISTEN")


def as_test_environment(service_env: dict, data_dir: Path) -> tuple[dict[str, str], dict[int, int]]:
    """A compose service's container environment with only what cannot be used here changed: its
    ports become free ports (the map is returned), 0.0.0.0 becomes 127.0.0.1 (tests listen on loopback
    only), /data a temporary directory."""
    out = container_env(service_env)
    ports = {int(p): free_port() for key in _ADDRESSES for p in _PORT.findall(out.get(key, ""))}
    for key in _ADDRESSES:
        if key in out:
            out[key] = _PORT.sub(lambda m: f":{ports[int(m[1])]}", out[key]).replace("0.0.0.0", "127.0.0.1")
    assert out["KBROKER_DATA_DIR"] == "/data"
    out["KBROKER_DATA_DIR"] = str(data_dir)
    return out, ports


def healthcheck_command() -> list[str]:
    args = next(a for w, a in instructions() if w == "HEALTHCHECK")
    return json.loads(args.split(" CMD ", 1)[1])


def image_files() -> dict[str, Path]:
    """Files the Dockerfile copies to an absolute path in the image (its default config): path in the
    image -> the repository's file."""
    out = {}
    for word, args in instructions():
        if word == "COPY":
            *sources, dest = shlex.split(args)
            if dest.startswith("/") and len(sources) == 1:
                out[dest] = ROOT / sources[0]
    return out


def copy_build_context(target: Path) -> Path:
    """Exactly what the Dockerfile's COPY lines bring into the wheel's build directory (WORKDIR),
    laid out as they land; files copied elsewhere in the image are image_files()."""
    target.mkdir(parents=True)
    for word, args in instructions():
        if word != "COPY":
            continue
        *sources, dest = shlex.split(args)
        if dest.startswith("/"):
            continue
        for src in sources:
            place = target / (dest if dest.rstrip("/") not in (".", "./") else Path(src).name)
            if (ROOT / src).is_dir():
                shutil.copytree(ROOT / src, place, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                place.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(ROOT / src, place)
    return target
