"""kafka-transactions.sh (TransactionsCommand) against kbroker as an operator uses it: list (and its
filters), describe, describe-producers, find-hanging, abort of a hanging transaction, and the mistakes.
The same transactions (made by a real client, confluent-kafka) run against Apache Kafka 4.4 and the
outputs are compared (level "tools"), after masking what differs by nature: producer ids (each broker
allocates its own), clock times and durations."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.tests.reference.differential.levels import Level
from kbroker.tests.reference.pair import TRANSACTIONS, Side, ToolPair, ToolRun

MASKED = {"ProducerId": "<pid>", "CurrentTransactionStartTimeMs": "<ms>", "TransactionDurationMs": "<ms>",
          "LastTimestamp": "<ms>", "Duration(min)": "<min>"}


def mask(run: ToolRun) -> ToolRun:
    """Replace the MASKED columns of the tables a run prints (tab-separated, a header line first)."""
    out, columns = [], {}
    for line in run.stdout.splitlines():
        cells = line.split("\t")
        if any(cell.strip() in MASKED for cell in cells):
            columns = {i: MASKED[cell.strip()] for i, cell in enumerate(cells) if cell.strip() in MASKED}
        elif columns and len(cells) > max(columns):
            cells = [columns[i] if i in columns else cell.strip() for i, cell in enumerate(cells)]
        out.append("\t".join(cell.strip() for cell in cells))
    run.stdout = "\n".join(out) + "\n"
    return run


def _transactions(bootstrap: str, topic: str, run_id: str) -> list[Producer]:
    """On one broker: an idempotent producer's records on partition 0, a committed and an aborted
    transaction, and one left open (its producer returned, to be closed by the caller)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    idempotent = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(3):
        idempotent.produce(topic, key=b"k", value=f"i{i}".encode(), partition=0)
    assert idempotent.flush(30) == 0
    for name, end in (("done", "commit"), ("aborted", "abort")):
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{name}-{run_id}"})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(topic, key=b"k", value=name.encode(), partition=0 if end == "commit" else 1)
        assert producer.flush(30) == 0  # sent, so the abort has a partition to write its marker to
        producer.commit_transaction(30) if end == "commit" else producer.abort_transaction(30)
    open_one = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-open-{run_id}",
                         "transaction.timeout.ms": 600000})
    open_one.init_transactions(30)
    open_one.begin_transaction()
    for i in range(2):
        open_one.produce(topic, key=b"k", value=f"o{i}".encode(), partition=1)
    assert open_one.flush(30) == 0
    return [idempotent, open_one]


@pytest.fixture(scope="module")
def pair(kafka_reference, kbroker, run_id):
    level = Level("tools", part="kafka-transactions", prefixes=["kafka-transactions"])
    sides = (Side.of_kafka(kafka_reference), Side.of_kbroker(kbroker))
    producers = []
    try:
        for side in sides:
            producers += _transactions(side.bootstrap, f"tx-{run_id}", run_id)
        yield ToolPair(*sides, level, replace=[(run_id, "RUN")])
    finally:
        for producer in producers:
            producer.purge()
    level.settle()


def both(pair: ToolPair, check: str, *args: str, only_ours: str | None = None) -> tuple[ToolRun, ToolRun]:
    runs = tuple(mask(side.tool(TRANSACTIONS, *args)) for side in pair.sides)
    if only_ours:  # list: the shared reference broker has other files' transactions too; Kafka lists in hash order
        for run in runs:
            lines = run.stdout.splitlines()
            run.stdout = "\n".join(lines[:1] + sorted(line for line in lines[1:] if only_ours in line)) + "\n"
    pair.compare(check, *runs)
    return runs


def test_list_describe_and_producers(pair, run_id):
    topic = f"tx-{run_id}"
    _, kbroker = both(pair, "kafka-transactions list", "list", only_ours=run_id)
    states = {line.split("\t")[0]: line.split("\t")[3] for line in kbroker.lines[1:]}
    assert states == {f"tx-aborted-{run_id}": "CompleteAbort", f"tx-done-{run_id}": "CompleteCommit",
                      f"tx-open-{run_id}": "Ongoing"}
    both(pair, "kafka-transactions list --duration-filter", "list", "--duration-filter", "0", only_ours=run_id)
    both(pair, "kafka-transactions list --state-filter", "list", "--state-filter", "Ongoing", only_ours=run_id)
    both(pair, "kafka-transactions list --producer-id-filter (none)", "list", "--producer-id-filter", "999999")
    _, kbroker = both(pair, "kafka-transactions describe (open)", "describe", "--transactional-id", f"tx-open-{run_id}")
    assert kbroker.lines[1].split("\t")[4] == "Ongoing" and kbroker.lines[1].split("\t")[-1] == f"{topic}-1"
    both(pair, "kafka-transactions describe (committed)", "describe", "--transactional-id", f"tx-done-{run_id}")
    both(pair, "kafka-transactions describe (aborted)", "describe", "--transactional-id", f"tx-aborted-{run_id}")
    both(pair, "kafka-transactions describe (unknown)", "describe", "--transactional-id", f"nosuch-{run_id}")
    _, kbroker = both(pair, "kafka-transactions describe-producers (idempotent, committed)", "describe-producers",
                      "--topic", topic, "--partition", "0")
    assert len(kbroker.lines) == 3  # the header, the idempotent producer, the committed transaction's
    _, kbroker = both(pair, "kafka-transactions describe-producers (aborted, open)", "describe-producers",
                      "--topic", topic, "--partition", "1")
    # the open one starts at 2: the aborted one wrote a record and its marker first
    assert sorted(line.split("\t")[-1] for line in kbroker.lines[1:]) == ["2", "None"]
    both(pair, "kafka-transactions find-hanging", "find-hanging", "--broker-id", "1")
    both(pair, "kafka-transactions find-hanging --topic", "find-hanging", "--topic", topic,
         "--max-transaction-timeout", "0")


def test_abort_a_hanging_transaction(pair, run_id):
    """`abort` finds the producer by the transaction's first offset (DescribeProducers) and writes an abort
    marker on the partition itself (WriteTxnMarkers), as for a transaction its coordinator has lost."""
    topic = f"tx-{run_id}"
    both(pair, "kafka-transactions abort (no such transaction)", "abort", "--topic", topic, "--partition", "1",
         "--start-offset", "1")
    both(pair, "kafka-transactions abort", "abort", "--topic", topic, "--partition", "1", "--start-offset", "2")
