"""`make chaos`'s damage to the state files beside the logs (issue 38): the SCRAM credentials, the PLAIN
users file, the ACLs and the client quotas.

The campaign's broker serves a SASL listener (PLAIN, SCRAM-SHA-256) with an authorizer beside the
PLAINTEXT listener its load runs on, as User:ANONYMOUS, a super user: no damage here may touch the
load, and the campaign's ledger checks that none did. Each round flips one random bit inside one
random entry of one file, or cuts the file short, as a disk would; then the broker starts on it and
must report the damage with its event and contain it:

* a SCRAM entry: that user is refused, the other logs in;
* the PLAIN users file (sealed by `kbroker user add`): no PLAIN user is accepted, SCRAM users are;
* the ACLs: only super users are authorized (the reader allowed to describe the topic is refused);
* a quota entry: that entity's quota is gone from DescribeClientQuotas, the other's is there;
* a file cut short: reported, and the broker serves.

Then the files are put back as they were (broker stopped), for the rounds after.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from pathlib import Path

from kbroker.protocol.messages.alter_client_quotas_request import (
    AlterClientQuotasRequest, EntityData, EntryData, OpData,
)
from kbroker.protocol.messages.create_acls_request import AclCreation, CreateAclsRequest
from kbroker.protocol.messages.describe_client_quotas_request import ComponentData, DescribeClientQuotasRequest
from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.sasl_wire import logs_in, plain_login
from kbroker.tests.integration.topic_admin_wire import metadata
from kbroker.tests.integration.wire import Wire

KINDS = ("scram_flipped", "scram_cut", "plain_flipped", "acls_flipped", "acls_cut", "quotas_flipped", "quotas_cut")
# What each kind of damage must say in the next start's log.
REPORTED_BY = {"scram": "scram_credentials_damaged", "plain": "plain_users_file_damaged",
               "acls": "acl_file_damaged", "quotas": "client_quotas_file_damaged"}
SCRAM = "SCRAM-SHA-256"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SCRAM_USERS, PLAIN_USERS, READER = ("chaos-scram-a", "chaos-scram-b"), ("chaos-plain-a", "chaos-plain-b"), "chaos-reader"
QUOTAS = {"chaos-quota-a": 1e9, "chaos-quota-b": 2e9}  # client ids the load never uses
TOPIC_AUTHORIZATION_FAILED = 29


def password(user: str) -> str:
    return f"{user}-pw"


class StateFiles:
    """The state files of one campaign's broker: its settings, the entries they start with, the damage
    of a round and what it must do."""

    def __init__(self, root: Path, topic: str) -> None:
        self.data = root / "data"
        self.plain = root / "plain-users"
        self.saved = root / "state-saved"
        self.topic = topic  # the load's topic, which the reader may describe
        self.port, self.sasl = free_port(), f"127.0.0.1:{free_port()}"
        self.paths = {"scram": self.data / "security" / "scram-credentials.json", "plain": self.plain,
                      "acls": self.data / "security" / "acls.json", "quotas": self.data / "client-quotas.json"}

    def broker_args(self) -> list[str]:
        return ["--listeners", f"PLAINTEXT://127.0.0.1:{self.port},SASL_PLAINTEXT://{self.sasl}",
                "--sasl-enabled-mechanisms", f"PLAIN,{SCRAM}", "--sasl-plain-users-file", str(self.plain),
                "--authorizer-class-name", AUTHORIZER, "--super-users", "User:ANONYMOUS"]

    def add_users(self) -> None:
        """Before the first start: `kbroker user add`, as an operator would."""
        for user, mechanism in [*((u, SCRAM) for u in SCRAM_USERS), *((u, "PLAIN") for u in (*PLAIN_USERS, READER))]:
            subprocess.run([sys.executable, "-m", "kbroker", "user", "add", user, "--password", password(user),
                            "--data-dir", str(self.data), "--mechanism", mechanism,
                            "--plain-users-file", str(self.plain)], check=True, capture_output=True)

    def fill(self, broker: BrokerProcess) -> None:
        """Once the broker serves: the reader's ACL and the quotas, then a copy of every file."""
        wire = Wire(broker.bootstrap, client_id="chaos-state")
        try:
            describe, topic_type, literal, allow = 8, 2, 3, 3
            acl = wire.call(30, 3, CreateAclsRequest([AclCreation(topic_type, self.topic, literal, f"User:{READER}",
                                                                  "*", describe, allow)]))
            assert acl.results[0].error_code == 0, acl
            quotas = wire.call(49, 1, AlterClientQuotasRequest([
                EntryData([EntityData("client-id", name)], [OpData("producer_byte_rate", rate, False)])
                for name, rate in QUOTAS.items()], False))
            assert [e.error_code for e in quotas.entries] == [0] * len(QUOTAS), quotas
        finally:
            wire.close()
        assert self.problems(broker, None) == [], "the state files do not serve as set up"
        self.saved.mkdir(exist_ok=True)
        for name, path in self.paths.items():
            shutil.copyfile(path, self.saved / name)

    def damage(self, kind: str, rnd: random.Random) -> tuple[str, str]:
        """Damage one file of a stopped broker: (what was done, the event the next start must log)."""
        name, _, how = kind.partition("_")
        path = self.paths[name]
        raw = bytearray(path.read_bytes())
        if how == "cut":
            del raw[rnd.randrange(1, len(raw) - 3):]  # into the closing "]}" at least: the end is lost
            what = f"{path.name} cut to {len(raw)} bytes"
        else:
            start, end = self._entry_span(name, bytes(raw), rnd)
            at = rnd.randrange(start, end)
            bit = 1 << rnd.randrange(8)
            raw[at] ^= bit
            what = f"bit {bit:#04x} of byte {at} flipped in {path.name} ({self._entry_of(name)})"
        path.write_bytes(bytes(raw))
        return what, REPORTED_BY[name]

    def _entry_of(self, name: str) -> str:
        return {"scram": SCRAM_USERS[0], "plain": PLAIN_USERS[0], "acls": READER, "quotas": "chaos-quota-a"}[name]

    def _entry_span(self, name: str, raw: bytes, rnd: random.Random) -> tuple[int, int]:
        """Where the damaged entry's line lies: the first user's, the reader's ACL, the first quota's."""
        marker = self._entry_of(name).encode()
        if name == "plain":
            marker += b"="
        at = raw.index(marker)
        start = raw.rindex(b"\n", 0, at) + 1 if b"\n" in raw[:at] else 0
        end = raw.index(b"\n", at)
        return start, end

    def problems(self, broker: BrokerProcess, damaged: str | None) -> list[str]:
        """What is wrong with how the broker serves the state files, `damaged` (a kind) being damaged."""
        name = damaged.partition("_")[0] if damaged else None
        flipped = bool(damaged) and damaged.endswith("flipped")
        problems = []

        def expect(ok: bool, what: str) -> None:
            if not ok:
                problems.append(what)

        a, b = SCRAM_USERS
        if name != "scram":
            expect(logs_in(self.sasl, SCRAM, a, password(a)) and logs_in(self.sasl, SCRAM, b, password(b)),
                   "a SCRAM user of an intact file was refused")
        elif flipped:
            expect(not logs_in(self.sasl, SCRAM, a, password(a)), f"{a}'s damaged SCRAM entry was trusted")
            expect(logs_in(self.sasl, SCRAM, b, password(b)), f"{b}'s intact SCRAM entry was refused")
        plain_ok = [logs_in(self.sasl, "PLAIN", u, password(u)) for u in PLAIN_USERS]
        if name == "plain":
            expect(not any(plain_ok), "a PLAIN user of a damaged PLAIN users file was accepted")
        else:
            expect(all(plain_ok), "a PLAIN user of an intact file was refused")
            reader = plain_login(self.sasl, READER, password(READER))
            try:
                described = metadata(reader, self.topic)[0]
            finally:
                reader.close()
            if name == "acls":
                expect(described == TOPIC_AUTHORIZATION_FAILED,
                       f"with the ACL file damaged the reader still described {self.topic} (error {described})")
            else:
                expect(described == 0, f"the reader's ACL did not apply (error {described})")
        wire = Wire(broker.bootstrap, client_id="chaos-state")
        try:
            answer = wire.call(48, 1, DescribeClientQuotasRequest([ComponentData("client-id", 2, None)], False))
        finally:
            wire.close()
        quotas = {e.entity[0].entity_name: e.values[0].value for e in answer.entries or []}
        if name != "quotas":
            expect(quotas == QUOTAS, f"the quotas of an intact file are {quotas}")
        elif flipped:
            expect(quotas == {"chaos-quota-b": QUOTAS["chaos-quota-b"]},
                   f"with chaos-quota-a's entry damaged the quotas are {quotas}")
        return problems

    def restore(self) -> None:
        """Put every file back as `fill` left it (the broker stopped)."""
        for name, path in self.paths.items():
            shutil.copyfile(self.saved / name, path)
