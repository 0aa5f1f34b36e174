"""A TLS listener's keystore changed at run time, as Kafka's dynamic SSL reload does (KIP-226,
SslFactory.reconfigure): `listener.name.<listener>.ssl.keystore.location`, `.ssl.key.password` or
`.ssl.truststore.location` set on this broker as a dynamic broker config (broker/dynamic_configs.py)
builds the listener a new TLS context, and the next handshake presents the new certificate; the
connections open keep theirs. Setting the same location again reloads the file when it changed on
disk (a certificate renewed in place), as Kafka reloads a modified keystore.

Checked before anything is kept, in Kafka's words (tests/reference/test_tls_reload.py compares them):
a keystore or truststore that does not load is INVALID_REQUEST "... Validation of dynamic config
update of SSLFactory failed: ... Failed to load PEM SSL keystore PATH ...", and so is a new
certificate whose subject differs from the one it replaces, or that drops one of its subject
alternative names, unless `listener.name.<listener>.ssl.allow.dn.changes` or
`.ssl.allow.san.changes` is true (Kafka's SslFactory.CertificateEntries.ensureCompatible). Each
reload is a `tls_keystore_reloaded` info line naming the new certificate's subject and expiry.
"""

from __future__ import annotations

import hashlib
import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from . import tls
from ...protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from .service import ListenerSecurity

log = structlog.get_logger("kbroker.security")

_SETTINGS = ("ssl.keystore.location", "ssl.key.password", "ssl.truststore.location")


def _digest(path: str) -> bytes | None:
    """A file's content as a digest (Kafka looks at its modification time; a digest also sees a
    change within one tick of the clock)."""
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).digest()
    except OSError:
        return None


@dataclass(frozen=True, slots=True)
class _Certificate:
    subject: str
    alt_names: frozenset[str]
    not_after: str

    @staticmethod
    def of(keystore: str) -> _Certificate:
        """The first certificate of a PEM keystore (the broker's own, its chain after it)."""
        from cryptography import x509

        with open(keystore, "rb") as f:
            cert = x509.load_pem_x509_certificates(f.read())[0]
        try:
            sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            names = frozenset(str(n.value) for n in sans)
        except x509.ExtensionNotFound:
            names = frozenset()
        # Java's X500Principal.toString(): RFC 2253's order, ", " between the parts
        subject = ", ".join(rdn.rfc4514_string() for rdn in reversed(cert.subject.rdns))
        return _Certificate(subject, names, cert.not_valid_after_utc.isoformat())


@dataclass(frozen=True, slots=True)
class _Loaded:
    """What a listener's context was built from: the settings and the files' contents."""

    settings: tuple[str, ...]
    digests: tuple[bytes | None, ...]
    certificate: _Certificate | None


