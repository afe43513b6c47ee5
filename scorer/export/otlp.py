"""`bench export --format otlp`: recorded exchanges as OpenTelemetry GenAI spans and metrics (docs/export.md).

One CLIENT span per exchange, `{operation} {model}`, with the GenAI attributes (bench.scorer.export.genai), placed at
the recorded times: it starts at the exchange's `started` and ends at its `timing.end`; span events mark the first
token, the last token and the stream's last read at their recorded offsets. An agent session of more than one exchange
(bench.scorer.sessions) is one trace: an `invoke_agent` span over the session holds its exchanges' spans. Ids are
derived from the cassette and exchange ids, so exporting the same recording again gives the same trace and span ids.
The metrics are the conventions' four histograms over every exchange, stamped with the recording's time window.

The OpenTelemetry SDK builds the spans and aggregates the histograms; its OTLP exporters encode and send them (or
write OTLP JSON Lines). Spans are exported in batches as the scores file is read, synchronously: a batch the receiver
refuses stops the export with one line, nothing is dropped silently.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from bench import __version__
from bench.core.errors import BenchError
from bench.scorer.export import extra, genai
from bench.scorer.export.content import ContentReader
from bench.scorer.results import TrafficLine
from bench.scorer.scores_io import open_scores

BATCH = 512  # spans per export request


@dataclass(frozen=True)
class Target:
    endpoint: str | None = None  # an OTLP/HTTP base URL; /v1/traces and /v1/metrics are added
    file: Path | None = None  # else: OTLP JSON Lines written here
    protocol: str = "http/protobuf"
    traces: bool = True
    metrics: bool = True
    content: bool = False
    service_name: str = "bench"
    timeout_s: float = 10.0


@dataclass
class Sent:
    spans: int = 0
    traces: int = 0
    metric_points: int = 0


def _id(text: str, bits: int) -> int:
    value = int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[: bits // 8], "big")
    return value or 1  # zero is the invalid id


def _traffic(scores: Path) -> Iterator[TrafficLine]:
    _, lines = open_scores(scores)
    try:
        for _, line in lines:
            if isinstance(line, TrafficLine):
                yield line
    finally:
        lines.close()  # type: ignore[attr-defined]


def export_otlp(scores: Path, base: Path, target: Target) -> Sent:
    """Send (or write) the traffic lines of the scores file `scores` as spans and metrics; cassette names in it are
    relative to `base` (read for --content only)."""
    if target.endpoint is not None:
        parts = urlsplit(target.endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise BenchError(f"--endpoint {target.endpoint}: give the receiver's http:// or https:// base URL")
    sdk = _Sdk(target)
    sent = Sent()
    with ExitStack() as stack:
        exporters = sdk.exporters(stack)
        if target.traces:
            content = stack.enter_context(ContentReader(base)) if target.content else None
            spans = _Spans(sdk, exporters[0], target, content)
            linked = Counter(line.session for line in _traffic(scores) if line.session and line.session_link)
            for line in _traffic(scores):
                spans.exchange(line, linked)
            spans.finish()
            sent.spans, sent.traces = spans.count, spans.traces
        if target.metrics:
            sent.metric_points = _metrics(sdk, exporters[1], scores, target)
    return sent


class _Sdk:
    """The OpenTelemetry SDK's parts bench uses, imported once (the `otel` extra)."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.trace = extra("opentelemetry.trace", "otel", "--format otlp")
        self.sdk_trace = extra("opentelemetry.sdk.trace", "otel", "--format otlp")
        self.ids = extra("opentelemetry.sdk.trace.id_generator", "otel", "--format otlp")
        self.resources = extra("opentelemetry.sdk.resources", "otel", "--format otlp")
        # Built, not created: Resource.create adds a random service.instance.id; an export repeats byte for byte.
        self.resource = self.resources.Resource(
            {"service.name": target.service_name, "service.version": __version__}, schema_url=genai.SCHEMA_URL
        )

    def exporters(self, stack: ExitStack) -> tuple[Any, Any]:
        t = self.target
        if t.file is not None:
            fh = _open(t.file, stack)
            files = extra("opentelemetry.exporter.otlp.json.file", "otel", "--format otlp --out")
            return files.FileSpanExporter(stream=fh), files.FileMetricExporter(stream=fh)
        assert t.endpoint is not None
        root = t.endpoint.rstrip("/")
        kind = "proto" if t.protocol == "http/protobuf" else "json"
        spans = extra(f"opentelemetry.exporter.otlp.{kind}.http.trace_exporter", "otel", "--format otlp")
        metrics = extra(f"opentelemetry.exporter.otlp.{kind}.http.metric_exporter", "otel", "--format otlp")
        span_exporter = spans.OTLPSpanExporter(endpoint=f"{root}/v1/traces", timeout=t.timeout_s)
        metric_exporter = metrics.OTLPMetricExporter(endpoint=f"{root}/v1/metrics", timeout=t.timeout_s)
        stack.callback(span_exporter.shutdown)
        stack.callback(metric_exporter.shutdown)
        return span_exporter, metric_exporter


