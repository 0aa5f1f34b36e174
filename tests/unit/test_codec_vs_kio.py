"""Our codec against kio (an independent implementation generated from the same JSON).

For every API and version the broker advertises, requests and responses:
- hypothesis builds one of our messages; our bytes decode with kio, and kio re-encodes the same bytes;
- hypothesis builds a kio message; kio's bytes decode with ours, and we re-encode the same bytes;
- in both directions the decoded values are equal field by field.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from io import BytesIO

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.broker.routing import build_router
from kbroker.protocol import codec, framing
from kbroker.protocol.wire import ZERO_UUID
from kbroker.protocol.spec import FieldSpec, MessageSpec, StructSpec

kio_index = pytest.importorskip("kio.index")
from kio.serial import entity_reader, entity_writer  # noqa: E402
from kio.static.constants import EntityType  # noqa: E402
from kio.static._phantom import Phantom  # noqa: E402


def _register_kio_strategies() -> None:
    seen, stack = set(), [Phantom]
    while stack:
        cls = stack.pop()
        for sub in cls.__subclasses__():
            if sub not in seen:
                seen.add(sub)
                stack.append(sub)
                hook = sub.__dict__.get("__hypothesis_hook__")
                if hook is not None:
                    hook.__get__(None, sub)()


_register_kio_strategies()
# kio's Records is a phantom bytes type with no strategy of its own; any bytes satisfy it.
st.register_type_strategy(__import__("kio.static.primitive", fromlist=["Records"]).Records, st.binary(max_size=12))

_KIO_ERROR_CODES = sorted(int(e) for e in __import__("kio.schema.errors", fromlist=["ErrorCode"]).ErrorCode)
_KIO_TIMESTAMPS = {"LogAppendTimeMs", "ExpiryTimestampMs", "IssueTimestampMs", "MaxTimestampMs",
                   "TransactionStartTimeMs"}
_INT_RANGES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _primitive(type_name: str, nullable: bool) -> st.SearchStrategy:
    if type_name in _INT_RANGES:
        bits = _INT_RANGES[type_name]
        s = st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    elif type_name == "uint16":
        s = st.integers(0, 65535)
    elif type_name == "float64":
        s = st.floats(allow_nan=False)
    elif type_name == "bool":
        s = st.booleans()
    elif type_name == "string":
        s = st.text(max_size=12)
    elif type_name == "bytes":
        s = st.binary(max_size=12)
    elif type_name == "records":
        s = st.binary(max_size=12)  # nullable as its version says (ShareFetch v1+'s are not)
    elif type_name == "uuid":
        return st.just(ZERO_UUID) | st.uuids()
    else:
        raise AssertionError(type_name)
    return st.none() | s if nullable else s


def _field_strategy(f: FieldSpec, version: int, flexible: bool) -> st.SearchStrategy:
    nullable = f.is_nullable(version)
    if f.kind == "primitive" and f.json_name.endswith("ErrorCode") and f.type == "int16":
        return st.sampled_from(_KIO_ERROR_CODES)  # kio types error codes as its enum
    if f.kind == "primitive" and f.type == "int64" and f.json_name in _KIO_TIMESTAMPS:
        # kio maps these to datetimes: -1 is its None, other negatives and year > 9999 don't exist;
        # DescribeTransactions' start time is a non-null datetime in kio, so -1 (which Kafka sends for
        # a transaction that is not running) cannot be parsed by kio at all: compare from 0 only; nor can
        # the -1 of a refused delegation token's times.
        if f.json_name in ("TransactionStartTimeMs", "ExpiryTimestampMs", "IssueTimestampMs", "MaxTimestampMs"):
            return st.integers(0, 253402300799000)  # the delegation token times too: kio's are non-null
        return st.just(-1) | st.integers(0, 253402300799000)
    if f.kind == "primitive" and f.type == "int64" and f.json_name.endswith("Ms"):
        # kio maps 64-bit durations to timedelta, which is exact only within about 2**40 ms
        return st.integers(-(2**40), 2**40)
    if f.kind == "primitive":
        return _primitive(f.type, nullable)
    if f.kind == "struct":
        s = _struct_strategy(f.struct, version, flexible)
        return st.none() | s if nullable else s
    elem = _struct_strategy(f.struct, version, flexible) if f.struct else _primitive(f.type, False)
    s = st.lists(elem, max_size=3)
    return st.none() | s if nullable else s


def _struct_strategy(spec: StructSpec, version: int, flexible: bool) -> st.SearchStrategy:
    kwargs = {f.name: _field_strategy(f, version, flexible) for f in spec.fields if f.present(version)}
    return st.builds(spec.cls, **kwargs)


def _ours_plain(obj, spec: StructSpec, version: int):
    out = []
    for f in spec.fields:
        if not f.present(version):
            continue
        v = getattr(obj, f.name)
        if v is None:
            out.append(None)
        elif f.kind == "struct":
            out.append(_ours_plain(v, f.struct, version))
        elif f.kind == "array" and f.struct is not None:
            out.append([_ours_plain(e, f.struct, version) for e in v])
        elif f.kind == "array":
            out.append(list(v))
        else:
            out.append(v)
    return tuple(out)


def _kio_plain(obj):
    if dataclasses.is_dataclass(obj):
        out = []
        for f in dataclasses.fields(obj):
            v = getattr(obj, f.name)
            if v is None and f.metadata.get("kafka_type") == "uuid":
                v = ZERO_UUID
            elif v is None and f.metadata.get("kafka_type") == "datetime_i64":
                v = -1
            out.append(_kio_plain(v))
        return tuple(out)
    if isinstance(obj, tuple | list):
        return [_kio_plain(e) for e in obj]
    if isinstance(obj, datetime.timedelta):
        return round(obj.total_seconds() * 1000)
    if isinstance(obj, datetime.datetime):
        return round(obj.timestamp() * 1000)
    if isinstance(obj, bool):
        return bool(obj)
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj)
    if isinstance(obj, str):
        return str(obj)
    if isinstance(obj, bytes):
        return bytes(obj)
    return obj


def _cases() -> list[tuple[int, int, str]]:
    cases = []
    for api_key, low, high in build_router().supported():
        for version in range(low, high + 1):
            for kind in ("request", "response"):
                cases.append((api_key, version, kind))
    return cases


def _kio_class(api_key: int, version: int, kind: str):
    entity = EntityType.request if kind == "request" else EntityType.response
    try:
        module = kio_index.load_payload_module(api_key, version, entity)
    except Exception:
        return None
    return next(
        v for v in vars(module).values()
        if isinstance(v, type) and getattr(v, "__type__", None) == entity and v.__module__ == module.__name__
    )


def _spec(api_key: int, kind: str) -> MessageSpec:
    spec = framing.request_spec(api_key) if kind == "request" else framing.response_spec(api_key)
    assert spec is not None
    return spec


@pytest.mark.parametrize(("api_key", "version", "kind"), _cases())
# data_too_large: StreamsGroupDescribe's answer nests five levels of lists; hypothesis gives up drawing it whole
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_round_trip_against_kio(api_key: int, version: int, kind: str, data) -> None:
    kio_cls = _kio_class(api_key, version, kind)
    if kio_cls is None:
        pytest.skip(f"kio 0.6.5 has no schema for api {api_key} v{version}")
    spec = _spec(api_key, kind)
    flexible = spec.is_flexible(version)
    read, write = entity_reader(kio_cls), entity_writer(kio_cls)

    ours = data.draw(_struct_strategy(spec.struct, version, flexible), label="ours")
    ours_bytes = codec.encode(spec, version, ours)
    kio_obj, consumed = read(ours_bytes, 0)
    assert consumed == len(ours_bytes)
    out = BytesIO()
    write(out, kio_obj)
    assert out.getvalue() == ours_bytes
    assert _kio_plain(kio_obj) == _ours_plain(ours, spec.struct, version)

    theirs = data.draw(st.from_type(kio_cls), label="kio")
    buf = BytesIO()
    write(buf, theirs)
    decoded = codec.decode(spec, version, buf.getvalue())
    assert codec.encode(spec, version, decoded) == buf.getvalue()
    assert _ours_plain(decoded, spec.struct, version) == _kio_plain(theirs)


def test_every_advertised_version_has_a_kio_counterpart_or_is_newer() -> None:
    """kio may lag Kafka's newest versions; make the gap visible rather than silently skipped."""
    missing = [(k, v, kind) for k, v, kind in _cases() if _kio_class(k, v, kind) is None]
    assert len(missing) <= len(_cases()) // 4, missing


