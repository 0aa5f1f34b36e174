"""A small blocking Kafka admin client over our own codec: talks to kbroker or Apache Kafka.

It imports protocol/ only (messages, framing, FrameReader), never the broker, so it works against
any broker. Versions: for each API the newest version both we and the broker speak (from the
broker's ApiVersions answer), capped at the version this code was written against.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from ..protocol import framing
from ..protocol.errors import ErrorCode
from ..protocol.frames import FrameReader, recv_frame
from ..protocol.messages.api_versions_request import ApiVersionsRequest

CLIENT_ID = "kbroker-admin"
# API key -> the newest version this client's code handles.
PREFERRED = {
    3: 12,   # Metadata
    2: 7,    # ListOffsets
    8: 8,    # OffsetCommit
    9: 7,    # OffsetFetch (single group, flexible)
    10: 3,   # FindCoordinator (one key per request)
    15: 5,   # DescribeGroups
    16: 4,   # ListGroups (states filter)
    19: 7,   # CreateTopics
    20: 6,   # DeleteTopics
    32: 4,   # DescribeConfigs
    37: 3,   # CreatePartitions
    42: 2,   # DeleteGroups
    44: 1,   # IncrementalAlterConfigs
    47: 0,   # OffsetDelete
    69: 1,   # ConsumerGroupDescribe (KIP-848 groups)
    89: 1,   # StreamsGroupDescribe (KIP-1071 groups)
    77: 1,   # ShareGroupDescribe (KIP-932 share groups)
    90: 1,   # DescribeShareGroupOffsets (share-partitions' start offsets and lags)
    91: 0,   # AlterShareGroupOffsets (a share group's reset-offsets)
    92: 0,   # DeleteShareGroupOffsets (a share group's delete-offsets)
}


class AdminError(Exception):
    """One line for the user: what failed, naming the broker, group or topic."""


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep:
        return text.strip(), 9092
    return host.strip("[]") or "127.0.0.1", int(port)


class Connection:
    """One broker connection; requests are answered in order, one at a time."""

    def __init__(self, address: str, timeout: float) -> None:
        self.address = address
        self.timeout = timeout
        self._correlation = 0
        self._reader = FrameReader()
        host, port = parse_address(address)
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout)
        except socket.timeout:
            raise AdminError(f"broker {address} did not answer within {timeout:g} s") from None
        except OSError as e:
            raise AdminError(f"broker {address}: cannot connect: {e.strerror or e}") from None
        self._sock.settimeout(timeout)
        self.versions: dict[int, tuple[int, int]] = {}
        _, body = self._round_trip(18, 3, ApiVersionsRequest(CLIENT_ID, "1"))
        if body.error_code != 0:
            raise AdminError(f"broker {address}: ApiVersions failed with {error_name(body.error_code)}")
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}

    def close(self) -> None:
        self._sock.close()

    def version_for(self, api_key: int) -> int:
        preferred = PREFERRED[api_key]
        low, high = self.versions.get(api_key, (None, None))
        if low is None or high is None or low > preferred:
            raise AdminError(f"broker {self.address} does not serve API {api_key} in a version this tool speaks")
        return min(preferred, high)

    def request(self, api_key: int, body: Any, version: int | None = None) -> Any:
        return self._round_trip(api_key, self.version_for(api_key) if version is None else version, body)[1]

    def _round_trip(self, api_key: int, version: int, body: Any) -> tuple[int, Any]:
        self._correlation += 1
        try:
            self._sock.sendall(framing.encode_request(api_key, version, self._correlation, CLIENT_ID, body))
            frame = recv_frame(self._sock.recv, self._reader)
        except socket.timeout:
            raise AdminError(f"broker {self.address} did not answer within {self.timeout:g} s") from None
        except (OSError, ValueError) as e:
            raise AdminError(f"broker {self.address}: {e}") from None
        return framing.decode_response(api_key, version, frame)


class Admin:
    """The bootstrap connection plus group coordinators found on demand."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout
        self.conn = Connection(bootstrap, timeout)
        self._coordinators: dict[str, Connection] = {}

    def close(self) -> None:
        self.conn.close()
        for c in self._coordinators.values():
            c.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def coordinator(self, group_id: str) -> Connection:
        """The group's coordinator (retried while the broker is still loading its groups)."""
        from ..protocol.messages.find_coordinator_request import FindCoordinatorRequest

        deadline = time.monotonic() + self.timeout
        while True:
            resp = self.conn.request(10, FindCoordinatorRequest(key=group_id, key_type=0))
            code = resp.error_code
            if code == 0:
                break
            if code not in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) \
                    or time.monotonic() > deadline:
                raise AdminError(f"group {group_id}: no coordinator from {self.bootstrap}: {error_name(code)}")
            time.sleep(0.1)
        address = f"{resp.host}:{resp.port}"
        conn = self._coordinators.get(address)
        if conn is None:
            conn = self.conn if address == self.bootstrap else Connection(address, self.timeout)
            if conn is not self.conn:
                self._coordinators[address] = conn
        return conn

    def connection_to(self, address: str) -> Connection:
        """A connection to another broker of the cluster (HOST:PORT as Metadata names it), kept."""
        conn = self._coordinators.get(address)
        if conn is None:
            conn = self.conn if address == self.bootstrap else Connection(address, self.timeout)
            if conn is not self.conn:
                self._coordinators[address] = conn
        return conn

    def group_request(self, group_id: str, api_key: int, body: Any, error_of) -> Any:
        """Send to the group's coordinator, retrying while it loads or moves."""
        deadline = time.monotonic() + self.timeout
        while True:
            resp = self.coordinator(group_id).request(api_key, body)
            code = error_of(resp)
            retriable = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR,
                         ErrorCode.COORDINATOR_NOT_AVAILABLE)
            if code not in retriable or time.monotonic() > deadline:
                return resp
            time.sleep(0.1)