def _open(path: Path, stack: ExitStack) -> IO[str]:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return stack.enter_context(open(path, "w", encoding="utf-8"))
    except OSError as exc:
        raise BenchError(f"cannot write {path}: {exc.strerror}; choose another --out") from None


class _Spans:
    """Spans built from traffic lines in the scores file's order, exported a batch at a time."""

    def __init__(self, sdk: _Sdk, exporter: Any, target: Target, content: ContentReader | None) -> None:
        self.sdk, self.exporter, self.target, self.content = sdk, exporter, target, content
        outer = self

        class Ids(sdk.ids.IdGenerator):  # type: ignore[misc,name-defined]
            """The ids of the span about to start, set by bench just before (derived, so an export repeats)."""

            def generate_trace_id(self) -> int:
                return outer.next_trace

            def generate_span_id(self) -> int:
                return outer.next_span

        class Collect(sdk.sdk_trace.SpanProcessor):  # type: ignore[misc,name-defined]
            def on_end(self, span: Any) -> None:
                outer.pending.append(span)

        self.next_trace = self.next_span = 1
        self.pending: list[Any] = []
        provider = sdk.sdk_trace.TracerProvider(resource=sdk.resource, id_generator=Ids())
        provider.add_span_processor(Collect())
        self.tracer = provider.get_tracer("bench", __version__, schema_url=genai.SCHEMA_URL)
        self.open: dict[str, _Session] = {}
        self.count = self.traces = 0

    def exchange(self, line: TrafficLine, linked: Counter[str]) -> None:
        key = f"{line.cassette}\0{line.id}"
        session = line.session if line.session and linked.get(line.session) else None
        context = None
        state: _Session | None = None
        if session is not None:
            state = self.open.get(session)
            if state is None:
                state = self.open[session] = _Session(session, linked[session] + 1)
                self.traces += 1
            context = self._parent(state)
        else:
            self.traces += 1
            self.next_trace = _id(key, 128)
        self.next_span = _id(key, 64)
        span = self.tracer.start_span(
            _span_name(line),
            context=context,
            kind=self.sdk.trace.SpanKind.CLIENT,
            attributes=self._attributes(line),
            start_time=_ns(line.started, 0),
        )
        for name, offset in _events(line):
            span.add_event(name, {"bench.offset_us": offset}, timestamp=_ns(line.started, offset))
        if line.failed:
            span.set_status(self.sdk.trace.Status(self.sdk.trace.StatusCode.ERROR, _error_type(line)))
        end = _ns(line.started, _end_offset(line))
        span.end(end_time=end)
        if state is not None:
            state.see(line, end)
            if state.seen == state.expected:
                self._close(self.open.pop(state.session))
        self._maybe_flush()

    def _parent(self, state: _Session) -> Any:
        trace = self.sdk.trace
        ctx = trace.SpanContext(
            trace_id=state.trace_id, span_id=state.span_id, is_remote=False, trace_flags=trace.TraceFlags(1)
        )
        return trace.set_span_in_context(trace.NonRecordingSpan(ctx))

    def _close(self, state: _Session) -> None:
        self.next_trace, self.next_span = state.trace_id, state.span_id
        attributes: dict[str, Any] = {
            genai.OPERATION_NAME: genai.INVOKE_AGENT,
            genai.PROVIDER_NAME: genai.PROVIDER_OPENAI,
            genai.CONVERSATION_ID: state.session,
            "bench.session.exchanges": state.seen,
        }
        if len(state.models) == 1:
            attributes[genai.REQUEST_MODEL] = next(iter(state.models))
        span = self.tracer.start_span(
            genai.INVOKE_AGENT,
            kind=self.sdk.trace.SpanKind.INTERNAL,
            attributes=attributes,
            start_time=state.start,
        )
        span.end(end_time=state.end)

    def _attributes(self, line: TrafficLine) -> dict[str, Any]:
        out = span_attributes(line)
        if self.content is not None:
            out.update(self.content.attributes(line))
        return out

    def _maybe_flush(self, force: bool = False) -> None:
        if len(self.pending) < BATCH and not (force and self.pending):
            return
        batch, self.pending = self.pending, []
        result = self.exporter.export(batch)
        if result != self.sdk.sdk_trace.export.SpanExportResult.SUCCESS:
            where = self.target.endpoint or self.target.file
            hint = (
                "; a receiver that takes protobuf only (Arize Phoenix) needs --protocol http/protobuf"
                if self.target.protocol == "http/json"
                else ""
            )
            raise BenchError(
                f"{where}: the receiver did not take {len(batch)} span(s) (after {self.count} taken); "
                f"check the URL (the OTLP/HTTP base, e.g. http://127.0.0.1:4318) and that it runs{hint}"
            )
        self.count += len(batch)

    def finish(self) -> None:
        for session in list(self.open):  # a session whose count the file did not bear out: closed as it stands
            self._close(self.open.pop(session))
        self._maybe_flush(force=True)


