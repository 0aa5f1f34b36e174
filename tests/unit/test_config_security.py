"""The security settings a start checks: Kafka's defaults parse (the check skips them, so that a
PLAINTEXT broker without an authorizer need not import broker/security/), anything else is parsed."""

from __future__ import annotations

import dataclasses

import pytest

from kbroker.broker.config import BrokerConfig, ConfigError, load_config_with_sources, validate
from kbroker.broker.security.service import parse_mechanisms
from kbroker.broker.security.tls import PrincipalMapper


def _validate(**flags) -> None:
    cfg, sources = load_config_with_sources({"data_dir": "/tmp/kbroker-config-test", **flags}, None, env={})
    validate(cfg, sources)


def test_the_defaults_the_check_skips_do_parse() -> None:
    defaults = {f.name: f.default for f in dataclasses.fields(BrokerConfig)}
    # every default mechanism checks credentials the operator made; OAUTHBEARER needs a key set to be named
    assert parse_mechanisms(defaults["sasl_enabled_mechanisms"]) == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    PrincipalMapper(defaults["ssl_principal_mapping_rules"])


def test_settings_other_than_the_defaults_are_checked() -> None:
    _validate(sasl_enabled_mechanisms="PLAIN")
    with pytest.raises(ConfigError, match="sasl-enabled-mechanisms.*GSSAPI not supported"):
        _validate(sasl_enabled_mechanisms="GSSAPI")
    with pytest.raises(ConfigError, match="ssl-principal-mapping-rules"):
        _validate(ssl_principal_mapping_rules="RULE:no-slashes")
