"""The CLI builds the admin commands' parser (which imports the admin client) only for those commands:
`kbroker serve` and `kbroker probe` start without it, `kbroker --help` still lists every command."""

from __future__ import annotations

import json
import subprocess
import sys

from kbroker.broker.cli import build_parser


def test_help_lists_every_command():
    text = build_parser().format_help()
    for command in ("serve", "probe", "user", "analyze", "topic", "group", "test"):
        assert command in text


def test_probe_runs_without_the_admin_cli():
    code = """
import json, sys
from kbroker.broker.cli import main
status = main(["probe", "127.0.0.1:1", "--timeout", "0.2"])
print(json.dumps({"status": status, "admin": sorted(m for m in sys.modules if m.startswith("kbroker.admin"))}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {"status": 1, "admin": []}  # nothing listens on port 1


def test_admin_commands_still_parse():
    args = build_parser().parse_args(["topic", "list", "-b", "127.0.0.1:9092"])
    assert args.command == "topic"