@dataclass
class _Session:
    session: str
    expected: int
    seen: int = 0
    start: int = 0
    end: int = 0
    models: set[str] = dataclasses.field(default_factory=set)

    def __post_init__(self) -> None:
        self.trace_id = _id(f"session\0{self.session}", 128)
        self.span_id = _id(f"session-span\0{self.session}", 64)

    def see(self, line: TrafficLine, end: int) -> None:
        start = _ns(line.started, 0)
        self.start = start if not self.seen else min(self.start, start)
        self.end = max(self.end, end)
        self.seen += 1
        if line.model:
            self.models.add(line.model)


def _ns(started: int | None, offset_us: int) -> int:
    return ((started or 0) + offset_us) * 1000


def _end_offset(line: TrafficLine) -> int:
    for value in (line.end_us, line.last_read_us, line.e2el_us):
        if value is not None:
            return value
    return 0


def _events(line: TrafficLine) -> list[tuple[str, int]]:
    out = []
    if line.ttft_us is not None:
        out.append(("bench.first_token", line.ttft_us))
    if line.streamed and line.e2el_us is not None:
        out.append(("bench.last_token", line.e2el_us))
    if line.streamed and line.last_read_us is not None:
        out.append(("bench.stream_end", line.last_read_us))
    return out


def operation(line: TrafficLine) -> str:
    return genai.OPERATIONS.get(line.endpoint, line.endpoint or "unknown")


def _span_name(line: TrafficLine) -> str:
    model = line.model or line.served_model
    return f"{operation(line)} {model}" if model else operation(line)


def _error_type(line: TrafficLine) -> str:
    if line.outcome != "complete":
        return line.outcome
    if line.status is None or line.status >= 400:
        return str(line.status or "no_response")
    return "error_event" if "error_event" in line.findings else "truncated"


def server(line: TrafficLine) -> dict[str, Any]:
    if not line.upstream:
        return {}
    try:
        parts = urlsplit(line.upstream)
        port = parts.port
    except ValueError:
        return {}
    out: dict[str, Any] = {}
    if parts.hostname:
        out[genai.SERVER_ADDRESS] = parts.hostname
    if port is not None:
        out[genai.SERVER_PORT] = port
    return out


def common(line: TrafficLine) -> dict[str, Any]:
    """What spans and metric points both carry."""
    out: dict[str, Any] = {genai.OPERATION_NAME: operation(line), genai.PROVIDER_NAME: genai.PROVIDER_OPENAI}
    if line.model:
        out[genai.REQUEST_MODEL] = line.model
    if line.served_model:
        out[genai.RESPONSE_MODEL] = line.served_model
    out.update(server(line))
    if line.failed:
        out[genai.ERROR_TYPE] = _error_type(line)
    return out


