"""SCRAM users managed with confluent-kafka's AdminClient (AlterUserScramCredentials,
DescribeUserScramCredentials): a new user authenticates at once, is listed with its mechanisms and
iterations, survives a restart, and cannot authenticate once deleted."""

from __future__ import annotations

import time

import pytest

from kbroker.tests.integration.security_setup import start_secure_broker


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    sb = start_secure_broker(tmp_path_factory.mktemp("scram"))
    yield sb
    sb.broker.stop()


def scram_conf(sb, user: str, password: str) -> dict:
    return {"bootstrap.servers": sb.address("SASL_SSL"), "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": password,
            "ssl.ca.location": str(sb.pki.ca)}


def can_produce(sb, user: str, password: str) -> bool:
    from confluent_kafka import KafkaError, Producer

    errors: list = []
    p = Producer({**scram_conf(sb, user, password), "error_cb": errors.append})
    p.produce("scram-admin", b"x")
    deadline = time.monotonic() + 20
    while p.flush(0.2) and time.monotonic() < deadline:
        if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            return False
    return p.flush(5) == 0


def test_alter_describe_restart_delete(secure):
    from confluent_kafka.admin import (
        AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion, UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": secure.broker.bootstrap})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)
    for f in admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("dave", info, b"dave-secret")]).values():
        f.result(30)
    assert can_produce(secure, "dave", "dave-secret")
    assert not can_produce(secure, "dave", "not-his")

    described = {u: f.result(30) for u, f in admin.describe_user_scram_credentials(["dave", "bob"]).items()}
    assert set(admin.describe_user_scram_credentials(None).result(30)) == {"bob", "dave"}  # all users
    dave = described["dave"]
    assert [(c.mechanism, c.iterations) for c in dave.scram_credential_infos] == [(ScramMechanism.SCRAM_SHA_256, 8192)]
    assert {c.mechanism for c in described["bob"].scram_credential_infos} == {ScramMechanism.SCRAM_SHA_256,
                                                                              ScramMechanism.SCRAM_SHA_512}
    secure.broker.restart()
    assert can_produce(secure, "dave", "dave-secret")

    admin = AdminClient({"bootstrap.servers": secure.broker.bootstrap})
    for f in admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_256)]).values():
        f.result(30)
    assert not can_produce(secure, "dave", "dave-secret")
    with pytest.raises(Exception, match="RESOURCE_NOT_FOUND|does not exist"):
        admin.describe_user_scram_credentials(["dave"])["dave"].result(30)


@pytest.fixture
def own_secure(tmp_path):
    """A broker of its own, for a test that adds users: the module's broker is asked for its exact list."""
    sb = start_secure_broker(tmp_path)
    yield sb
    sb.broker.stop()


def test_users_added_by_the_cli_and_by_admin_requests_at_once_are_all_kept(own_secure):
    """`kbroker user add` rewrites the credentials file while the broker rewrites it for
    AlterUserScramCredentials: every user from either side is served, and still there after a restart."""
    import subprocess
    import sys

    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    admin = AdminClient({"bootstrap.servers": own_secure.broker.bootstrap})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    cli_users = [f"cli-{i}" for i in range(6)]
    procs = [subprocess.Popen([sys.executable, "-m", "kbroker", "user", "add", name, "--password", "pw",
                               "--mechanism", "SCRAM-SHA-256", "--data-dir", str(own_secure.broker.data_dir)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for name in cli_users]
    admin_users = []
    while any(p.poll() is None for p in procs) or len(admin_users) < 10:
        name = f"adm-{len(admin_users)}"
        for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(name, info, b"pw")]).values():
            f.result(30)
        admin_users.append(name)
    assert all(p.wait(30) == 0 for p in procs), [p.stderr.read() for p in procs if p.stderr]
    expected = set(cli_users) | set(admin_users)
    assert expected <= set(admin.describe_user_scram_credentials(None).result(30))
    own_secure.broker.restart()
    admin = AdminClient({"bootstrap.servers": own_secure.broker.bootstrap})
    assert expected <= set(admin.describe_user_scram_credentials(None).result(30))
    assert can_produce(own_secure, "cli-3", "pw") and can_produce(own_secure, admin_users[-1], "pw")
