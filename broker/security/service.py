"""The broker's security: credentials, the authorizer and its ACLs, and each listener's transport.

`Security.for_listener(protocol)` gives what a KafkaServer needs for a listener of that security
protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL): a TLS context or none, whether SASL runs, and a
factory of per-connection authentication state. `authorize()` is the one place a request is checked
against the ACLs; each denial is one `authorization_denied` audit event.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Coroutine

import structlog

from . import tls
from .acl import (
    CLUSTER_NAME, SUPPORTED_OPERATIONS, AclBinding, Authorizer, Operation, ResourceType, parse_super_users,
)
from .acl_store import AclStore
from .credentials import CredentialStore
from .oauth import HttpsKeySet, TokenValidator
from .sasl import ALL_MECHANISMS
from .session import ANONYMOUS, ConnectionAuth
from .tls_reload import ListenerKeystores

if TYPE_CHECKING:
    from ..network.router import RequestContext

log = structlog.get_logger("kbroker.security")
audit = structlog.get_logger("kbroker.audit")

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka's authorizer.class.name values that mean "the standard ACL authorizer"
AUTHORIZERS = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer",
               "standard")


def parse_mechanisms(text: str) -> tuple[str, ...]:
    mechanisms = tuple(m.strip().upper() for m in text.split(",") if m.strip())
    unknown = [m for m in mechanisms if m not in ALL_MECHANISMS]
    if unknown:
        raise ValueError(f"sasl.enabled.mechanisms: {', '.join(unknown)} not supported "
                         f"(supported: {', '.join(ALL_MECHANISMS)})")
    return mechanisms


class TlsHandshakeFailed(Exception):
    pass


@dataclass(slots=True)
class ListenerSecurity:
    """What one listener needs: `ssl_context` (None for PLAINTEXT/SASL_PLAINTEXT) and SASL or not."""

    protocol: str
    listener: str
    ssl_context: ssl.SSLContext | None
    sasl: bool
    security: "Security"

    @property
    def handshake_timeout_s(self) -> float:
        return self.security.config.ssl_handshake_timeout_ms / 1000

    @property
    def max_receive_before_auth(self) -> int:
        return self.security.config.sasl_server_max_receive_size

    def connection_auth(self, peer: str) -> ConnectionAuth:
        """A new SASL_PLAINTEXT connection's authentication state (TLS ones come from `accept_tls`)."""
        return self._connection(peer, ANONYMOUS)

    async def accept_tls(self, sock: socket.socket, peer: str, protocol_factory: Callable[[], asyncio.Protocol]
                         ) -> tuple[asyncio.BaseTransport, asyncio.BaseProtocol, ConnectionAuth]:
        """Run the TLS handshake on a freshly accepted socket (nothing has read from it yet); the
        protocol is made once it is done, and may be handed bytes before this returns."""
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await loop.connect_accepted_socket(
                protocol_factory, sock, ssl=self.ssl_context, ssl_handshake_timeout=self.handshake_timeout_s)
        except (ssl.SSLError, ConnectionError, OSError, asyncio.TimeoutError) as e:
            sock.close()
            if isinstance(e, ConnectionError) and "taking longer than" not in str(e):
                # the client hung up after our alert: say why we sent it
                e = tls.take_recent_failure() or e
            raise TlsHandshakeFailed(_tls_reason(e)) from None
        principal = ANONYMOUS
        obj = transport.get_extra_info("ssl_object")
        der = obj.getpeercert(binary_form=True) if obj is not None else None
        if der:
            dn = tls.subject_dn(der)
            try:
                principal = "User:" + self.security.principal_mapper.principal_name(dn)
            except LookupError as e:
                transport.close()
                raise TlsHandshakeFailed(str(e)) from None
        return transport, protocol, self._connection(peer, principal)

    def _connection(self, peer: str, principal: str) -> ConnectionAuth:
        cfg = self.security.config
        return ConnectionAuth(sasl=self.sasl, mechanisms=self.security.mechanisms,
                              credentials=self.security.credentials, peer=peer, listener=self.listener,
                              reauth_ms=cfg.connections_max_reauth_ms, principal=principal,
                              oauth=self.security.oauth)