def _kafka_python_old_classes() -> dict[tuple[int, int, str], type]:
    """kafka-python's hand-written classes for old versions (kafka.protocol.old), by (api, version, kind)."""
    try:
        import importlib
        import pkgutil

        import kafka.protocol.old as old
    except ImportError:
        return {}
    found = {}
    for info in pkgutil.iter_modules(old.__path__):
        module = importlib.import_module(f"kafka.protocol.old.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and isinstance(getattr(value, "API_KEY", None), int) and \
                    isinstance(getattr(value, "API_VERSION", None), int) and hasattr(value, "SCHEMA"):
                kind = "request" if value.__name__.split("_v")[0].endswith("Request") else "response"
                found[(value.API_KEY, value.API_VERSION, kind)] = value
    return found


_OLD = _kafka_python_old_classes()
# kafka-python 3.0 writes DescribeLogDirs v0's Partitions as one int32 instead of an array (its bug):
# for that one case only a null topic list is exercised (tests/integration/test_legacy_versions.py).
_KAFKA_PYTHON_BUGS = {(35, 0, "request")}
_KIO_GAPS = [c for c in _cases() if _kio_class(*c) is None and c in _OLD and c not in _KAFKA_PYTHON_BUGS]


@pytest.mark.parametrize(("api_key", "version", "kind"), _KIO_GAPS)
# data_too_large: StreamsGroupDescribe's answer nests five levels of lists; hypothesis gives up drawing it whole
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_versions_kio_lacks_against_kafka_python(api_key: int, version: int, kind: str, data) -> None:
    """Where kio has no schema (mostly Kafka 3.9's versions that Kafka 4 removed, which our legacy
    overlay defines), kafka-python's independent hand-written classes must read our bytes and write
    them back identically."""
    spec = _spec(api_key, kind)
    ours = data.draw(_struct_strategy(spec.struct, version, spec.is_flexible(version)), label="ours")
    ours_bytes = codec.encode(spec, version, ours)
    theirs = _OLD[(api_key, version, kind)].decode(ours_bytes)
    assert theirs.encode() == ours_bytes
    assert codec.encode(spec, version, codec.decode(spec, version, ours_bytes)) == ours_bytes


# Versions neither kio 0.6.5 nor kafka-python knows. Kafka 4.4's new ApiVersions v5 and DeleteGroups v3
# are checked against Kafka 4.4 itself: tests/reference/test_kafka_versions.py and the differential wire
# suite send them to it and decode its answers with our codec. The v0 that Kafka 4.0 removed of the APIs
# whose v0 its definitions call "the same as version 1" are checked below: our v0 bytes are our v1 bytes.
# StreamsGroupHeartbeat and StreamsGroupDescribe v1 likewise: the differential wire suite
# (differential/apis_streams.py) and Kafka Streams 4.4 in the client matrix exchange them with Kafka 4.4;
# StreamsGroupTopologyDescriptionUpdate v0 by tests/reference/test_streams_topology_description.py, which
# sends Kafka 4.4 our requests and decodes its answers. TxnOffsetCommit v6 (topics by id) likewise:
# differential/apis_txn.py sends it to Kafka 4.4.
_CHECKED_AGAINST_KAFKA_44 = {(18, 5, "request"), (18, 5, "response"), (42, 3, "request"), (42, 3, "response"),
                             *((api, 1, kind) for api in (88, 89) for kind in ("request", "response")),
                             (93, 0, "request"), (93, 0, "response"), (28, 6, "request"), (28, 6, "response")}
# WriteTxnMarkers v0 (Kafka 3.x's, removed by 4.0): v1's fields without the flexible encoding, checked
# byte for byte against the protocol's published layout below.
_V0_IS_V1_UNFLEXED = {(27, 0, "request"), (27, 0, "response")}
_V0_IS_V1 = [(k, kind) for k in (34, 38, 39, 40, 41) for kind in ("request", "response")]


@pytest.mark.parametrize(("api_key", "kind"), _V0_IS_V1)
# data_too_large: StreamsGroupDescribe's answer nests five levels of lists; hypothesis gives up drawing it whole
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_v0_is_v1_where_kafka_says_so(api_key: int, kind: str, data) -> None:
    spec = _spec(api_key, kind)
    ours = data.draw(_struct_strategy(spec.struct, 1, spec.is_flexible(1)), label="ours")
    v0 = codec.encode(spec, 0, ours)
    assert v0 == codec.encode(spec, 1, ours)
    assert codec.encode(spec, 0, codec.decode(spec, 0, v0)) == v0


def test_every_version_kio_lacks_is_checked_against_kafka_python() -> None:
    uncovered = sorted({(k, v, kind) for k, v, kind in _cases() if _kio_class(k, v, kind) is None}
                       - set(_KIO_GAPS) - _KAFKA_PYTHON_BUGS - _CHECKED_AGAINST_KAFKA_44
                       - {(k, 0, kind) for k, kind in _V0_IS_V1} - _V0_IS_V1_UNFLEXED)
    assert uncovered == [], uncovered


def test_write_txn_markers_v0_is_the_published_layout() -> None:
    import struct

    from kbroker.protocol.messages.write_txn_markers_request import (
        WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest,
    )
    from kbroker.protocol.messages.write_txn_markers_response import (
        WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
        WriteTxnMarkersResponse,
    )

    request = WriteTxnMarkersRequest([WritableTxnMarker(7, 3, True, [WritableTxnMarkerTopic("t", [0, 2])], 5)])
    expected = (struct.pack(">iqh?", 1, 7, 3, True) + struct.pack(">ih", 1, 1) + b"t"
                + struct.pack(">iii", 2, 0, 2) + struct.pack(">i", 5))
    raw = codec.encode(_spec(27, "request"), 0, request)
    assert raw == expected and codec.decode(_spec(27, "request"), 0, raw) == request
    response = WriteTxnMarkersResponse([WritableTxnMarkerResult(7, [WritableTxnMarkerTopicResult(
        "t", [WritableTxnMarkerPartitionResult(2, 47)])])])
    expected = struct.pack(">iqih", 1, 7, 1, 1) + b"t" + struct.pack(">iih", 1, 2, 47)
    raw = codec.encode(_spec(27, "response"), 0, response)
    assert raw == expected and codec.decode(_spec(27, "response"), 0, raw) == response
