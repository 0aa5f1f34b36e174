"""OAUTHBEARER's token validation (broker/security/oauth.py) against real signed JWTs (PyJWT and
`cryptography` keys): what Kafka's BrokerJwtValidator refuses, this refuses; the issue's forged
unsecured token above all."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import time
from types import SimpleNamespace

import jwt
import pytest

from kbroker.broker.security.oauth import (
    FileKeySet, HttpsKeySet, InvalidToken, JwtValidator, OAuthSettingsError, UnsecuredValidator, check_settings,
    unsecured_token,
)
from kbroker.tests.integration.security_setup import AUDIENCE, ISSUER, OAuthKeys



@pytest.fixture
def idp(tmp_path):
    keys = OAuthKeys()
    keys.add("ec-1")
    keys.add("rsa-1", "RSA")
    return keys, keys.write_jwks(tmp_path / "jwks.json")


def validator(jwks_path, **kw) -> JwtValidator:
    args = {"audiences": [AUDIENCE], "issuer": ISSUER, "clock_skew_s": 30, **kw}
    return JwtValidator(FileKeySet(jwks_path), **args)


def test_signed_tokens_of_either_key_give_their_subject_expiry_and_scopes(idp):
    now = int(time.time())  # PyJWT reads the wall clock: taken afresh by each test
    keys, path = idp
    v = validator(path)
    ok = v.validate(keys.token("alice", "ec-1", now_s=now, lifetime_s=60, scope=["read", "write"]))
    assert (ok.principal, ok.expiry_ms, ok.scopes) == ("alice", (now + 60) * 1000, {"read", "write"})
    assert v.validate(keys.token("bob", "rsa-1", now_s=now, scope="one-scope")).principal == "bob"


def enc(d: dict | bytes) -> str:
    return base64.urlsafe_b64encode(d if isinstance(d, bytes) else json.dumps(d).encode()).rstrip(b"=").decode()


def forged(claims: dict, header: dict | None = None) -> str:
    return enc(header or {"alg": "none"}) + "." + enc(claims) + "."


def hmac_signed(claims: dict, secret: bytes) -> str:
    """Algorithm confusion: HS256 keyed with the published public key, written by hand."""
    head = enc({"alg": "HS256", "kid": "ec-1"}) + "." + enc(claims)
    return head + "." + enc(hmac.new(secret, head.encode(), hashlib.sha256).digest())


@pytest.mark.parametrize("case", [
    "issue_forged_none", "none_with_kid", "hmac_with_public_key", "unknown_kid", "other_key_same_kid",
    "expired", "not_yet_valid", "issued_in_future", "no_iat", "no_exp", "wrong_issuer", "wrong_audience",
    "no_audience", "blank_sub", "duplicate_scope", "tampered_claims", "garbage",
])
def test_refused(idp, monkeypatch, case):
    now = int(time.time())  # PyJWT reads the wall clock: taken afresh by each test
    keys, path = idp
    v = validator(path)
    claims = {"sub": "admin", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 3600}
    token = {
        # the issue's token: {"alg":"none"}.{"sub":"admin","exp":...}.
        "issue_forged_none": lambda: forged({"sub": "admin", "exp": now + 3600}),
        "none_with_kid": lambda: forged(claims, {"alg": "none", "kid": "ec-1"}),
        "hmac_with_public_key": lambda: hmac_signed(claims, json.dumps(keys.jwks(["ec-1"])["keys"][0]).encode()),
        "unknown_kid": lambda: keys.token("admin", keys.add("not-published"), now_s=now),
        "other_key_same_kid": lambda: jwt.encode(claims, OAuthKeys().keys.setdefault("x", keys.keys.pop(
            keys.add("rogue"))), "ES256", headers={"kid": "ec-1"}),
        "expired": lambda: keys.token("admin", now_s=now - 3600 - 31),
        "not_yet_valid": lambda: keys.token("admin", now_s=now, nbf=now + 31),
        "issued_in_future": lambda: keys.token("admin", now_s=now + 31),
        "no_iat": lambda: jwt.encode({k: v for k, v in claims.items() if k != "iat"}, keys.keys["ec-1"], "ES256",
                                     headers={"kid": "ec-1"}),
        "no_exp": lambda: jwt.encode({k: v for k, v in claims.items() if k != "exp"}, keys.keys["ec-1"], "ES256",
                                     headers={"kid": "ec-1"}),
        "wrong_issuer": lambda: keys.token("admin", now_s=now, iss="https://evil.example"),
        "wrong_audience": lambda: keys.token("admin", now_s=now, aud="another-service"),
        "no_audience": lambda: jwt.encode({k: v for k, v in claims.items() if k != "aud"}, keys.keys["ec-1"],
                                          "ES256", headers={"kid": "ec-1"}),
        "blank_sub": lambda: keys.token("  ", now_s=now),
        "duplicate_scope": lambda: keys.token("admin", now_s=now, scope=["a", "a"]),
        "tampered_claims": lambda: ".".join([(t := keys.token("reader", now_s=now)).split(".")[0],
                                             forged(claims).split(".")[1], t.split(".")[2]]),
        "garbage": lambda: "not-a-jwt",
    }[case]()
    with pytest.raises(InvalidToken):
        v.validate(token)


def test_clock_skew_is_allowed_either_way(idp):
    now = int(time.time())  # PyJWT reads the wall clock: taken afresh by each test
    keys, path = idp
    v = validator(path)
    assert v.validate(keys.token("a", now_s=now - 3600 - 20)).principal == "a"  # expired 20 s ago
    assert v.validate(keys.token("a", now_s=now + 20, nbf=now + 20)).principal == "a"  # from 20 s on


def test_audience_unchecked_only_when_allowed_and_sub_claim_renamed(idp):
    now = int(time.time())  # PyJWT reads the wall clock: taken afresh by each test
    keys, path = idp
    v = validator(path, audiences=[], sub_claim="client_id")
    assert v.validate(keys.token("ignored", now_s=now, aud="anything", client_id="svc-1")).principal == "svc-1"


def test_a_rewritten_key_file_is_read_again(idp, tmp_path):
    now = int(time.time())  # PyJWT reads the wall clock: taken afresh by each test
    keys, path = idp
    v = validator(path)
    new = keys.add("ec-2")
    token = keys.token("carol", new, now_s=now)
    with pytest.raises(InvalidToken):
        v.validate(token)
    keys.write_jwks(path, ["ec-2"])
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))  # a new mtime even on a coarse clock
    assert v.validate(token).principal == "carol"


async def test_https_key_set_fetches_again_for_an_unknown_key_id_once_a_minute(idp):
    keys, _ = idp
    served = {"body": json.dumps(keys.jwks(["ec-1"])).encode(), "fetches": 0}

    def fetch(url):
        served["fetches"] += 1
        return served["body"]

    ks = HttpsKeySet("https://idp.test/jwks", refresh_s=3600, backoff_s=0.01, backoff_max_s=0.1, fetch=fetch)
    task = asyncio.create_task(ks.run())
    try:
        while served["fetches"] < 1 or ks._keys is None:
            await asyncio.sleep(0.01)
        assert ks.key_for("ec-1", "ES256").key_id == "ec-1"
        served["body"] = json.dumps(keys.jwks()).encode()  # rsa-1 published since
        with pytest.raises(InvalidToken):
            ks.key_for("rsa-1", "RS256")  # not known yet: asks for a fetch now
        while ks._keys is None or len(ks._keys) < 2:
            await asyncio.sleep(0.01)
        assert ks.key_for("rsa-1", "RS256").key_id == "rsa-1"
        fetches = served["fetches"]
        for _ in range(3):  # an id still missing asks at most once a minute
            with pytest.raises(InvalidToken):
                ks.key_for("never", "ES256")
            await asyncio.sleep(0.05)
        assert served["fetches"] == fetches + 1
    finally:
        task.cancel()


def test_unsecured_tokens_are_the_dev_validators_alone():
    now = int(time.time())  # PyJWT reads the wall clock: taken afresh by each test
    v = UnsecuredValidator(clock_ms=lambda: now * 1000)
    assert v.validate(unsecured_token("admin", now_s=now)).principal == "admin"


def settings(**kw):
    base = dict(dev_unsecured_oauthbearer=False, sasl_oauthbearer_jwks_endpoint_url="https://idp.test/jwks",
                sasl_oauthbearer_expected_audience=AUDIENCE, sasl_oauthbearer_expected_issuer=ISSUER,
                sasl_oauthbearer_allow_unverified_audience=False, sasl_oauthbearer_allow_unverified_issuer=False,
                sasl_oauthbearer_sub_claim_name="sub", sasl_oauthbearer_scope_claim_name="scope")
    return SimpleNamespace(**{**base, **kw})


@pytest.mark.parametrize("change,setting", [
    ({"sasl_oauthbearer_jwks_endpoint_url": ""}, "sasl_oauthbearer_jwks_endpoint_url"),
    ({"sasl_oauthbearer_jwks_endpoint_url": "http://idp.test/jwks"}, "sasl_oauthbearer_jwks_endpoint_url"),
    ({"sasl_oauthbearer_jwks_endpoint_url": "file:/nonexistent/jwks.json"}, "sasl_oauthbearer_jwks_endpoint_url"),
    ({"sasl_oauthbearer_expected_audience": ""}, "sasl_oauthbearer_expected_audience"),
    ({"sasl_oauthbearer_expected_issuer": ""}, "sasl_oauthbearer_expected_issuer"),
])
def test_settings_oauthbearer_cannot_run_with(change, setting):
    check_settings(settings())
    with pytest.raises(OAuthSettingsError) as e:
        check_settings(settings(**change))
    assert e.value.setting == setting
    check_settings(settings(sasl_oauthbearer_expected_audience="", sasl_oauthbearer_allow_unverified_audience=True))
