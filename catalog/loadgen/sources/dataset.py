"""A JSONL dataset as a workload, one request per line, the file read again from the top when a run needs more.

Each line is a JSON object in one of the common shapes:

- an OpenAI request body: `messages` (Chat Completions) or `input` (the Responses API). Sent byte for byte when it
  names its model and says whether to stream; otherwise `model` (the first `--model`) and `stream` (with usage) are
  added, which re-serialises it;
- a prompt (vLLM's custom dataset): `{"prompt": "...", "output_tokens": 128}` becomes a chat request with one user
  message (`max_tokens` from `output_tokens` or `max_tokens` when given);
- a ShareGPT conversation: `{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", "value": ...}]}`:
  the first human turn is sent (after a leading system turn, if any) and the reply that follows sets `max_tokens`
  (its words, a rough token count), as vLLM's ShareGPT sampler uses the first two turns.

The file is checked once, line by line, before the run: a line that is not one of these is a one-line error naming
it. A JSON array (ShareGPT's own download) is not read whole: convert it with `jq -c '.[]'`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from bench.catalog.loadgen.work import LoadRequest, SourceOptions, Work, workload_source
from bench.core.errors import BenchError

MAX_LINE = 16 << 20  # a request body larger than this is not a request a dataset holds
ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system"}


def _open_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise BenchError(f"--dataset {path}: cannot read it ({exc.strerror}); give a JSONL file") from None
    with handle:
        for number, line in enumerate(handle, 1):
            if len(line) > MAX_LINE:
                raise BenchError(f"{path}:{number}: a line over {MAX_LINE >> 20} MiB; is this a JSONL dataset?")
            if line.strip():
                yield number, line.rstrip(b"\r\n")


def request_of(line: bytes, where: str, options: SourceOptions) -> LoadRequest:
    """The request one dataset line stands for (BenchError naming `where` when it is none of the shapes)."""
    try:
        doc = orjson.loads(line)
    except orjson.JSONDecodeError:
        first = "a JSON array: convert it to JSON Lines with jq -c '.[]'" if line.lstrip()[:1] == b"[" else "not JSON"
        raise BenchError(f"{where}: {first}") from None
    if isinstance(doc, list):
        raise BenchError(f"{where}: a JSON array: convert it to JSON Lines with jq -c '.[]'")
    if not isinstance(doc, dict):
        raise BenchError(f"{where}: not a JSON object; each line is a request body, a prompt or a conversation")
    model = options.models[0] if options.models else None
    if "messages" in doc or "input" in doc:
        path = "/v1/chat/completions" if "messages" in doc else "/v1/responses"
        if isinstance(doc.get("model"), str) and "stream" in doc:
            return LoadRequest(path=path, body=line, origin=where, model=doc["model"])
        return _body(path, doc, model, options, where)
    if isinstance(doc.get("prompt"), str):
        wanted = doc.get("output_tokens", doc.get("max_tokens"))
        body: dict[str, Any] = {"messages": [{"role": "user", "content": doc["prompt"]}]}
        if isinstance(wanted, int) and wanted > 0:
            body["max_tokens"] = wanted
        return _body("/v1/chat/completions", body, model, options, where)
    if isinstance(doc.get("conversations"), list):
        return _body("/v1/chat/completions", _sharegpt(doc["conversations"], where), model, options, where)
    raise BenchError(
        f"{where}: no messages, input, prompt or conversations: not a request body, prompt or ShareGPT line"
    )


def _sharegpt(turns: list[Any], where: str) -> dict[str, Any]:
    messages: list[dict[str, str]] = []
    reply: str | None = None
    for turn in turns:
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
            raise BenchError(f'{where}: a ShareGPT turn is {{"from": ..., "value": "..."}}')
        role = ROLES.get(str(turn.get("from")))
        if role == "assistant" and any(m["role"] == "user" for m in messages):
            reply = turn["value"]
            break
        if role in ("system", "user") and not any(m["role"] == "user" for m in messages):
            messages.append({"role": role, "content": turn["value"]})
    if not any(m["role"] == "user" for m in messages):
        raise BenchError(f"{where}: a ShareGPT conversation without a human turn")
    body: dict[str, Any] = {"messages": messages}
    if reply is not None:
        body["max_tokens"] = max(1, len(reply.split()))
    return body


def _body(path: str, doc: dict[str, Any], model: str | None, options: SourceOptions, where: str) -> LoadRequest:
    if not isinstance(doc.get("model"), str):
        if model is None:
            raise BenchError(f"{where}: the line names no model: pass --model M")
        doc = {"model": model, **doc}
    if "stream" not in doc and options.stream:
        doc["stream"] = True
        if path == "/v1/chat/completions":
            doc["stream_options"] = {"include_usage": True}
    return LoadRequest(path=path, body=orjson.dumps(doc), origin=where, model=str(doc["model"]))


@workload_source("dataset", help="a JSONL file of request bodies, prompts or ShareGPT conversations")
def dataset(options: SourceOptions) -> Iterator[Work]:
    if not options.arg:
        raise BenchError("the dataset workload needs a file: --dataset FILE.jsonl")
    path = Path(options.arg)
    count = 0
    for number, line in _open_lines(path):  # checked whole before the run starts
        request_of(line, f"{path}:{number}", options)
        count += 1
    if not count:
        raise BenchError(f"--dataset {path}: no requests in it")
    return _cycle(path, options)


def _cycle(path: Path, options: SourceOptions) -> Iterator[Work]:
    while True:
        for number, line in _open_lines(path):
            yield request_of(line, f"{path}:{number}", options)
