"""The HTTP endpoint's Host, Origin, Content-Type and token rules (broker/security/http_guard.py)."""

from __future__ import annotations

import pytest

from kbroker.broker.security.http_guard import HttpGuard


@pytest.mark.parametrize("bind,allowed,host,ok", [
    ("127.0.0.1", "", "127.0.0.1:9644", True),
    ("127.0.0.1", "", "localhost:9644", True),
    ("127.0.0.1", "", "[::1]:9644", True),
    ("127.0.0.1", "", "evil.example:9644", False),  # DNS rebinding: the page's own name, pointed at 127.0.0.1
    ("127.0.0.1", "", "10.0.0.5:9644", False),
    ("0.0.0.0", "", "10.0.0.5:9644", True),  # an address literal cannot be rebound
    ("0.0.0.0", "", "kbroker:9644", False),
    ("0.0.0.0", "kbroker", "kbroker:9644", True),  # docker/compose.monitoring.yml's Prometheus
    ("0.0.0.0", "*", "anything.example", True),
    ("10.0.0.5", "", "10.0.0.5", True),
    ("10.0.0.5", "", "10.0.0.6", False),
])
def test_host_names_an_address_the_endpoint_listens_on(bind, allowed, host, ok):
    refusal = HttpGuard(bind, allowed).refusal("GET", ["metrics"], {"host": host})
    assert (refusal is None) == ok, refusal


def test_origin_content_type_and_token():
    g = HttpGuard("127.0.0.1", token="t0k")
    ok = {"host": "127.0.0.1:9644", "content-type": "application/json; charset=utf-8", "authorization": "Bearer t0k"}
    assert g.refusal("POST", ["v1", "test", "reset"], ok) is None
    assert g.refusal("POST", ["v1", "test", "reset"], {**ok, "origin": "http://127.0.0.1:9644"}) is None
    assert g.refusal("POST", ["v1", "test", "reset"], {**ok, "origin": "http://127.0.0.1:9645"}).status == 403
    assert g.refusal("POST", ["v1", "test", "reset"], {**ok, "origin": "http://evil.example"}).status == 403
    assert g.refusal("POST", ["v1", "test", "reset"], {**ok, "content-type": "text/plain"}).status == 415
    assert g.refusal("POST", ["v1", "test", "reset"], {k: v for k, v in ok.items() if k != "content-type"}).status == 415
    assert g.refusal("POST", ["v1", "test", "reset"], {**ok, "authorization": "Bearer t0"}).status == 401
    assert g.refusal("GET", ["v1", "groups"], {"host": "127.0.0.1:9644"}) is None  # reads need no token
