"""OAUTHBEARER tokens: signed JWTs checked as Kafka's OAuthBearerValidatorCallbackHandler checks them
(its BrokerJwtValidator, on jose4j), here with PyJWT; and the unsecured tokens of Kafka's
OAuthBearerUnsecuredValidatorCallbackHandler, only under `--dev-unsecured-oauthbearer`.

A signed token must carry a signature by a key of the JSON Web Key Set at
`sasl.oauthbearer.jwks.endpoint.url` (a `file:` URL, re-read when the file changes, or an `https://`
one, fetched every `sasl.oauthbearer.jwks.endpoint.refresh.ms` in a worker thread and at once when a
token names a key id the set lacks, as Kafka's RefreshingHttpsJwks does), with an asymmetric
algorithm (never `none`, never HMAC: a public key set holds no secret); an `exp` and an `iat`; `nbf`,
`exp` and `iat` within `sasl.oauthbearer.clock.skew.seconds`; the expected issuer and one of the
expected audiences (both required unless `sasl.oauthbearer.allow.unverified.issuer|audience`, as in
Kafka 4.4); a non-blank subject in `sasl.oauthbearer.sub.claim.name` (the principal) and well-formed
scopes in `sasl.oauthbearer.scope.claim.name`.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import time
import urllib.parse
import urllib.request
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

import structlog

log = structlog.get_logger("kbroker.security")

# Asymmetric JWS algorithms and the JWK key type each one needs.
ALGORITHMS = {"RS256": "RSA", "RS384": "RSA", "RS512": "RSA", "PS256": "RSA", "PS384": "RSA", "PS512": "RSA",
              "ES256": "EC", "ES384": "EC", "ES512": "EC", "EdDSA": "OKP"}
MAX_JWKS_BYTES = 1 << 20
# Kafka's RefreshingHttpsJwks: a key id it lacks triggers one refresh per id per minute, of at most
# 16 ids remembered, and ids longer than 1000 characters are taken for garbage.
MISSING_KEY_ID_INTERVAL_S = 60.0
MISSING_KEY_IDS = 16
MAX_KEY_ID_LENGTH = 1000
_INT64_LIMIT = 2**63  # the session lifetime is milliseconds in an int64, as in Kafka


class OAuthSettingsError(ValueError):
    """A setting OAUTHBEARER cannot run with; `setting` is the config field to name."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(message)
        self.setting = setting


class InvalidToken(Exception):
    """Why a token is refused (logged; the client gets Kafka's `invalid_token` challenge)."""

    def __init__(self, message: str, attempted: str | None = None) -> None:
        super().__init__(message)
        self.attempted = attempted


@dataclass(frozen=True, slots=True)
class ValidToken:
    principal: str  # the subject: the principal is "User:" + this
    expiry_ms: int
    scopes: frozenset[str] = frozenset()


class TokenValidator(Protocol):
    def validate(self, token: str) -> ValidToken: ...


def _audiences(cfg: Any) -> list[str]:
    return [a.strip() for a in cfg.sasl_oauthbearer_expected_audience.split(",") if a.strip()]


def check_settings(cfg: Any) -> None:
    """Raise OAuthSettingsError unless OAUTHBEARER can run as configured."""
    if cfg.dev_unsecured_oauthbearer:
        return
    url = cfg.sasl_oauthbearer_jwks_endpoint_url.strip()
    if not url:
        raise OAuthSettingsError(
            "sasl_oauthbearer_jwks_endpoint_url",
            "OAUTHBEARER is enabled and needs the key set its tokens are signed with: an https:// or file: URL "
            "of a JWKS (unsigned tokens only with --dev-unsecured-oauthbearer, for tests)")
    _key_source_kind(url)
    if not _audiences(cfg) and not cfg.sasl_oauthbearer_allow_unverified_audience:
        raise OAuthSettingsError(
            "sasl_oauthbearer_expected_audience",
            "OAUTHBEARER needs the audience(s) naming this cluster, so that a token minted for another service is "
            "refused (or sasl.oauthbearer.allow.unverified.audience=true), as Kafka 4.4 does")
    if not cfg.sasl_oauthbearer_expected_issuer.strip() and not cfg.sasl_oauthbearer_allow_unverified_issuer:
        raise OAuthSettingsError(
            "sasl_oauthbearer_expected_issuer",
            "OAUTHBEARER needs the issuer that signs its tokens (or sasl.oauthbearer.allow.unverified.issuer=true), "
            "as Kafka 4.4 does")
    for name in ("sasl_oauthbearer_sub_claim_name", "sasl_oauthbearer_scope_claim_name"):
        if not getattr(cfg, name).strip():
            raise OAuthSettingsError(name, "must name a claim")
    if url.startswith("file:"):
        try:
            FileKeySet(_file_path(url)).load()
        except (OSError, ValueError) as e:
            raise OAuthSettingsError("sasl_oauthbearer_jwks_endpoint_url", f"cannot read the key set: {e}") from None


