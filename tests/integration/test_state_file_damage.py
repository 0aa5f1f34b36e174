"""Damage in the files kbroker keeps beside the logs (issue 38): the SCRAM credentials, the PLAIN users
file, the ACLs and the client quotas, against real broker processes. Each file is damaged as a disk
would (one bit of one entry; a file cut short), then the broker starts on it.

Before checksums a flipped bit was trusted (a SCRAM or PLAIN name one bit away from a user's let that
user's password in as another principal; a DENY ACL whose principal changed stopped denying; a quota
changed), and a file that no longer parsed failed every SCRAM login (the credentials) or refused
every start (the ACLs, the quotas). Now the damaged entries are refused and reported, the rest is
served, an ACL file that cannot be trusted leaves only super users authorized, and the broker always
starts. Files written before checksums still load.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.alter_client_quotas_request import (
    AlterClientQuotasRequest, EntityData, EntryData, OpData,
)
from kbroker.protocol.messages.create_acls_request import AclCreation, CreateAclsRequest
from kbroker.protocol.messages.describe_client_quotas_request import ComponentData, DescribeClientQuotasRequest
from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.sasl_wire import logs_in, plain_login
from kbroker.tests.integration.topic_admin_wire import create, metadata
from kbroker.tests.integration.wire import Wire

SCRAM = "SCRAM-SHA-256"
PASSWORDS = {name: f"{name}-secret-pw" for name in ("bob", "carol", "dave", "alice", "erin", "admin", "reader")}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def user_add(data: Path, name: str, mechanism: str, plain: Path | None = None) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "kbroker", "user", "add", name, "--password", PASSWORDS[name],
            "--data-dir", str(data), "--mechanism", mechanism]
    if plain is not None:
        args += ["--plain-users-file", str(plain)]
    return subprocess.run(args, capture_output=True, text=True)


def sasl_broker(tmp_path: Path, *extra: str) -> tuple[BrokerProcess, str]:
    """A broker with a PLAINTEXT listener and a SASL_PLAINTEXT one (PLAIN and SCRAM-SHA-256); not started."""
    plaintext, sasl = free_port(), free_port()
    broker = BrokerProcess(
        tmp_path / "data", "--listeners", f"PLAINTEXT://127.0.0.1:{plaintext},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "--sasl-enabled-mechanisms", f"PLAIN,{SCRAM}", "--sasl-plain-users-file", str(tmp_path / "plain-users"),
        *extra, port=plaintext, listen_flag=False, start=False)
    return broker, f"127.0.0.1:{sasl}"


def flip(path: Path, line_with: str, old: str, new: str) -> None:
    """In the one line holding `line_with`, `old` becomes `new` (the tests pass strings one bit apart)."""
    lines = path.read_bytes().split(b"\n")
    [at] = [i for i, line in enumerate(lines) if line_with.encode() in line]
    assert old.encode() in lines[at]
    lines[at] = lines[at].replace(old.encode(), new.encode(), 1)
    path.write_bytes(b"\n".join(lines))


def cut_short(path: Path) -> None:
    raw = path.read_bytes()
    path.write_bytes(raw[:len(raw) // 2])


# --- SCRAM ---------------------------------------------------------------------------------------------

def test_damaged_scram_entries_are_refused_and_every_other_user_logs_in(tmp_path):
    data = tmp_path / "data"
    for name in ("bob", "carol", "dave"):
        assert user_add(data, name, SCRAM).returncode == 0
    broker, sasl = sasl_broker(tmp_path)
    credentials = data / "security" / "scram-credentials.json"
    flip(credentials, '"bob"', '"bob"', '"bnb"')  # one bit: a name bob's password would open
    broker.start()
    try:
        assert not logs_in(sasl, SCRAM, "bnb", PASSWORDS["bob"]), "a damaged entry's credentials were trusted"
        assert not logs_in(sasl, SCRAM, "bob", PASSWORDS["bob"])
        assert logs_in(sasl, SCRAM, "carol", PASSWORDS["carol"])
        damaged = broker.events("scram_credentials_damaged")
        assert [(e["level"], e["users"], e["file"]) for e in damaged] == [("error", ["bnb"], str(credentials))]
        assert "kbroker user add" in damaged[0]["detail"]
        failures = [e for e in broker.events("authentication_failed") if e["principal"] == "bnb"]
        assert failures and "damaged" in failures[0]["error"]
        broker.stop()

        flip(credentials, '"dave"', "{", "#")  # dave's line no longer parses: it costs dave alone
        broker.start()
        assert logs_in(sasl, SCRAM, "carol", PASSWORDS["carol"])
        assert not logs_in(sasl, SCRAM, "dave", PASSWORDS["dave"])

        # bob's password set again through the API: he is back, and the file is rewritten without
        # the damaged entries (the next start reports nothing)
        from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
        for future in admin.alter_user_scram_credentials(
                [UserScramCredentialUpsertion("bob", info, b"bob-new-pw")]).values():
            future.result(30)
        del admin
        assert logs_in(sasl, SCRAM, "bob", "bob-new-pw")
        broker.restart()
        assert broker.events("scram_credentials_damaged", start=3) == []
        assert logs_in(sasl, SCRAM, "carol", PASSWORDS["carol"])
        assert json.loads(credentials.read_text())["version"] == 2
    finally:
        broker.stop()


# --- PLAIN ---------------------------------------------------------------------------------------------

def test_a_plain_users_file_that_fails_its_checksum_lets_nobody_in_until_the_operator_says_so(tmp_path):
    data, plain = tmp_path / "data", tmp_path / "plain-users"
    for name in ("alice", "erin"):
        assert user_add(data, name, "PLAIN", plain).returncode == 0
    broker, sasl = sasl_broker(tmp_path)
    flip(plain, "alice=", "alice=", "alicd=")  # one bit: a name alice's password would open
    broker.start()
    try:
        impostor = logs_in(sasl, "PLAIN", "alicd", PASSWORDS["alice"])
        erin = logs_in(sasl, "PLAIN", "erin", PASSWORDS["erin"])
        damaged = broker.events("plain_users_file_damaged")
        resealed = user_add(data, "dave", "PLAIN", plain)  # would bless whatever changed
        # the operator's answer, as the event says: the edit was theirs, so the checksum line goes
        lines = plain.read_text().splitlines()
        assert lines[-1].startswith("# kbroker crc32c=")
        plain.write_text("\n".join(lines[:-1]) + "\n")
        erin_after = logs_in(sasl, "PLAIN", "erin", PASSWORDS["erin"])  # the file is re-read when it changes
    finally:
        broker.stop()
    assert not impostor, "a damaged PLAIN users file was trusted"
    assert not erin
    assert [(e["level"], e["file"]) for e in damaged] == [("error", str(plain))]
    assert "checksum mismatch" in damaged[0]["damage"] and "delete its last line" in damaged[0]["detail"]
    assert resealed.returncode == 1 and "delete its last line" in resealed.stderr, resealed
    assert "dave" not in plain.read_text()
    assert erin_after


# --- ACLs ----------------------------------------------------------------------------------------------

def acl(wire: Wire, topic: str, principal: str, permission: int) -> int:
    describe, topic_type, literal = 8, 2, 3
    answer = wire.call(30, 3, CreateAclsRequest([AclCreation(topic_type, topic, literal, principal, "*", describe,
                                                             permission)]))
    return answer.results[0].error_code


def test_a_damaged_acl_file_leaves_only_super_users_authorized(tmp_path):
    allow, deny = 3, 2
    data, plain = tmp_path / "data", tmp_path / "plain-users"
    for name in ("admin", "reader"):
        assert user_add(data, name, "PLAIN", plain).returncode == 0
    broker, sasl = sasl_broker(tmp_path, "--authorizer-class-name", AUTHORIZER, "--super-users", "User:admin")
    broker.start()
    try:
        admin = plain_login(sasl, "admin", PASSWORDS["admin"])
        assert create(admin, "secret", 1, {})[0] == create(admin, "open", 1, {})[0] == 0
        assert acl(admin, "secret", "User:*", allow) == acl(admin, "open", "User:*", allow) == 0
        assert acl(admin, "secret", "User:reader", deny) == 0
        reader = plain_login(sasl, "reader", PASSWORDS["reader"])
        before = metadata(reader, "secret")[0], metadata(reader, "open")[0]
        admin.close(), reader.close()
        broker.stop()
        acls = data / "security" / "acls.json"
        flip(acls, '"DENY"', "User:reader", "User:readeq")  # one bit: the DENY names someone else
        flipped = acls.read_bytes()
        broker.start()
        reader = plain_login(sasl, "reader", PASSWORDS["reader"])
        locked = metadata(reader, "secret")[0], metadata(reader, "open")[0]
        admin = plain_login(sasl, "admin", PASSWORDS["admin"])
        super_user = metadata(admin, "secret")[0]
        change = acl(admin, "open", "User:reader", allow)
        reader.close(), admin.close()
        damaged = broker.events("acl_file_damaged")
        broker.stop()
        kept = acls.read_bytes()  # the locked broker leaves the damaged file as it found it
        cut_short(acls)  # a file that no longer parses: the broker still starts, locked down
        broker.start()
        reader = plain_login(sasl, "reader", PASSWORDS["reader"])
        cut = metadata(reader, "open")[0]
        reader.close()
        damaged_again = broker.events("acl_file_damaged", start=3)
    finally:
        broker.stop()
    auth_failed = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert before == (auth_failed, 0)
    assert locked == (auth_failed, auth_failed), "the damaged DENY was trusted, or the ACLs still applied"
    assert super_user == 0
    assert change == ErrorCode.POLICY_VIOLATION
    assert kept == flipped
    assert [e["level"] for e in damaged] == ["error"] and "only super users" in damaged[0]["detail"]
    assert cut == auth_failed and len(damaged_again) == 1


# --- client quotas -------------------------------------------------------------------------------------

def quotas(wire: Wire) -> dict[str, float]:
    answer = wire.call(48, 1, DescribeClientQuotasRequest([ComponentData("client-id", 2, None)], False))
    assert answer.error_code == 0, answer
    return {e.entity[0].entity_name: e.values[0].value for e in answer.entries or []}


def test_a_damaged_quota_entry_is_dropped_alone_and_the_broker_always_starts(tmp_path):
    broker = BrokerProcess(tmp_path / "data", start=False)
    path = tmp_path / "data" / "client-quotas.json"
    broker.start()
    try:
        wire = Wire(broker.bootstrap)
        answer = wire.call(49, 1, AlterClientQuotasRequest([
            EntryData([EntityData("client-id", name)], [OpData("producer_byte_rate", rate, False)])
            for name, rate in (("slow", 1024.0), ("other", 2048.0))], False))
        assert [e.error_code for e in answer.entries] == [0, 0]
        wire.close()
        broker.stop()
        flip(path, '"slow"', "1024", "1034")  # one bit of a digit
        broker.start()
        wire = Wire(broker.bootstrap)
        after_flip = quotas(wire)
        wire.close()
        damaged = broker.events("client_quotas_file_damaged")
        broker.stop()
        cut_short(path)
        broker.start()
        wire = Wire(broker.bootstrap)
        after_cut = quotas(wire)
        wire.close()
        damaged_again = broker.events("client_quotas_file_damaged", start=3)
    finally:
        broker.stop()
    assert after_flip == {"other": 2048.0}, "a damaged quota was trusted"
    assert [e["level"] for e in damaged] == ["error"] and damaged[0]["entities"] == [[["client-id", "slow"]]]
    assert len(damaged_again) == 1 and set(after_cut) <= {"other"}


# --- files written before checksums ---------------------------------------------------------------------

def test_files_written_before_checksums_still_load_and_gain_them_with_their_next_write(tmp_path):
    """The formats of a kbroker before issue 38, written as it wrote them."""
    from kbroker.broker.security.credentials import ScramCredential

    data, plain = tmp_path / "data", tmp_path / "plain-users"
    (data / "security").mkdir(parents=True)
    bob = ScramCredential.from_password(SCRAM, PASSWORDS["bob"])
    (data / "security" / "scram-credentials.json").write_text(
        '{"version": 1, "users": {\n' + json.dumps("bob") + ": " + json.dumps({SCRAM: bob.to_json()}) + "\n}}\n")
    (data / "security" / "acls.json").write_text(
        '{"version": 1, "acls": [\n' + json.dumps(["TOPIC", "open", "LITERAL", "User:reader", "*", "DESCRIBE",
                                                    "ALLOW"]) + "\n]}\n")
    (data / "client-quotas.json").write_text(
        "[\n" + json.dumps({"entity": [["client-id", "slow"]], "values": {"producer_byte_rate": 1024.0}}) + "\n]\n")
    plain.write_text("# written by hand, as Kafka's JAAS users are\nreader=" + PASSWORDS["reader"] + "\n")
    broker, sasl = sasl_broker(tmp_path, "--authorizer-class-name", AUTHORIZER, "--super-users", "User:bob;User:ANONYMOUS")
    broker.start()
    try:
        bob_in = logs_in(sasl, SCRAM, "bob", PASSWORDS["bob"])
        reader = plain_login(sasl, "reader", PASSWORDS["reader"])
        open_topic = metadata(reader, "open")[0]
        reader.close()
        wire = Wire(broker.bootstrap)
        before = quotas(wire)
        wire.call(49, 1, AlterClientQuotasRequest([EntryData([EntityData("client-id", "other")], [
            OpData("producer_byte_rate", 1.0, False)])], False))
        wire.close()
        damage = [e for name in ("scram_credentials_damaged", "acl_file_damaged", "client_quotas_file_damaged",
                                 "plain_users_file_damaged") for e in broker.events(name)]
    finally:
        broker.stop()
    assert bob_in
    assert open_topic == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # described (allowed), and not there
    assert before == {"slow": 1024.0}
    assert damage == []
    assert json.loads((data / "client-quotas.json").read_text())["version"] == 2


# --- the data directory's identity ----------------------------------------------------------------------

def test_a_flipped_bit_in_meta_properties_is_not_taken_for_another_identity(tmp_path):
    """Before its checksum line, a cluster.id one bit off started the broker as another cluster (what
    clients and the data directory's logs belong to); now the start is refused, saying what to do."""
    import pytest

    broker = BrokerProcess(tmp_path / "data")
    broker.stop()
    meta = tmp_path / "data" / "meta.properties"
    cluster_id = meta.read_text().split("cluster.id=")[1].split()[0]
    flip(meta, "cluster.id=", "cluster.id=" + cluster_id[0], "cluster.id=" + chr(ord(cluster_id[0]) ^ 1))
    with pytest.raises(RuntimeError) as refused:
        broker.start(timeout=20)
    assert str(meta) in str(refused.value) and "checksum mismatch" in str(refused.value)
    assert "crc32c' line" in str(refused.value)


def test_a_meta_properties_without_its_checksum_line_is_sealed_by_the_next_start(tmp_path):
    """A meta.properties a kbroker before issue 38 wrote (or one an operator edited and took the line out
    of, as the refusal above says to) was read as it was and never gained the line: its identity stayed
    unchecked for ever. The next start seals it, keeping its identity; a bit flipped after that is
    refused like any other."""
    import pytest

    data = tmp_path / "data"
    data.mkdir()
    meta = data / "meta.properties"
    meta.write_text("#kbroker data directory\nversion=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\nnode.id=1\n")
    broker = BrokerProcess(data)
    try:
        wire = Wire(broker.bootstrap)
        from kbroker.protocol.messages.describe_cluster_request import DescribeClusterRequest

        cluster_id = wire.call(60, 0, DescribeClusterRequest(include_cluster_authorized_operations=False)).cluster_id
        wire.close()
        sealed = broker.events("meta_properties_sealed")
    finally:
        broker.stop()
    assert cluster_id == "MkU3OEVBNTcwNTJENDM2Qk"
    assert [e["cluster_id"] for e in sealed] == ["MkU3OEVBNTcwNTJENDM2Qk"]
    lines = meta.read_text().splitlines()
    assert lines[:4] == ["#kbroker data directory", "version=1", "cluster.id=MkU3OEVBNTcwNTJENDM2Qk", "node.id=1"]
    assert lines[4].startswith("# kbroker crc32c=") and len(lines) == 5
    broker.start()  # sealed once: the next start has nothing to seal
    broker.stop()
    assert broker.events("meta_properties_sealed", start=2) == []
    flip(meta, "cluster.id=", "cluster.id=M", "cluster.id=L")
    with pytest.raises(RuntimeError) as refused:
        broker.start(timeout=20)
    assert "checksum mismatch" in str(refused.value)