class ListenerKeystores:
    """The TLS listeners of this process, reconfigured by the dynamic broker configs."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self._listeners: dict[str, list[tuple[ListenerSecurity, str]]] = {}  # name -> (listener, client auth)
        self._loaded: dict[str, _Loaded] = {}

    def add(self, listener: ListenerSecurity, client_auth: str) -> None:
        """A TLS listener, its context built from the broker's own settings."""
        self._listeners.setdefault(listener.listener, []).append((listener, client_auth))
        if listener.listener not in self._loaded:
            cfg = self.config
            settings = (cfg.ssl_keystore_location, cfg.ssl_key_password or "", cfg.ssl_truststore_location or "")
            try:
                certificate: _Certificate | None = _Certificate.of(settings[0])
            except (OSError, ValueError, IndexError):  # the context loaded it: a form cryptography reads not
                certificate = None
            self._loaded[listener.listener] = self._stamp(settings, certificate)

    @staticmethod
    def _stamp(settings: tuple[str, ...], certificate: _Certificate | None) -> _Loaded:
        return _Loaded(settings, (_digest(settings[0]), _digest(settings[2])), certificate)

    def prepare(self, layer: dict[str, str], names: Iterable[str]) -> Callable[[], None] | None:
        """The new contexts `layer` (this broker's dynamic configs as they would be) asks for, for the
        listeners whose TLS settings the request names; KafkaError (INVALID_REQUEST) when one is not
        usable. The returned commit swaps them in; None when nothing is to be reloaded."""
        names = set(names)
        ready: list[tuple[str, ssl.SSLContext, _Loaded]] = []
        for name, listeners in self._listeners.items():
            prefix = f"listener.name.{name.lower()}."
            if not any(n.startswith(prefix + "ssl.") for n in names):
                continue
            cfg = self.config
            static = (cfg.ssl_keystore_location, cfg.ssl_key_password or "", cfg.ssl_truststore_location or "")
            settings = tuple(layer.get(prefix + s, default) for s, default in zip(_SETTINGS, static))
            old = self._loaded[name]
            if (settings, (_digest(settings[0]), _digest(settings[2]))) == (old.settings, old.digests):
                continue  # Kafka's shouldBeRebuilt: same settings, files unchanged
            try:
                context = tls.server_context(settings[0], settings[2], listeners[0][1], settings[1] or None)
                certificate = _Certificate.of(settings[0])
            except (ssl.SSLError, OSError, ValueError, IndexError):
                which, path = ("truststore", settings[2]) if _loads(settings[0], settings[1]) else ("keystore", settings[0])
                raise _refused(f"org.apache.kafka.common.errors.InvalidConfigurationException: Failed to load PEM "
                               f"SSL {which} {path}") from None
            _ensure_compatible(old.certificate, certificate, layer, prefix)
            ready.append((name, context, self._stamp(settings, certificate)))
        if not ready:
            return None

        def commit() -> None:
            for name, context, loaded in ready:
                for listener, _ in self._listeners[name]:
                    listener.ssl_context = context
                self._loaded[name] = loaded
                log.info("tls_keystore_reloaded", listener=name, keystore=loaded.settings[0],
                         subject=loaded.certificate.subject if loaded.certificate else None,
                         not_after=loaded.certificate.not_after if loaded.certificate else None)

        return commit


def _refused(reason: str) -> KafkaError:
    """Kafka's answer to a reconfiguration its SslFactory refuses, wrapped as its broker wraps it."""
    return KafkaError("Invalid value org.apache.kafka.common.config.ConfigException: Validation of dynamic config "
                      f"update of SSLFactory failed: {reason} for configuration Invalid dynamic configuration",
                      ErrorCode.INVALID_REQUEST)


def _loads(keystore: str, password: str) -> bool:
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(keystore, password=password or None)
    except (ssl.SSLError, OSError, ValueError):
        return False
    return True


def _ensure_compatible(old: _Certificate | None, new: _Certificate, layer: dict[str, str], prefix: str) -> None:
    """Kafka's CertificateEntries.ensureCompatible: the same subject, and every old alternative name
    still there, unless the listener allows DN or SAN changes (a PEM keystore's one entry is `kafka`)."""
    if old is None:
        return
    config = "org.apache.kafka.common.config.ConfigException"
    if layer.get(prefix + "ssl.allow.dn.changes", "false").strip().lower() != "true" and \
            old.subject.lower() != new.subject.lower():
        raise _refused(f"{config}: Keystore DistinguishedName does not match:  existing={{alias=kafka, "
                       f"DN={old.subject}}}, new={{alias=kafka, DN={new.subject}}}")
    if layer.get(prefix + "ssl.allow.san.changes", "false").strip().lower() != "true" and \
            not new.alt_names >= old.alt_names:
        raise _refused(f"{config}: Keystore SubjectAltNames do not match:  existing={{alias=kafka, "
                       f"SAN={sorted(old.alt_names)}}}, new={{alias=kafka, SAN={sorted(new.alt_names)}}}")
