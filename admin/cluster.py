"""The cluster controls of a `kbroker serve --nodes N --test-controls` broker, as a Python API for
tests (the same HTTP test controls `kbroker test node-stop ...` calls; docs/cluster.md):

    cluster = ClusterControls(  # kbroker.admin.cluster"http://127.0.0.1:9644", token=open("data/test-controls.token").read().strip())
    cluster.stop_node(2)          # node 2's listeners close; its leaderships move (epoch + 1)
    cluster.start_node(2)         # back on the same ports, back in every ISR
    cluster.move_leader("orders", 0, node=3)
    cluster.shuffle_leaders(seed=7)
    cluster.move_coordinator("my-group", node=1)
    cluster.add_node()            # node 4 on the next ports, placed on from now on
    cluster.cut_off(2, "my-app")  # client id "my-app" cannot reach node 2 (cut=False mends it)
    cluster.request_counts()      # {"nodes": [{"node_id": 1, "total": 812, "requests": {"Produce": 700, ...}}]}
    cluster.describe()            # {"controller": 1, "nodes": [{"node_id": 1, "up": True, ...}, ...]}

Each call returns the control's event ({"ok": True, "control": ..., "detail": ...}) once it has
applied (a moved coordinator has loaded its groups); a refusal raises AdminError.
"""

from __future__ import annotations

from urllib.parse import quote

from .groups import http_json


class ClusterControls:
    def __init__(self, admin_url: str, token: str | None = None, timeout_s: float = 30.0) -> None:
        self.admin_url = admin_url
        self.token = token
        self.timeout_s = timeout_s

    def _post(self, path: str, body: dict | None = None) -> dict:
        return http_json(self.admin_url, "/v1/test/cluster/" + path, method="POST", body=body or {},
                         timeout_s=self.timeout_s, token=self.token)

    def describe(self) -> dict:
        return self._post("describe")

    def stop_node(self, node: int) -> dict:
        return self._post(f"nodes/{int(node)}/stop")

    def start_node(self, node: int) -> dict:
        return self._post(f"nodes/{int(node)}/start")

    def move_leader(self, topic: str, partition: int, node: int | None = None) -> dict:
        return self._post(f"partitions/{quote(topic, safe='')}/{int(partition)}/leader", {"node": node})

    def shuffle_leaders(self, seed: int | None = None) -> dict:
        return self._post("shuffle", {"seed": seed})

    def elect_preferred(self) -> dict:
        return self._post("elect-preferred")

    def move_coordinator(self, group: str, node: int | None = None) -> dict:
        return self._post(f"groups/{quote(group, safe='')}/coordinator", {"node": node})

    def add_node(self) -> dict:
        return self._post("nodes/add")

    def cut_off(self, node: int, client_id: str, cut: bool = True) -> dict:
        return self._post(f"nodes/{int(node)}/cut-off", {"client_id": client_id, "cut": cut})

    def request_counts(self) -> dict:
        return self._post("requests")
