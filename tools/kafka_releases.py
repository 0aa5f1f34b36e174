"""Derive `protocol/kafka_releases.json`, what each Kafka release answers to ApiVersions on its broker
listener, by asking that release itself.

    python -m kbroker.tools.kafka_releases            # every line in LINES (minutes: 9 JVM starts)
    python -m kbroker.tools.kafka_releases 3.9 4.0    # only these lines, the others kept as they are

For each release line the newest release on Maven Central is resolved (`kafka_2.13` with the version range
`[X.Y,X.Y+1)`, tools/kafka_releases/pom.xml, into build/kafka-releases/X.Y), started as one KRaft node,
broker and controller, formatted with that release's defaults (tests/reference/kafka.py KafkaProcess),
and asked ApiVersions at the highest version it serves. Its answer (APIs and versions, supported and
finalized features) is the table `kbroker serve --kafka-version X.Y` advertises (protocol/kafka_releases.py
reads it), so the tables come from Kafka's own releases, never from reading its history by hand.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
POM = ROOT / "tools" / "kafka_releases" / "pom.xml"
BUILD = ROOT / "build" / "kafka-releases"
OUT = ROOT / "protocol" / "kafka_releases.json"
LINES = ("3.6", "3.7", "3.8", "3.9", "4.0", "4.1", "4.2", "4.3", "4.4")
API_VERSIONS = 18


def resolve(line: str) -> tuple[str, Path]:
    """The newest release of `line` on Maven Central and the directory holding its broker's jars."""
    major, minor = (int(part) for part in line.split("."))
    libs = BUILD / line
    if not (libs / ".resolved").exists():
        shutil.rmtree(libs, ignore_errors=True)
        subprocess.run(["mvn", "-q", "-B", "-Dstyle.color=never", "-f", str(POM),
                        f"-Dkafka.version=[{major}.{minor},{major}.{minor + 1})",
                        "dependency:copy-dependencies", f"-DoutputDirectory={libs}"], check=True)
        (libs / ".resolved").touch()
    jars = sorted(libs.glob("kafka_2.13-*.jar"))
    if len(jars) != 1:
        raise RuntimeError(f"expected one kafka_2.13 jar in {libs}, found {jars}")
    return jars[0].name.removeprefix("kafka_2.13-").removesuffix(".jar"), libs


def ask_api_versions(bootstrap: str) -> dict:
    """ApiVersions at the highest version the broker serves (asked first in v3, which every release
    since 2.4 serves; KAFKA-17011: only from v4 is a feature's minimum 0 told as 0)."""
    from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest
    from kbroker.tests.integration.wire import Wire

    request = ApiVersionsRequest(client_software_name="kbroker-kafka-releases", client_software_version="1")
    wire = Wire(bootstrap)
    try:
        answer = wire.call(API_VERSIONS, 3, request)
        top = next(k.max_version for k in answer.api_keys if k.api_key == API_VERSIONS)
        if top > 3:
            answer = wire.call(API_VERSIONS, top, request)
    finally:
        wire.close()
    if answer.error_code != 0:
        raise RuntimeError(f"ApiVersions answered error {answer.error_code}")
    return {
        "apis": {str(k.api_key): [k.min_version, k.max_version] for k in sorted(answer.api_keys, key=lambda k: k.api_key)},
        "supported_features": {f.name: [f.min_version, f.max_version]
                               for f in sorted(answer.supported_features, key=lambda f: f.name)},
        "finalized_features": {f.name: f.max_version_level
                               for f in sorted(answer.finalized_features, key=lambda f: f.name)},
    }


def derive(line: str) -> dict:
    from kbroker.tests.reference.kafka import KafkaProcess

    release, libs = resolve(line)
    with tempfile.TemporaryDirectory(prefix=f"kafka-{release}-") as base:
        kafka = KafkaProcess(Path(base), libs=libs, heap="512m")
        try:
            table = ask_api_versions(kafka.bootstrap)
        finally:
            kafka.stop()
    print(f"{line}: Kafka {release}, {len(table['apis'])} APIs", flush=True)
    return {"release": release, **table}


def main(argv: list[str]) -> None:
    lines = argv or list(LINES)
    unknown = [line for line in lines if line not in LINES]
    if unknown:
        raise SystemExit(f"unknown release lines {unknown}; known: {', '.join(LINES)}")
    tables = json.loads(OUT.read_text()) if OUT.exists() else {}
    for line in lines:
        tables[line] = derive(line)
        ordered = {line: tables[line] for line in LINES if line in tables}
        OUT.write_text(json.dumps(ordered, indent=1) + "\n")  # after each line: a later failure keeps it
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
