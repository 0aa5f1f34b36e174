"""Every API the broker serves has decided its authorization: a check in broker/security/api_checks.py,
or its own (the ACL and SCRAM APIs), or none because Kafka has none (ApiVersions, the SASL handshake).
A new API module without a decision fails here: with an authorizer configured it would otherwise be
served to anyone."""

from __future__ import annotations

from kbroker.broker.app import build_router
from kbroker.broker.security.api_checks import CHECKS

CHECKED_IN_HANDLER = {29, 30, 31, 50, 51}  # Describe/Create/DeleteAcls, Describe/AlterUserScramCredentials
NO_CHECK_IN_KAFKA = {17, 18, 36}  # SaslHandshake, ApiVersions, SaslAuthenticate


def test_every_served_api_has_an_authorization_decision():
    served = {key for key, _, _ in build_router().supported()}
    undecided = served - set(CHECKS) - CHECKED_IN_HANDLER - NO_CHECK_IN_KAFKA
    assert not undecided, (f"API keys {sorted(undecided)} have no authorization check: add what Kafka's KafkaApis "
                           "checks for them to CHECKS in broker/security/api_checks.py")


def test_checked_handlers_are_the_wrapped_ones():
    router = build_router()
    from kbroker.broker.apis import produce

    assert router.routes[0].handler is not produce.handle  # wrapped by api_checks.install
