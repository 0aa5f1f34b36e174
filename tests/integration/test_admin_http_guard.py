"""No web page may drive or read the broker's HTTP endpoint (issue 38, item 4): the issue's
`POST /v1/test/reset` (text/plain, `Origin: http://evil.example`) deletes nothing; a DNS-rebinding Host
is refused; test controls need the token the broker wrote to its data directory (0600), which
`kbroker test ...` finds there, or takes from --token / KBROKER_TEST_CONTROLS_TOKEN."""

from __future__ import annotations

import json
import socket
import stat

import pytest

from kbroker.broker.cli import main
from kbroker.tests.integration.broker_process import BrokerProcess, free_port


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    port = free_port()
    with BrokerProcess(tmp_path_factory.mktemp("guard") / "data", "--metrics-listen", f"127.0.0.1:{port}",
                       "--test-controls", "--create-topics", "keep-me:1") as b:
        b.admin_port = port
        b.token = (b.data_dir / "test-controls.token").read_text().strip()
        yield b


def raw(broker, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> tuple[int, dict]:
    """One HTTP/1.1 request with exactly these headers (a browser's, or an attacker's)."""
    lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in headers.items()),
             f"Content-Length: {len(body)}", "", ""]
    with socket.create_connection(("127.0.0.1", broker.admin_port), timeout=10) as s:
        s.sendall("\r\n".join(lines).encode() + body)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, payload = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(payload) if payload.startswith(b"{") else {"text": payload}


def topics(broker) -> list[str]:
    from confluent_kafka.admin import AdminClient

    return sorted(AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics)


def test_the_issues_cross_site_reset_deletes_nothing(broker):
    here = f"127.0.0.1:{broker.admin_port}"
    assert "keep-me" in topics(broker)
    # what a page on evil.example makes a browser send, no preflight asked: refused even with the token
    for headers in ({"Host": here, "Content-Type": "text/plain", "Origin": "http://evil.example"},
                    {"Host": here, "Content-Type": "text/plain", "Origin": "http://evil.example",
                     "Authorization": f"Bearer {broker.token}"},
                    {"Host": here, "Content-Type": "text/plain;charset=UTF-8", "Authorization": f"Bearer {broker.token}"},
                    {"Host": here, "Content-Type": "application/json", "Origin": "null",
                     "Authorization": f"Bearer {broker.token}"},
                    {"Host": here, "Content-Type": "application/json", "Sec-Fetch-Site": "cross-site",
                     "Authorization": f"Bearer {broker.token}"}):
        status, answer = raw(broker, "POST", "/v1/test/reset", headers, b"{}")
        assert status in (403, 415), (headers, status, answer)
    assert "keep-me" in topics(broker)
    refused = broker.events("admin_http_refused")
    assert any(e.get("origin") == "http://evil.example" and e["path"] == "/v1/test/reset" for e in refused)


def test_dns_rebinding_host_is_refused_for_reads_too(broker):
    for path in ("/metrics", "/v1/groups", "/ready"):
        assert raw(broker, "GET", path, {"Host": f"evil.example:{broker.admin_port}"})[0] == 403
        assert raw(broker, "GET", path, {"Host": f"localhost:{broker.admin_port}"})[0] in (200, 503)
    assert raw(broker, "GET", "/health", {})[0] == 400  # no Host at all


def test_test_controls_need_the_token(broker):
    here = {"Host": f"127.0.0.1:{broker.admin_port}", "Content-Type": "application/json"}
    assert raw(broker, "POST", "/v1/test/retention/run", here, b"{}")[0] == 401
    assert raw(broker, "POST", "/v1/test/retention/run", {**here, "Authorization": "Bearer wrong"}, b"{}")[0] == 401
    own_page = {**here, "Origin": f"http://127.0.0.1:{broker.admin_port}", "Authorization": f"Bearer {broker.token}"}
    status, answer = raw(broker, "POST", "/v1/test/retention/run", own_page, b"{}")
    assert status == 200 and answer["ok"]


def test_the_cli_finds_the_token_in_the_data_dir_or_takes_it(broker, capsys, monkeypatch):
    mode = stat.S_IMODE((broker.data_dir / "test-controls.token").stat().st_mode)
    assert mode == 0o600
    started = broker.events("test_controls_enabled")[-1]
    assert started["token"] == broker.token  # made up at start: printed once, there
    url = f"http://127.0.0.1:{broker.admin_port}"
    monkeypatch.delenv("KBROKER_TEST_CONTROLS_TOKEN", raising=False)
    monkeypatch.delenv("KBROKER_DATA_DIR", raising=False)
    assert main(["test", "run-retention", "offsets", "--admin-url", url, "--data-dir", str(broker.data_dir)]) == 0
    assert main(["test", "run-retention", "offsets", "--admin-url", url, "--token", broker.token,
                 "--data-dir", "/nonexistent"]) == 0
    monkeypatch.setenv("KBROKER_TEST_CONTROLS_TOKEN", broker.token)
    assert main(["test", "run-retention", "offsets", "--admin-url", url, "--data-dir", "/nonexistent"]) == 0
    monkeypatch.delenv("KBROKER_TEST_CONTROLS_TOKEN")
    capsys.readouterr()
    assert main(["test", "run-retention", "offsets", "--admin-url", url, "--data-dir", "/nonexistent"]) == 1
    assert "Authorization: Bearer" in capsys.readouterr().err
    # reads need no token: history, and probe --ready
    capsys.readouterr()
    assert main(["group", "history", "nobody", "--admin-url", url, "--json"]) == 1  # unknown, not refused
    assert "does not exist" in capsys.readouterr().err
    assert main(["probe", broker.bootstrap, "--ready", "--admin-url", url]) == 0


def test_a_token_given_by_flag_is_not_printed(tmp_path):
    port = free_port()
    with BrokerProcess(tmp_path / "data", "--metrics-listen", f"127.0.0.1:{port}", "--test-controls",
                       "--test-controls-token", "s3cret-token") as b:
        assert (b.data_dir / "test-controls.token").read_text().strip() == "s3cret-token"
        assert "s3cret-token" not in "".join(map(str, b.log_lines()))