def _key_source_kind(url: str) -> str:
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in ("https", "file"):
        raise OAuthSettingsError("sasl_oauthbearer_jwks_endpoint_url",
                                 f"{url!r}: the key set comes from an https:// or a file: URL")
    return scheme


def _file_path(url: str) -> Path:
    parts = urllib.parse.urlsplit(url)
    return Path(urllib.parse.unquote(parts.path if parts.netloc in ("", "localhost") else "//" + parts.netloc
                                     + parts.path))


def validator_for(cfg: Any) -> tuple[TokenValidator, "HttpsKeySet | None"]:
    """The validator OAUTHBEARER runs with, and the HTTPS key set whose refresh task the broker runs."""
    if cfg.dev_unsecured_oauthbearer:
        return UnsecuredValidator(cfg.sasl_oauthbearer_sub_claim_name, cfg.sasl_oauthbearer_clock_skew_seconds), None
    check_settings(cfg)
    url = cfg.sasl_oauthbearer_jwks_endpoint_url.strip()
    keys: KeySource
    https = None
    if _key_source_kind(url) == "file":
        keys = FileKeySet(_file_path(url))
    else:
        keys = https = HttpsKeySet(url, cfg.sasl_oauthbearer_jwks_endpoint_refresh_ms / 1000,
                                   cfg.sasl_oauthbearer_jwks_endpoint_retry_backoff_ms / 1000,
                                   cfg.sasl_oauthbearer_jwks_endpoint_retry_backoff_max_ms / 1000)
    return JwtValidator(keys, audiences=_audiences(cfg), issuer=cfg.sasl_oauthbearer_expected_issuer.strip() or None,
                        clock_skew_s=cfg.sasl_oauthbearer_clock_skew_seconds,
                        sub_claim=cfg.sasl_oauthbearer_sub_claim_name.strip(),
                        scope_claim=cfg.sasl_oauthbearer_scope_claim_name.strip()), https


# --- key sets ---------------------------------------------------------------------------------------


class KeySource(Protocol):
    def key_for(self, kid: str | None, alg: str) -> Any: ...


def parse_jwks(text: str | bytes) -> list[Any]:
    """The usable keys of a JWKS document (PyJWK objects); ValueError when it holds none."""
    import jwt

    try:
        data = json.loads(text)
        return list(jwt.PyJWKSet.from_dict(data).keys)
    except (ValueError, TypeError, AttributeError, jwt.PyJWKSetError, jwt.PyJWKError) as e:
        raise ValueError(f"not a JSON Web Key Set with a usable key ({e})") from None


def _pick(keys: list[Any], kid: str | None, alg: str) -> Any | None:
    kty = ALGORITHMS[alg]
    fits = [k for k in keys if k.key_type == kty and (kid is None or k.key_id == kid)
            and (k._jwk_data.get("alg") in (None, alg)) and k._jwk_data.get("use") in (None, "sig")]
    return fits[0] if len(fits) == 1 or (kid is not None and fits) else None