def span_attributes(line: TrafficLine) -> dict[str, Any]:
    out = common(line)
    settings = line.settings if isinstance(line.settings, dict) else {}
    for key, name, kind in (
        ("temperature", genai.REQUEST_TEMPERATURE, float),
        ("max_tokens", genai.REQUEST_MAX_TOKENS, int),
        ("seed", genai.REQUEST_SEED, int),
    ):
        value = settings.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[name] = kind(value)
    if line.response_id:
        out[genai.RESPONSE_ID] = line.response_id
    if line.finish_reason:
        out[genai.RESPONSE_FINISH_REASONS] = [line.finish_reason]
    if line.input_tokens is not None and line.input_tokens_source == "usage":
        out[genai.USAGE_INPUT_TOKENS] = line.input_tokens
    if line.output_tokens is not None:
        out[genai.USAGE_OUTPUT_TOKENS] = line.output_tokens
        out["bench.usage.output_tokens_source"] = line.tokens_source or "usage"
    if line.session:
        out[genai.CONVERSATION_ID] = line.session
    if line.session_link:
        out["bench.session.link"] = line.session_link
    out["bench.cassette"] = line.cassette
    out["bench.exchange.id"] = line.id
    out["bench.outcome"] = line.outcome
    if line.status is not None:
        out["http.response.status_code"] = line.status
    if line.test:
        out["bench.test"] = line.test
    if line.client:
        out["bench.client"] = line.client
    for name in ("ttft_us", "tpot_us", "e2el_us"):
        value = getattr(line, name)
        if value is not None:
            out[f"bench.{name}"] = value
    if line.findings:
        out["bench.findings"] = list(line.findings)
    return out


def _metrics(sdk: _Sdk, exporter: Any, scores: Path, target: Target) -> int:
    metrics_sdk = extra("opentelemetry.sdk.metrics", "otel", "--format otlp")
    export = extra("opentelemetry.sdk.metrics.export", "otel", "--format otlp")
    reader = export.InMemoryMetricReader()
    provider = metrics_sdk.MeterProvider(resource=sdk.resource, metric_readers=[reader])
    meter = provider.get_meter("bench", __version__, schema_url=genai.SCHEMA_URL)
    tokens = meter.create_histogram(
        genai.TOKEN_USAGE, unit="{token}", explicit_bucket_boundaries_advisory=list(genai.TOKEN_BUCKETS)
    )
    duration = meter.create_histogram(
        genai.OPERATION_DURATION, unit="s", explicit_bucket_boundaries_advisory=list(genai.DURATION_BUCKETS)
    )
    ttft = meter.create_histogram(
        genai.TIME_TO_FIRST_TOKEN, unit="s", explicit_bucket_boundaries_advisory=list(genai.TTFT_BUCKETS)
    )
    tpot = meter.create_histogram(
        genai.TIME_PER_OUTPUT_TOKEN, unit="s", explicit_bucket_boundaries_advisory=list(genai.TPOT_BUCKETS)
    )
    first = last = None
    for line in _traffic(scores):
        attrs = common(line)
        if line.input_tokens is not None and line.input_tokens_source == "usage":
            tokens.record(line.input_tokens, {**attrs, genai.TOKEN_TYPE: genai.TOKEN_INPUT})
        if line.output_tokens is not None:
            tokens.record(line.output_tokens, {**attrs, genai.TOKEN_TYPE: genai.TOKEN_OUTPUT})
        duration.record(_end_offset(line) / 1e6, attrs)
        if not line.failed and line.ttft_us is not None:
            ttft.record(line.ttft_us / 1e6, attrs)
        if not line.failed and line.tpot_us is not None:
            tpot.record(line.tpot_us / 1e6, attrs)
        start, end = _ns(line.started, 0), _ns(line.started, _end_offset(line))
        first = start if first is None else min(first, start)
        last = end if last is None else max(last, end)
    data = reader.get_metrics_data()
    if data is None or first is None or last is None:
        return 0
    data, points = _stamped(data, first, last)
    result = exporter.export(data)
    if result != export.MetricExportResult.SUCCESS:
        where = target.endpoint or target.file
        raise BenchError(
            f"{where}: the receiver did not take the metrics; if it takes traces only (Arize Phoenix), "
            "export with --signals traces"
        )
    return points


def _stamped(data: Any, start: int, end: int) -> tuple[Any, int]:
    """The SDK's metrics with every point's window set to the recording's (the SDK stamps collection time)."""
    points = 0
    resource_metrics = []
    for rm in data.resource_metrics:
        scopes = []
        for sm in rm.scope_metrics:
            metrics = []
            for metric in sm.metrics:
                stamped = [
                    dataclasses.replace(p, start_time_unix_nano=start, time_unix_nano=end)
                    for p in metric.data.data_points
                ]
                points += len(stamped)
                metrics.append(dataclasses.replace(metric, data=dataclasses.replace(metric.data, data_points=stamped)))
            scopes.append(dataclasses.replace(sm, metrics=metrics))
        resource_metrics.append(dataclasses.replace(rm, scope_metrics=scopes))
    return dataclasses.replace(data, resource_metrics=resource_metrics), points
