"""`make cluster`: a scratch PostgreSQL and three kbroker nodes over it in the foreground (issue 44).

`python -m kbroker.tests.integration.postgres_cluster [--nodes 3] [--port 9092] [--base DIR]`: PostgreSQL
from Debian's packages on a free port (initdb as the `postgres` user when run as root), then node k
(k = 1..N) as `kbroker serve --cluster URL --node-id k --listen 127.0.0.1:PORT+k-1`, each its own
process with its data directory under DIR. Prints the bootstrap servers and the database URL; Ctrl-C
stops the nodes (SIGTERM), then PostgreSQL, and removes the scratch directories.
"""

from __future__ import annotations

import argparse
import signal
import tempfile
import time
from pathlib import Path

from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.postgres import postgres_missing, start_postgres


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--port", type=int, default=9092, help="node 1's port; node k listens on PORT + k - 1")
    parser.add_argument("--base", default=None, help="the nodes' data directories (default: a scratch directory)")
    args = parser.parse_args()
    missing = postgres_missing()
    if missing is not None:
        print(f"make cluster: {missing}")
        return 1
    base = Path(args.base or tempfile.mkdtemp(prefix="kbroker-cluster-"))
    server = start_postgres()
    nodes: list[BrokerProcess] = []
    try:
        url = server.url(server.create_database("kbroker"))
        for k in range(1, args.nodes + 1):
            nodes.append(BrokerProcess(base / f"node{k}", "--cluster", url, "--node-id", str(k),
                                       port=args.port + k - 1))
        print(f"PostgreSQL: {url}")
        print(f"bootstrap servers: {','.join(node.bootstrap for node in nodes)}")
        print(f"node logs: {base}/node*-broker-*.log; Ctrl-C stops the cluster")
        stop = False

        def on_signal(*_: object) -> None:
            nonlocal stop
            stop = True

        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        while not stop and all(node.running for node in nodes):
            time.sleep(0.5)
        for node in nodes:
            if not node.running:
                print(f"node exited with {node.proc.returncode if node.proc else '?'}:\n{node.dump_log(20)}")
    finally:
        for node in nodes:
            try:
                node.stop()
            except AssertionError:
                node.kill()
        server.stop("fast")
        server.remove()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
