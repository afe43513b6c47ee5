"""One traffic line per recorded exchange, tagged or not: what `bench report`'s traffic section is built from.

`bench rescore` parses every exchange; the ones a catalog test claims are also scored, but every one of them is a
request some client made, and its endpoint, model, client, status, tokens and timing are reported
(docs/scores-format.md, "traffic lines").
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from bench.core.cassette.records import Exchange
from bench.core.clients import client_family, header
from bench.core.parsed import ParsedExchange, compact_itl
from bench.core.usage import usage_tokens
from bench.scorer.answer_facts import AnswerFacts, answer_facts
from bench.scorer.results import LoadTag, TrafficLine
from bench.scorer.rules import request_text
from bench.scorer.scoring import request_settings, short_name
from bench.scorer.sessions import session_keys

# A rough stand-in for a tokenizer when a response reported no usage: one token per word or punctuation mark of the
# request's text (instructions, messages or input items, prompt). Marked `counted`; BPE tokenizers give more.
_WORDISH = re.compile(r"\w+|[^\w\s]")


def counted_input_tokens(parsed: ParsedExchange) -> int | None:
    doc = parsed.request_json
    if doc is None:
        return None
    return len(_WORDISH.findall(request_text(doc)))


PHASES = ("warmup", "measure", "cooldown")


def _whole(value: str | None) -> int | None:
    """A tag's whole number (tags are untrusted text: anything else is no number)."""
    if value is None or not value.lstrip("-").isdigit() or len(value) > 18:
        return None
    return int(value)


def load_tag(tags: Mapping[str, str]) -> LoadTag | None:
    """The `bench load` tags of an exchange (docs/load.md), or None: not sent by `bench load`, or tags that do not
    say a level (a level that is not a whole number, an unknown phase)."""
    level = _whole(tags.get("level"))
    phase = tags.get("phase", "measure")
    if level is None or level < 0 or phase not in PHASES:
        return None
    return LoadTag(
        level=level,
        load=str(tags.get("load") or "")[:64],
        phase=phase,
        at_us=_whole(tags.get("at")),
        late_us=_whole(tags.get("late")),
    )


def traffic_entry(
    record: Exchange, parsed: ParsedExchange, cassette: str, model: str, facts: AnswerFacts | None = None
) -> TrafficLine:
    """The traffic line of `record` parsed as `parsed`; `facts`: its answer_facts when known (the parse cache's)."""
    request = record.request
    tokens = usage_tokens(parsed.usage)
    timing = parsed.timing
    input_tokens = tokens.input
    if facts is None:
        facts = answer_facts(record)
    input_source: str | None = "usage"
    if input_tokens is None:
        input_tokens = counted_input_tokens(parsed)
        input_source = "counted" if input_tokens is not None else None
    return TrafficLine(
        cassette=cassette,
        id=parsed.id,
        started=record.started,
        endpoint=parsed.endpoint,
        method=request.method,
        model=model or None,
        served_model=short_name(parsed.model),
        client=client_family(header(request.headers, "user-agent")),
        test=(parsed.tags.get("test") or None),
        status=parsed.status,
        outcome=parsed.outcome,
        streamed=parsed.streamed,
        failed=not parsed.ok or "error_event" in parsed.findings or "truncated" in parsed.findings,
        findings=sorted(set(parsed.findings)),
        input_tokens=input_tokens,
        input_tokens_source=input_source,
        cached_input_tokens=tokens.cached_input,
        output_tokens=timing.output_tokens,
        tokens_source=timing.tokens_source,
        ttft_us=timing.ttft_us,
        tpot_us=timing.tpot_us,
        e2el_us=timing.e2el_us,
        itl_us=compact_itl(timing.itl_us),
        n_events=timing.n_events,
        system_fingerprint=short_name(parsed.system_fingerprint),
        unknown_events=_unknown_events(parsed.unknown_events),
        end_us=record.timing.end,
        load=load_tag(record.tags),
        last_read_us=facts.last_read_us,
        upstream=record.upstream.url,
        settings=request_settings(parsed),
        response_id=facts.response_id,
        finish_reason=short_name(parsed.finish_reason),
        request_fp=request.fp or None,
        session_keys=session_keys(record, parsed),
    )


# Kinds of unknown events kept per exchange (their names are the upstream's words; counts beyond are summed).
MAX_UNKNOWN_KINDS = 32


def _unknown_events(counts: Mapping[str, int]) -> dict[str, int]:
    if not counts:
        return {}  # the usual case
    kept = dict(sorted(counts.items())[:MAX_UNKNOWN_KINDS])
    named = {short_name(k) or "": v for k, v in kept.items()}
    rest = sum(counts.values()) - sum(kept.values())
    return named | ({"(other kinds)": rest} if rest else {})


def traffic_key(entry: TrafficLine) -> tuple[str, int, str]:
    return entry.key()
