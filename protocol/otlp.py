"""The part of OpenTelemetry's OTLP metrics protobuf (opentelemetry/proto/metrics/v1/metrics.proto) that Kafka
clients push with KIP-714's PushTelemetry: a hand decoder of the fields kbroker exposes, gauges and sums of
numbers with their attributes. Histograms, summaries and exemplars are skipped (Kafka's clients send none).

Hostile input is bounded: the caller bounds the bytes (telemetry.max.bytes, and the inflated size), each
field's length is checked against what is left, messages nest to a fixed depth (the schema's, AnyValue's
arrays and maps are skipped, not walked), and `max_points` bounds the points decoded.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5
_DOUBLE = struct.Struct("<d")
_INT64 = struct.Struct("<q")
DELTA, CUMULATIVE = 1, 2  # AggregationTemporality


class OtlpError(ValueError):
    """Bytes that are not an OTLP MetricsData message."""


@dataclass(slots=True)
class Point:
    attributes: dict[str, str]
    value: float


@dataclass(slots=True)
class Metric:
    name: str
    kind: str  # "gauge" or "sum"
    description: str = ""
    monotonic: bool = False
    temporality: int = 0
    points: list[Point] = field(default_factory=list)


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise OtlpError("truncated or overlong varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: memoryview):
    """(field number, wire type, value) of one message: an int for varints, bytes views for the rest."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, pos = _varint(data, pos)
            yield number, wire, value
        elif wire == _FIXED64:
            if pos + 8 > len(data):
                raise OtlpError("truncated fixed64")
            yield number, wire, data[pos:pos + 8]
            pos += 8
        elif wire == _LEN:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise OtlpError("a length past the end of its message")
            yield number, wire, data[pos:pos + size]
            pos += size
        elif wire == _FIXED32:
            if pos + 4 > len(data):
                raise OtlpError("truncated fixed32")
            yield number, wire, data[pos:pos + 4]
            pos += 4
        else:
            raise OtlpError(f"wire type {wire} (groups are not OTLP)")


def _text(value: memoryview, limit: int = 1024) -> str:
    return bytes(value[:limit]).decode("utf-8", "replace")


def _any_value(data: memoryview) -> str | None:
    """AnyValue as label text: strings, booleans, integers and doubles; arrays, maps and bytes skipped."""
    for number, wire, value in _fields(data):
        if number == 1 and wire == _LEN:
            return _text(value)
        if number == 2 and wire == _VARINT:
            return "true" if value else "false"
        if number == 3 and wire == _VARINT:
            return str(value - (1 << 64) if value >= 1 << 63 else value)
        if number == 4 and wire == _FIXED64:
            return repr(_DOUBLE.unpack(value)[0])
    return None


def _attributes(into: dict[str, str], data: memoryview) -> None:
    """One KeyValue into `into`."""
    key, text = None, None
    for number, wire, value in _fields(data):
        if number == 1 and wire == _LEN:
            key = _text(value, 256)
        elif number == 2 and wire == _LEN:
            text = _any_value(value)
    if key is not None and text is not None:
        into[key] = text


def _point(data: memoryview) -> Point | None:
    attributes: dict[str, str] = {}
    number_value: float | None = None
    for number, wire, value in _fields(data):
        if number == 7 and wire == _LEN:
            _attributes(attributes, value)
        elif number == 4 and wire == _FIXED64:
            number_value = _DOUBLE.unpack(value)[0]
        elif number == 6 and wire == _FIXED64:
            number_value = float(_INT64.unpack(value)[0])
    return None if number_value is None else Point(attributes, number_value)


def _metric(data: memoryview, budget: list[int]) -> Metric | None:
    name, description, body, kind = "", "", None, ""
    for number, wire, value in _fields(data):
        if number == 1 and wire == _LEN:
            name = _text(value, 512)
        elif number == 2 and wire == _LEN:
            description = _text(value, 512)
        elif number in (5, 7) and wire == _LEN:
            body, kind = value, "gauge" if number == 5 else "sum"
    if body is None or not name:
        return None  # histograms, summaries, or nothing we expose
    metric = Metric(name, kind, description)
    for number, wire, value in _fields(body):
        if number == 1 and wire == _LEN:
            if budget[0] <= 0:
                raise OtlpError("more data points than allowed")
            budget[0] -= 1
            point = _point(value)
            if point is not None:
                metric.points.append(point)
        elif number == 2 and wire == _VARINT:
            metric.temporality = value
        elif number == 3 and wire == _VARINT:
            metric.monotonic = bool(value)
    return metric


def decode_metrics(payload: bytes, max_points: int) -> tuple[dict[str, str], list[Metric]]:
    """MetricsData: the resource attributes (of all its resources) and the gauges and sums."""
    resource: dict[str, str] = {}
    metrics: list[Metric] = []
    budget = [max_points]
    for number, wire, resource_metrics in _fields(memoryview(payload)):
        if number != 1 or wire != _LEN:
            continue
        for rnumber, rwire, rvalue in _fields(resource_metrics):
            if rnumber == 1 and rwire == _LEN:  # Resource
                for anumber, awire, avalue in _fields(rvalue):
                    if anumber == 1 and awire == _LEN:
                        _attributes(resource, avalue)
            elif rnumber == 2 and rwire == _LEN:  # ScopeMetrics
                for snumber, swire, svalue in _fields(rvalue):
                    if snumber == 2 and swire == _LEN:
                        metric = _metric(svalue, budget)
                        if metric is not None:
                            metrics.append(metric)
    return resource, metrics