class TlsAcceptor:
    """A TLS listener's accept loop. Each accepted socket goes to `on_socket` untouched, so its TLS
    handshake runs through `connect_accepted_socket`, which reports a failed or stalled handshake to
    us (one log line per connection) instead of swallowing it as a TLS server socket does."""

    def __init__(self, host: str, port: int, on_socket, sock: socket.socket | None = None) -> None:
        if sock is None:
            sock = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET,
                                        backlog=1024)
        self.sock = sock
        self.sock.setblocking(False)
        self.sockets = [self.sock]
        self.on_socket = on_socket
        self._task = asyncio.ensure_future(self._run())
        self._children: set[asyncio.Task] = set()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                client, _ = await loop.sock_accept(self.sock)
            except OSError as e:  # EMFILE and the like: keep serving the connections we have
                log.warning("accept_failed", error=str(e))
                await asyncio.sleep(0.1)
                continue
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = asyncio.ensure_future(self.on_socket(client))
            self._children.add(task)
            task.add_done_callback(self._children.discard)

    def close(self) -> None:
        self._task.cancel()
        self.sock.close()


def _tls_reason(e: BaseException) -> str:
    if isinstance(e, ssl.SSLError):
        reason = getattr(e, "reason", None) or str(e)
        if reason in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "UNKNOWN_PROTOCOL"):
            return f"not a TLS client ({reason}); a plaintext client on a TLS listener?"
        return f"TLS handshake failed: {reason}"
    if isinstance(e, (asyncio.TimeoutError, TimeoutError)) or "taking longer than" in str(e):
        return "TLS handshake timed out (ssl.handshake.timeout.ms)"
    return f"TLS handshake failed: {type(e).__name__}: {e}"