class FileKeySet:
    """A JWKS file, re-read when its modification time or size changes (Kafka's CachedFile)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._keys: list[Any] = []

    def load(self) -> list[Any]:
        st = os.stat(self.path)
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            if st.st_size > MAX_JWKS_BYTES:
                raise ValueError(f"{self.path} is larger than {MAX_JWKS_BYTES} bytes")
            self._keys = parse_jwks(self.path.read_bytes())
            self._stamp = stamp
        return self._keys

    def key_for(self, kid: str | None, alg: str) -> Any:
        try:
            keys = self.load()
        except (OSError, ValueError) as e:
            if not self._keys:
                raise InvalidToken(f"no key set: {e}") from None
            keys = self._keys  # a file being rewritten: the keys read last, until it parses again
        key = _pick(keys, kid, alg)
        if key is None:
            raise InvalidToken(f"no key in {self.path} for kid {kid!r} and alg {alg}")
        return key


class HttpsKeySet:
    """A JWKS over HTTPS, fetched in a worker thread (never on the event loop): once at start, every
    `refresh_s`, and soon after a token names a key id the set lacks. A failed fetch keeps the keys
    it had and is tried again after `backoff_s`, doubling up to `backoff_max_s`."""

    def __init__(self, url: str, refresh_s: float, backoff_s: float, backoff_max_s: float,
                 fetch: Callable[[str], bytes] | None = None) -> None:
        self.url = url
        self.refresh_s, self.backoff_s, self.backoff_max_s = refresh_s, backoff_s, backoff_max_s
        self._fetch = fetch or _https_get
        self._keys: list[Any] | None = None
        self._missing: OrderedDict[str, float] = OrderedDict()  # key id -> when it may trigger a fetch again
        self._wake: asyncio.Event | None = None

    def key_for(self, kid: str | None, alg: str) -> Any:
        if self._keys is None:
            raise InvalidToken(f"no key set fetched yet from {self.url}")
        key = _pick(self._keys, kid, alg)
        if key is None:
            if kid is not None:
                self._expedite(kid)
            raise InvalidToken(f"no key for kid {kid!r} and alg {alg} in the key set of {self.url}")
        return key

    def _expedite(self, kid: str) -> None:
        if len(kid) > MAX_KEY_ID_LENGTH or self._wake is None:
            return
        now = time.monotonic()
        if self._missing.get(kid, 0.0) > now:
            return
        self._missing[kid] = now + MISSING_KEY_ID_INTERVAL_S
        self._missing.move_to_end(kid)
        while len(self._missing) > MISSING_KEY_IDS:
            self._missing.popitem(last=False)
        self._wake.set()

    async def refresh(self) -> bool:
        try:
            body = await asyncio.to_thread(self._fetch, self.url)
            keys = await asyncio.to_thread(parse_jwks, body)
        except (OSError, ValueError) as e:
            log.warning("oauth_jwks_fetch_failed", url=self.url, error=str(e) or type(e).__name__,
                        keys_kept=len(self._keys or ()))
            return False
        for key in keys:
            self._missing.pop(key.key_id, None)
        if self._keys is None or [k.key_id for k in keys] != [k.key_id for k in self._keys]:
            log.info("oauth_jwks_loaded", url=self.url, key_ids=[k.key_id for k in keys])
        self._keys = keys
        return True

    async def run(self) -> None:
        """The refresh loop: a broker background task from its start."""
        self._wake = asyncio.Event()
        backoff = self.backoff_s
        while True:
            if await self.refresh():
                backoff, wait = self.backoff_s, self.refresh_s
            else:
                wait, backoff = backoff, min(backoff * 2, self.backoff_max_s)
            try:
                await asyncio.wait_for(self._wake.wait(), wait)
                await asyncio.sleep(self.backoff_s)  # never two fetches closer than the first backoff
            except asyncio.TimeoutError:
                pass
            self._wake.clear()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:  # a key set stays at the URL configured
        return None


def _https_get(url: str) -> bytes:
    """GET the URL with the system's trust store (SSL_CERT_FILE / SSL_CERT_DIR name others)."""
    opener = urllib.request.build_opener(_NoRedirect(), urllib.request.HTTPSHandler(
        context=ssl.create_default_context()))
    with opener.open(urllib.request.Request(url, headers={"Accept": "application/json"}), timeout=10) as resp:
        body = resp.read(MAX_JWKS_BYTES + 1)
    if len(body) > MAX_JWKS_BYTES:
        raise ValueError(f"the key set is larger than {MAX_JWKS_BYTES} bytes")
    return body


# --- validators -------------------------------------------------------------------------------------


