"""The server's metrics and their Prometheus text exposition (format 0.0.4).

``RequestMetrics`` is what the dispatcher feeds on the per-request path: requests, latency histogram,
request and response bytes per API, and every non-zero error code a response carries (top level or inside
its topics, partitions, groups or members, as Kafka's ``ErrorsPerSec`` counts them). Everything else — open
connections, groups by state and type, members, rebalances, the coordinator log — is a gauge or counter the
server reads at scrape time and hands to :func:`exposition` as ``Family`` values.

Written by hand rather than with ``prometheus_client``: the text format is a few lines, every update happens
on the event loop thread (plain integer and list updates, no locks), and the scrape endpoint is served from
the same loop (``console/http.py``, ``/metrics``) instead of the library's HTTP server thread.
"""

from __future__ import annotations

import bisect
import math
import typing
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode

from regroup.server.encoded import PreEncoded

#: latency bucket bounds in seconds (le="+Inf" is implied)
LATENCY_BUCKETS_S = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)

Labels = Mapping[str, str]


@dataclass(slots=True)
class Family:
    """One metric family: ``kind`` is counter, gauge or histogram; samples are (name suffix, labels, value)."""

    name: str
    kind: str
    help: str
    samples: list[tuple[str, Labels, float]] = field(default_factory=list)

    def add(self, value: float, labels: Labels | None = None, suffix: str = "") -> Family:
        self.samples.append((suffix, labels or {}, value))
        return self


class Histogram:
    """Counts per bucket (not cumulative until exposition), sum and count."""

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: Sequence[float] = LATENCY_BUCKETS_S) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def samples(self, labels: Labels) -> Iterable[tuple[str, Labels, float]]:
        running = 0
        for bound, n in zip((*self.bounds, math.inf), self.counts, strict=True):
            running += n
            yield "_bucket", {**labels, "le": _number(bound)}, running
        yield "_sum", labels, self.sum
        yield "_count", labels, self.count


class ApiStats:
    """One API's request counters and latency: what the dispatcher updates on every request."""

    __slots__ = ("latency", "request_bytes", "requests", "response_bytes")

    def __init__(self) -> None:
        self.requests = 0
        self.request_bytes = 0
        self.response_bytes = 0
        self.latency = Histogram()


class RequestMetrics:
    """Per-API request counters and latency, fed by the dispatcher on the event loop thread: ``received``
    when a request is decoded (it returns the API's record), ``answered`` with that record once its response
    is encoded. One dictionary lookup per request; a response's error codes are read by a plan made once per
    response class (a flat one, as a heartbeat's, is one attribute read)."""

    def __init__(self) -> None:
        self.apis: dict[str, ApiStats] = {}
        self.errors: Counter[tuple[str, int]] = Counter()

    def received(self, api: str, size: int) -> ApiStats:
        stats = self.apis.get(api)
        if stats is None:
            stats = self.apis[api] = ApiStats()
        stats.requests += 1
        stats.request_bytes += size
        return stats

    def answered(self, api: str, stats: ApiStats, seconds: float, response: Any, size: int) -> None:
        """``response`` is the kio response entity or a ``PreEncoded`` one (None: nothing to inspect), ``size``
        its encoded bytes."""
        stats.latency.observe(seconds)
        stats.response_bytes += size
        if response is None:
            return
        if type(response) is PreEncoded:
            for code in response.error_codes:
                self.errors[(api, code)] += 1
            return
        plan = _ERROR_PLANS.get(type(response))
        if plan is None or plan[1]:
            _count_errors(response, api, self.errors)
        elif plan[0]:
            code = int(response.error_code)
            if code:
                self.errors[(api, code)] += 1

    def families(self) -> list[Family]:
        apis = sorted(self.apis.items())
        requests = Family("regroup_requests_total", "counter", "Requests received, per API.")
        for api, stats in apis:
            requests.add(stats.requests, {"api": api})
        latency = Family(
            "regroup_request_duration_seconds",
            "histogram",
            "From a decoded request to its encoded response (parked JoinGroup/SyncGroup time included), per API.",
        )
        for api, stats in apis:
            if stats.latency.count:
                latency.samples.extend(stats.latency.samples({"api": api}))
        errors = Family(
            "regroup_response_errors_total",
            "counter",
            "Non-zero error codes in responses (top level and per topic, partition, group or member), per API.",
        )
        for (api, code), n in sorted(self.errors.items()):
            errors.add(n, {"api": api, "error": error_name(code)})
        request_bytes = Family("regroup_request_bytes_total", "counter", "Request frame bytes received, per API.")
        for api, stats in apis:
            request_bytes.add(stats.request_bytes, {"api": api})
        response_bytes = Family("regroup_response_bytes_total", "counter", "Response frame bytes sent, per API.")
        for api, stats in apis:
            if stats.latency.count:
                response_bytes.add(stats.response_bytes, {"api": api})
        return [requests, latency, errors, request_bytes, response_bytes]


# ------------------------------------------------------------------------------------------ error codes
#: response entity class -> (has a top-level error_code, fields holding nested entities)
_ERROR_PLANS: dict[type[Any], tuple[bool, tuple[str, ...]]] = {}


def _count_errors(entity: Any, api: str, errors: Counter[tuple[str, int]]) -> None:
    plan = _ERROR_PLANS.get(type(entity))
    if plan is None:
        plan = _ERROR_PLANS[type(entity)] = _error_plan(type(entity))
    has_error, nested = plan
    if has_error:
        code = int(entity.error_code)
        if code:
            errors[(api, code)] += 1
    for name in nested:
        value = getattr(entity, name)
        if isinstance(value, tuple):
            for child in value:
                _count_errors(child, api, errors)
        elif value is not None:
            _count_errors(value, api, errors)


def _error_plan(cls: type[Any]) -> tuple[bool, tuple[str, ...]]:
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # an entity whose annotations do not resolve: count nothing rather than fail a request
        return False, ()
    nested = []
    for name, hint in hints.items():
        if name.startswith("__"):
            continue
        inner = typing.get_args(hint)[0] if typing.get_origin(hint) is tuple and typing.get_args(hint) else hint
        if isinstance(inner, type) and hasattr(inner, "__dataclass_fields__"):
            nested.append(name)
    return "error_code" in hints, tuple(nested)


def error_name(code: int) -> str:
    """Kafka's name of an error code (``NOT_COORDINATOR``), from kio's table of every code Kafka defines; a code
    Kafka does not define is ``UNKNOWN_CODE_<n>``."""
    try:
        return KafkaErrorCode(code).name.upper()
    except ValueError:
        return f"UNKNOWN_CODE_{code}"


# ------------------------------------------------------------------------------------------ exposition
def exposition(families: Iterable[Family]) -> str:
    """Prometheus text format 0.0.4: HELP and TYPE lines, then the samples of each family."""
    lines: list[str] = []
    for family in families:
        lines.append(f"# HELP {family.name} {_escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        for suffix, labels, value in family.samples:
            rendered = ",".join(f'{key}="{_escape_label(str(v))}"' for key, v in labels.items())
            lines.append(
                f"{family.name}{suffix}{{{rendered}}} {_number(value)}"
                if rendered
                else f"{family.name}{suffix} {_number(value)}"
            )
    return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    if value == math.inf:
        return "+Inf"
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n")
