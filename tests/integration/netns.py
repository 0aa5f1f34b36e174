"""Hosts on a private network for the tests that cut one off (issue 44's network partition).

`PrivateNetwork` makes a bridge in this (the host's) network namespace with the first address of a
private /24, and per host a network namespace joined to the bridge by a veth pair, with an address of
its own on the /24. A process started with `run_in(host)` (`ip netns exec NS ...`) sees only that
address and its loopback; it reaches the host side (PostgreSQL listening on the bridge's address) and
the test reaches it, both through the bridge. `cut(host)` sets the host-side end of its veth down:
its packets go nowhere, in both directions, as a cable pulled out (no reset reaches either side, so
each learns of it only by its own timeouts); `heal(host)` sets it up again. `close()` removes every
namespace and link, whatever happened (call it in a finally).

Creating namespaces needs CAP_SYS_ADMIN and CAP_NET_ADMIN (root here and in CI): `netns_missing()`
tries it and says why it cannot, for the test to skip with that reason.
"""

from __future__ import annotations

import random
import subprocess
import uuid


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and out.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
    return out


def netns_missing() -> str | None:
    """Why network namespaces with veth pairs and a bridge cannot be made here, or None (a real probe:
    one namespace, one pair, one bridge made and removed)."""
    tag = uuid.uuid4().hex[:6]
    ns, veth, bridge = f"kbprobe-{tag}", f"kbpv{tag}", f"kbpb{tag}"
    try:
        for args in (("netns", "add", ns), ("link", "add", veth, "type", "veth", "peer", "name", f"{veth}n"),
                     ("link", "set", f"{veth}n", "netns", ns), ("link", "add", bridge, "type", "bridge")):
            try:
                _ip(*args)
            except FileNotFoundError:
                return "the `ip` command (iproute2) is missing"
            except RuntimeError as e:
                return f"network namespaces are not permitted here: {e}"
        return None
    finally:
        _ip("link", "del", veth, check=False)
        _ip("link", "del", bridge, check=False)
        _ip("netns", "del", ns, check=False)


class PrivateNetwork:
    def __init__(self, hosts: int) -> None:
        self.tag = uuid.uuid4().hex[:5]
        self.prefix = self._free_prefix()
        self.network = f"{self.prefix}.0/24"
        self.gateway = f"{self.prefix}.1"  # the bridge: this namespace's address on the network
        self.bridge = f"kbbr{self.tag}"
        self.hosts = list(range(1, hosts + 1))
        self._made: list[tuple[str, str]] = []  # ("netns" | "link", name), to remove
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            self._made.append(("link", self.bridge))
            _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for host in self.hosts:
                self._add(host)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _free_prefix() -> str:
        """A 10.x.y /24 no interface of this machine is on (other sessions make networks too)."""
        taken = _ip("-4", "addr").stdout
        for _ in range(100):
            prefix = f"10.{random.randrange(100, 250)}.{random.randrange(1, 250)}"
            if f" {prefix}." not in taken:
                return prefix
        raise RuntimeError("no free private /24")

    def namespace(self, host: int) -> str:
        return f"kbpg-{self.tag}-{host}"

    def address(self, host: int) -> str:
        return f"{self.prefix}.{10 + host}"

    def _outer(self, host: int) -> str:
        return f"kbv{self.tag}{host}"  # the host-side end of the pair (on the bridge)

    def _add(self, host: int) -> None:
        ns, outer, inner = self.namespace(host), self._outer(host), f"kbv{self.tag}{host}n"
        _ip("netns", "add", ns)
        self._made.append(("netns", ns))
        _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        self._made.append(("link", outer))  # its peer goes with it
        _ip("link", "set", inner, "netns", ns)
        _ip("link", "set", outer, "master", self.bridge)
        _ip("link", "set", outer, "up")
        _ip("-n", ns, "addr", "add", f"{self.address(host)}/24", "dev", inner)
        _ip("-n", ns, "link", "set", inner, "up")
        _ip("-n", ns, "link", "set", "lo", "up")

    def run_in(self, host: int) -> list[str]:
        """The command prefix that runs a program in `host`'s namespace (it execs: the pid is the program's)."""
        return ["ip", "netns", "exec", self.namespace(host)]

    def cut(self, host: int) -> None:
        _ip("link", "set", self._outer(host), "down")

    def heal(self, host: int) -> None:
        _ip("link", "set", self._outer(host), "up")

    def close(self) -> None:
        for kind, name in reversed(self._made):
            if kind == "link":
                _ip("link", "del", name, check=False)
            else:
                _ip("netns", "del", name, check=False)
        self._made.clear()