class JwtValidator:
    def __init__(self, keys: KeySource, *, audiences: list[str], issuer: str | None, clock_skew_s: int,
                 sub_claim: str = "sub", scope_claim: str = "scope") -> None:
        self.keys = keys
        self.audiences, self.issuer = audiences, issuer
        self.clock_skew_s = clock_skew_s
        self.sub_claim, self.scope_claim = sub_claim, scope_claim

    def validate(self, token: str) -> ValidToken:
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as e:
            raise InvalidToken(f"not a signed JWT: {e}") from None
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise InvalidToken(f"the token's alg {alg!r} is not an asymmetric signature algorithm "
                               f"({', '.join(ALGORITHMS)})")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise InvalidToken("the token's kid is not a string")
        key = self.keys.key_for(kid, alg)
        options: dict[str, Any] = {"require": ["exp", "iat"], "verify_aud": bool(self.audiences),
                                   "verify_iss": self.issuer is not None}
        try:
            claims = jwt.decode(token, key.key, algorithms=[alg], audience=self.audiences or None,
                                issuer=self.issuer, leeway=self.clock_skew_s, options=options)  # type: ignore[arg-type]
        except jwt.PyJWTError as e:
            raise InvalidToken(f"{type(e).__name__}: {e}", _claim_hint(token, self.sub_claim)) from None
        sub = claims.get(self.sub_claim)
        if not isinstance(sub, str) or not sub.strip():
            raise InvalidToken(f"the claim {self.sub_claim!r} is missing or blank")
        exp = claims["exp"]
        if not isinstance(exp, (int, float)) or exp < 0 or exp * 1000 >= _INT64_LIMIT:
            raise InvalidToken("the claim 'exp' is not a time in seconds", sub.strip())
        return ValidToken(sub.strip(), int(exp * 1000), _scopes(claims.get(self.scope_claim), self.scope_claim))


def _claim_hint(token: str, claim: str) -> str | None:
    """The subject a refused token names, for the log only (it proved nothing)."""
    try:
        body = json.loads(_b64url(token.split(".")[1]))
        value = body.get(claim) if isinstance(body, dict) else None
        return value[:200] if isinstance(value, str) else None
    except (ValueError, IndexError, UnicodeDecodeError, RecursionError):
        return None


def _scopes(raw: Any, name: str) -> frozenset[str]:
    """Kafka's ClaimValidationUtils.validateScopes: a string is one scope, a list several; each
    non-blank, none twice."""
    items = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise InvalidToken(f"the claim {name!r} holds a blank or non-string scope")
        if item.strip() in seen:
            raise InvalidToken(f"the claim {name!r} names {item.strip()!r} twice")
        seen.add(item.strip())
    return frozenset(seen)


class UnsecuredValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler: a JWS with `alg: none`, a subject, an
    `exp` in the future (`iat` not in the future), allowing the clock skew either way. Anyone may
    write such a token naming any principal: `--dev-unsecured-oauthbearer` only."""

    def __init__(self, sub_claim: str = "sub", clock_skew_s: int = 0,
                 clock_ms: Callable[[], int] | None = None) -> None:
        self.sub_claim = sub_claim
        self.clock_skew_ms = clock_skew_s * 1000
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))

    def validate(self, token: str) -> ValidToken:
        parts = token.split(".")
        if len(parts) != 3 or parts[2] != "":
            raise InvalidToken("the token is not an unsecured JWS (three parts, empty signature)")
        try:
            header, claims = (json.loads(_b64url(p)) for p in parts[:2])
        except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: JSON nested 100,000 deep
            raise InvalidToken("the token's header or claims are not base64url JSON") from None
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise InvalidToken("the token's header and claims must be JSON objects")
        if header.get("alg") != "none":
            raise InvalidToken("the token is not an unsecured JWS (alg must be none)")
        sub = claims.get(self.sub_claim)
        if not isinstance(sub, str) or not sub.strip():
            raise InvalidToken(f"the required claim {self.sub_claim!r} is missing")
        exp = claims.get("exp")
        if not isinstance(exp, (int, float)):
            raise InvalidToken("the required claim 'exp' is missing", sub)
        if not abs(exp) * 1000 < _INT64_LIMIT:  # JSON takes NaN, Infinity, 1e306 and 400-digit integers
            raise InvalidToken("the claim 'exp' is not a time in seconds", sub)
        now = self.clock_ms()
        if now - self.clock_skew_ms >= exp * 1000:
            raise InvalidToken("the token has expired", sub)
        iat = claims.get("iat")
        if isinstance(iat, (int, float)) and iat * 1000 > now + self.clock_skew_ms:
            raise InvalidToken("the token was issued in the future", sub)
        return ValidToken(sub, int(exp * 1000))


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def unsecured_token(sub: str, lifetime_s: int = 3600, now_s: float | None = None, **claims: Any) -> str:
    """A token Kafka's unsecured validator accepts (what librdkafka's built-in unsecured JWT builds)."""
    now_s = time.time() if now_s is None else now_s
    body = {"sub": sub, "iat": int(now_s), "exp": int(now_s) + lifetime_s, **claims}
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()  # noqa: E731
    return enc({"alg": "none"}) + "." + enc(body) + "."