class Security:
    def __init__(self, config: Any, data_dir: str | Path) -> None:
        self.config = config
        self.mechanisms = parse_mechanisms(config.sasl_enabled_mechanisms)
        self.credentials = CredentialStore(data_dir, config.sasl_plain_users_file or None)
        if {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} & set(self.mechanisms):
            self.credentials.load()  # damage is reported at start-up, not at the first login
        # OAUTHBEARER's validator, and the HTTPS key set whose refresh the broker runs (`background`)
        self.oauth: TokenValidator | None = None
        self._jwks: HttpsKeySet | None = None
        if "OAUTHBEARER" in self.mechanisms:
            from .oauth import validator_for

            self.oauth, self._jwks = validator_for(config)
            if config.dev_unsecured_oauthbearer:
                log.warning("oauthbearer_unsecured_tokens_accepted", setting="--dev-unsecured-oauthbearer",
                            detail="OAUTHBEARER accepts unsigned tokens (alg none): anyone can name any principal, "
                                   "super users included. For tests only")
        self.principal_mapper = tls.PrincipalMapper(config.ssl_principal_mapping_rules)
        self.acl_store = AclStore(data_dir, self._acls_in_force)
        # Held by CreateAcls and DeleteAcls while they decide and apply: a DeleteAcls gives the loop
        # back between its filters, and no change may land among them.
        self.acl_changes = asyncio.Lock()
        self.authorizer: Authorizer | None = None
        if config.authorizer_class_name:
            if config.authorizer_class_name not in AUTHORIZERS:
                raise ValueError(f"authorizer.class.name: {config.authorizer_class_name!r} is not supported "
                                 f"(use {AUTHORIZERS[0]})")
            self.authorizer = Authorizer(self.acl_store.load(), parse_super_users(config.super_users),
                                         config.allow_everyone_if_no_acl_found)
            self.authorizer.locked = self.acl_store.damaged  # only super users, while the file is damaged
        self._ssl_contexts: dict[str, ssl.SSLContext] = {}
        # the TLS listeners, whose keystores a dynamic broker config reloads (tls_reload.py)
        self.keystores = ListenerKeystores(config)

    def background(self) -> list[Coroutine[Any, Any, None]]:
        """What the broker runs beside the listeners for security: the JWKS refresh, if any."""
        return [self._jwks.run()] if self._jwks is not None else []

    def ssl_context(self, client_auth: str) -> ssl.SSLContext:
        if client_auth not in self._ssl_contexts:
            cfg = self.config
            if not cfg.ssl_keystore_location:
                raise ValueError("an SSL or SASL_SSL listener needs ssl.keystore.location (a PEM file with the "
                                 "certificate chain and private key)")
            self._ssl_contexts[client_auth] = tls.server_context(cfg.ssl_keystore_location,
                                                                 cfg.ssl_truststore_location, client_auth,
                                                                 cfg.ssl_key_password)
        return self._ssl_contexts[client_auth]

    def for_listener(self, protocol: str, listener: str | None = None) -> ListenerSecurity | None:
        """None for a PLAINTEXT listener (nothing to do per connection); raises ValueError on a setting
        the protocol needs and does not have."""
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"unknown security protocol {protocol}")
        if protocol == "PLAINTEXT":
            return None
        # As in Kafka, ssl.client.auth applies to SSL listeners; SASL_SSL ones authenticate with SASL
        tls_ctx = None
        client_auth = self.config.ssl_client_auth if protocol == "SSL" else "none"
        if protocol in ("SSL", "SASL_SSL"):
            tls_ctx = self.ssl_context(client_auth)
        sasl = protocol.startswith("SASL_")
        if sasl and not self.mechanisms:
            raise ValueError(f"listener {listener or protocol}: sasl.enabled.mechanisms is empty")
        found = ListenerSecurity(protocol, listener or protocol, tls_ctx, sasl, self)
        if tls_ctx is not None:
            self.keystores.add(found, client_auth)
        return found

    # --- authorization ---
    def authorize(self, ctx: RequestContext, operation: Operation, resource_type: ResourceType, name: str = CLUSTER_NAME,
                  *, audit_denial: bool = True) -> bool:
        if self.authorizer is None:
            return True
        principal = principal_of(ctx)
        host = host_of(ctx.peer)
        if self.authorizer.authorize(principal, host, operation, resource_type, name):
            return True
        if audit_denial:
            audit.info("authorization_denied", principal=principal, host=host, operation=operation.name,
                       resource_type=resource_type.name, resource=name, api=ctx.api_key, version=ctx.api_version,
                       client_id=ctx.client_id, correlation_id=ctx.correlation_id)
        return False

    def authorized_operations(self, ctx: RequestContext, resource_type: ResourceType, name: str = CLUSTER_NAME) -> int:
        """KIP-430's bitfield (1 << operation code) of what the principal may do on a resource; every
        supported operation when no authorizer is configured, as Kafka answers."""
        ops = SUPPORTED_OPERATIONS[resource_type]
        allowed = ops if self.authorizer is None else [
            op for op in ops if self.authorize(ctx, op, resource_type, name, audit_denial=False)]
        return sum(1 << op for op in allowed)

    def topic_describer(self, ctx: RequestContext) -> Callable[[str], bool] | None:
        """Whether the request's principal may DESCRIBE a topic, for filters that ask name by name
        (a KIP-848 regex subscription); None without an authorizer: everything is visible."""
        if self.authorizer is None:
            return None
        return lambda name: self.authorize(ctx, Operation.DESCRIBE, ResourceType.TOPIC, name, audit_denial=False)

    def topic_reader(self, ctx: RequestContext) -> Callable[[str], bool] | None:
        """Whether the request's principal may READ a topic, for handlers that check topic by topic what
        a session holds (ShareFetch, ShareAcknowledge: Kafka checks every partition of the share session
        at each request, so a revoked ACL refuses the next fetch); None without an authorizer."""
        if self.authorizer is None:
            return None
        return lambda name: self.authorize(ctx, Operation.READ, ResourceType.TOPIC, name)

    def is_super_user(self, ctx: RequestContext) -> bool:
        return self.authorizer is None or principal_of(ctx) in self.authorizer.super_users

    def authorize_any(self, ctx: RequestContext, operation: Operation, resource_type: ResourceType) -> bool:
        if self.authorizer is None:
            return True
        return self.authorizer.authorize_any(principal_of(ctx), host_of(ctx.peer), operation, resource_type)

    # --- ACL changes (CreateAcls/DeleteAcls): persisted before they are answered ---
    async def add_acls(self, acls: list[AclBinding]) -> None:
        """Apply the new ones; return once they are durable."""
        assert self.authorizer is not None
        added = [a for a in acls if self.authorizer.add(a)]
        if added:
            await self.acl_store.save()
        else:  # all there already, perhaps added by a request whose write is under way
            await self.acl_store.caught_up()

    async def remove_acls(self, acls: list[AclBinding]) -> None:
        assert self.authorizer is not None
        removed = [a for a in acls if self.authorizer.remove(a)]
        if removed:
            await self.acl_store.save()
        else:
            await self.acl_store.caught_up()

    def _acls_in_force(self) -> list[AclBinding]:
        return self.authorizer.acls() if self.authorizer is not None else []


def principal_of(ctx: RequestContext) -> str:
    conn = ctx.connection
    return conn.principal if conn is not None else ANONYMOUS


def host_of(peer: str) -> str:
    host = peer.rpartition(":")[0] if ":" in peer else peer
    return host.strip("[]")
