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


# `kbroker serve`'s flags without argparse (broker/cli.py serve_flags) must be argparse's, word for word.
_SAME_AS_ARGPARSE = [
    ["serve"],
    ["serve", "--listen", "127.0.0.1:9092", "--data-dir", "/tmp/d", "--log-format", "json", "--flush", "never",
     "--group-initial-rebalance-delay-ms", "0"],
    ["serve", "--listen=0.0.0.0:1", "--num-partitions=", "--no-auto-create-topics-enable", "--test-controls"],
    ["serve", "--config", "k.toml", "--flush", "always", "--flush", "never", "--auto-create-topics-enable"],
    ["serve", "--config=k.toml", "--create-topics", "a:3,b", "--no-test-controls", "--test-controls",
     "--dev-security", "localhost"],
]
_ARGPARSE_DECIDES = [
    ["serve", "--help"], ["serve", "-h"], ["serve", "--data", "/tmp"], ["serve", "--data_dir", "/tmp"],
    ["serve", "--listen"], ["serve", "--node-id", "-1"], ["serve", "--test-controls=yes"], ["serve", "--dev-security"], ["serve", "extra"],
    ["serve", "--", "--listen", "x"], ["serve", "--no-listen"], ["serve", "--version"], ["--version"],
    ["probe", "--timeout", "1"], [],
]


def test_serve_flags_equal_argparse():
    from kbroker.broker.cli import serve_flags

    for words in _SAME_AS_ARGPARSE:
        args = build_parser(with_admin=False).parse_args(words)
        expected = {k: v for k, v in vars(args).items() if k not in ("command", "config")}
        assert serve_flags(words) == (expected, args.config), words


def test_anything_else_is_left_to_argparse():
    from kbroker.broker.cli import serve_flags

    for words in _ARGPARSE_DECIDES:
        assert serve_flags(words) is None, words
