"""A large state file: how long one small change takes, and holds every other client.

    python -m bench.state_file_stall [--file quotas|scram] [--entities N]

quotas: fills a fresh kbroker with N client-id quota entities in requests of 10,000 (Kafka's bound
per operation), then sends five one-entry AlterClientQuotas. scram: N SCRAM users (one salted
password for all, so the fill costs no PBKDF2), then five one-user AlterUserScramCredentials, each
followed by a DescribeUserScramCredentials of that user (the first lookup after a change, which
read the whole file back). Each change is answered once the whole file is durable again.
Meanwhile a second client sends ApiVersions every 20 ms; its worst round trip is how long any
client waited behind those writes. Rendered and written on the event loop, the file held everyone
for the whole write (4.9 s at 200,000 quota entities on the slow host); on the state-files worker
(broker/storage/state_file.py) the loop is free. Not part of `make bench`: no peer, and a minute.
"""

from __future__ import annotations

import argparse
import asyncio
import time

BOUND = 10_000


async def _run(bootstrap: str, entities: int, file: str = "quotas") -> dict:
    from kbroker.bench.wire import Connection, worst_round_trip

    admin = await Connection.open(bootstrap, "admin")
    other = await Connection.open(bootstrap, "other")
    fill, change = (_quotas if file == "quotas" else _scram)(admin)
    for start in range(0, entities, BOUND):
        await fill(range(start, min(entities, start + BOUND)))

    async def small_changes() -> list[float]:
        took = []
        for i in range(5):
            started = time.perf_counter()
            await change(i)
            took.append(time.perf_counter() - started)
        return took

    changes = asyncio.get_running_loop().create_task(small_changes())
    worst, _ = await worst_round_trip(other, changes)
    took = await changes
    await admin.close()
    await other.close()
    return {"alter_s": took, "worst_ms": 1000 * worst}


def _quotas(admin):
    from kbroker.protocol.messages import alter_client_quotas_request as aq

    def entry(name: str) -> aq.EntryData:
        return aq.EntryData(entity=[aq.EntityData("client-id", name)], ops=[aq.OpData("producer_byte_rate", 1e6, False)])

    async def fill(numbers: range) -> None:
        r = await admin.call(49, 1, aq.AlterClientQuotasRequest(entries=[entry(f"client-{i:08d}") for i in numbers]))
        assert {e.error_code for e in r.entries} == {0}, {e.error_code for e in r.entries}

    async def change(i: int) -> None:
        await admin.call(49, 1, aq.AlterClientQuotasRequest(entries=[entry(f"small-{i}")]))

    return fill, change


def _scram(admin):
    import hashlib

    from kbroker.protocol.messages import alter_user_scram_credentials_request as au
    from kbroker.protocol.messages import describe_user_scram_credentials_request as du

    salt = b"bench-salt-0123456789"
    salted = hashlib.pbkdf2_hmac("sha256", b"bench-password", salt, 4096)

    def user(name: str) -> au.ScramCredentialUpsertion:
        return au.ScramCredentialUpsertion(name=name, mechanism=1, iterations=4096, salt=salt, salted_password=salted)

    async def fill(numbers: range) -> None:
        r = await admin.call(51, 0, au.AlterUserScramCredentialsRequest(
            deletions=[], upsertions=[user(f"user-{i:08d}") for i in numbers]))
        assert {u.error_code for u in r.results} == {0}, {u.error_code for u in r.results}

    async def change(i: int) -> None:
        r = await admin.call(51, 0, au.AlterUserScramCredentialsRequest(deletions=[], upsertions=[user(f"small-{i}")]))
        assert r.results[0].error_code == 0, r.results[0]
        d = await admin.call(50, 0, du.DescribeUserScramCredentialsRequest(users=[du.UserName(f"small-{i}")]))
        assert d.results[0].error_code == 0, d.results[0]

    return fill, change


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.state_file_stall", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--file", choices=("quotas", "scram"), default="quotas")
    parser.add_argument("--entities", type=int, default=200_000)
    args = parser.parse_args(argv)
    from kbroker.bench.brokers import start_kbroker

    broker = start_kbroker(flush="always")
    try:
        r = asyncio.run(_run(broker.bootstrap, args.entities, args.file))
    finally:
        broker.stop()
    what = ("quota entities: one-entry AlterClientQuotas" if args.file == "quotas" else
            "SCRAM users: one-user AlterUserScramCredentials, then a DescribeUserScramCredentials,")
    print(f"{args.entities:,} {what} answered in "
          f"{', '.join(f'{s:.2f}' for s in r['alter_s'])} s; another client's worst round trip {r['worst_ms']:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
