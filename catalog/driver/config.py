"""bench.yaml and command-line flags, merged into one RecordConfig (flags win; BENCH_API_KEY wins for the key).

The file is validated with a JSON Schema so that every mistake is one line naming the file and the field.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from bench.core.errors import BenchError
from bench.core.nesting import TooDeep, load_yaml
from bench.core.yamlfile import read_yaml_text

API_KEY_ENV = "BENCH_API_KEY"

# The endpoint a test is sent to: Chat Completions, or the Responses API (the same request, translated).
APIS = ("chat", "responses")

# How `seed` is sent (docs/record.md, "Seeds"): per-epoch, epoch e sends seed + e (repeats are independent samples);
# fixed, every request of every epoch sends seed itself (the "same seed, N repeats: is the backend deterministic?"
# study).
SEED_MODES = ("per-epoch", "fixed")

# Request fields a run's `params` cannot set: the catalog, the run's own keys or the driver decide them.
RESERVED_PARAMS = {
    "model": "the run's models",
    "messages": "the catalog's tests",
    "input": "the catalog's tests",
    "tools": "the catalog's tests",
    "stream": "the key 'stream'",
    "stream_options": "the key 'stream'",
    "temperature": "the key 'temperature'",
    "seed": "the keys 'seed' and 'seed_mode'",
    "max_tokens": "the key 'max_tokens_default'",
    "max_completion_tokens": "the key 'max_tokens_default'",
    "max_output_tokens": "the key 'max_tokens_default'",
}

_POSITIVE_NUMBER = {"type": "number", "exclusiveMinimum": 0}
_MODEL_MAP_INT = {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}}
_MODEL_MAP_NUM = {"type": "object", "additionalProperties": _POSITIVE_NUMBER}
_STRINGS = {"type": "array", "items": {"type": "string", "minLength": 1}}

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "upstream": {"type": "string", "pattern": "^https?://"},
        "api_key": {"type": "string"},
        # A model listed twice would send every request twice, and its report would count the copies as retries.
        "models": {**_STRINGS, "minItems": 1, "uniqueItems": True},
        "suites": _STRINGS,
        "categories": _STRINGS,
        "tests": _STRINGS,
        "epochs": {"type": "integer", "minimum": 1},
        "concurrency": {"type": "integer", "minimum": 1},
        "model_concurrency": _MODEL_MAP_INT,
        "request_timeout": _POSITIVE_NUMBER,
        "model_timeouts": _MODEL_MAP_NUM,
        "idle_timeout": _POSITIVE_NUMBER,
        "max_retries": {"type": "integer", "minimum": 0},
        "retry_timeouts": {"type": "boolean"},
        "backoff_base": {"type": "number", "minimum": 0},
        "backoff_max": {"type": "number", "minimum": 0},
        "retry_after_max": {"type": "number", "minimum": 0},
        "temperature": {"type": ["number", "null"], "minimum": 0},
        "seed": {"type": ["integer", "null"]},
        "seed_mode": {"enum": list(SEED_MODES)},
        "params": {"type": "object"},
        "max_tokens_default": {"type": ["integer", "null"], "minimum": 1},
        "stream": {"type": "boolean"},
        "api": {"enum": list(APIS)},
        "test_api": {"type": "object", "additionalProperties": {"enum": list(APIS)}},
        "out": {"type": "string", "minLength": 1},
        "catalog": {"type": "string", "minLength": 1},
        "proxy": {"type": ["string", "null"], "pattern": "^https?://"},
        "progress_every": {"type": "integer", "minimum": 1},
    },
}


@dataclass
class RecordConfig:
    upstream: str | None = None
    api_key: str | None = field(default=None, repr=False)
    models: list[str] = field(default_factory=list)
    suites: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)
    epochs: int = 1
    concurrency: int = 8
    model_concurrency: dict[str, int] = field(default_factory=dict)
    request_timeout: float = 600.0
    model_timeouts: dict[str, float] = field(default_factory=dict)
    idle_timeout: float = 120.0
    max_retries: int = 3
    # A request that timed out once usually times out again: retrying it only multiplies the wait.
    retry_timeouts: bool = False
    backoff_base: float = 1.0
    backoff_max: float = 30.0
    # The longest wait a server's Retry-After gets (a misconfigured gateway asking for an hour stalls the run).
    retry_after_max: float = 30.0
    temperature: float | None = None
    seed: int | None = None
    seed_mode: str = "per-epoch"
    # Request fields sent with every request of the run, under each test's own params (a test's value wins).
    params: dict[str, Any] = field(default_factory=dict)
    # Why 4096 and not the Go seed's 40000: docs/record.md, "Defaults and why".
    max_tokens_default: int | None = 4096
    stream: bool = True
    api: str = "chat"
    test_api: dict[str, str] = field(default_factory=dict)  # test id -> api, over `api`
    out: str = "cassettes"
    catalog: str | None = None  # a catalog folder (suites; fixtures beside them), else the built-in one; --catalog
    proxy: str | None = None
    progress_every: int = 25

    def seed_for(self, epoch: int) -> int | None:
        """The seed epoch `epoch` sends (None: not sent)."""
        if self.seed is None:
            return None
        return self.seed if self.seed_mode == "fixed" else self.seed + epoch

    def api_for(self, test_id: str) -> str:
        return self.test_api.get(test_id, self.api)

    def timeout_for(self, model: str) -> float:
        return self.model_timeouts.get(model, self.request_timeout)

    def public(self) -> dict[str, Any]:
        """The config as recorded in the cassette header and shown to users: never the key."""
        data = dataclasses.asdict(self)
        data.pop("api_key")
        data["api_key_set"] = self.api_key is not None
        return data


def _field_path(error: jsonschema.ValidationError) -> str:
    parts = [str(p) for p in error.absolute_path]
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set((error.schema.get("properties") or {}) if isinstance(error.schema, dict) else ())
        extra = sorted(k for k in error.instance if k not in allowed)
        if extra:
            parts.append(str(extra[0]))
    return ".".join(parts) or "(top level)"


def _describe(error: jsonschema.ValidationError) -> str:
    if error.validator == "uniqueItems":
        twice = ", ".join(repeated(error.instance))
        return f"lists {twice} more than once; list each model once (epochs: N repeats every test)"
    if error.validator == "additionalProperties":
        return f"unknown key; allowed keys: {', '.join(sorted(CONFIG_SCHEMA['properties']))}"
    if error.validator == "pattern":
        return f"{error.instance!r} is not an http(s):// URL"
    # jsonschema's own message quotes the offending value; it never sees the API key's field unless it is mistyped.
    return error.message if error.validator != "type" or "api_key" not in error.absolute_path else "must be a string"


def load_config_file(path: Path) -> dict[str, Any]:
    try:
        text = read_yaml_text(path, "config")
    except OSError as exc:
        raise BenchError(f"{path}: cannot read config: {exc.strerror}; pass an existing --config file") from None
    try:
        data = load_yaml(text)
    except TooDeep as exc:
        raise BenchError(f"{path}: {exc}; a config never needs that: flatten it") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise BenchError(f"{path}:{where}: {problem}; fix the YAML syntax") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BenchError(f"{path}: the config must be a mapping of keys (upstream, models, ...), not a list or text")
    errors = sorted(jsonschema.Draft202012Validator(CONFIG_SCHEMA).iter_errors(data), key=lambda e: e.path)
    if errors:
        err = errors[0]
        raise BenchError(f"{path}: field '{_field_path(err)}': {_describe(err)}")
    check_params(data.get("params") or {}, str(path))
    if "catalog" in data:
        # Relative to the file, as `bench init --with-tasks` writes it: the same run from any working directory.
        data["catalog"] = str(path.parent / data["catalog"])
    return data


def check_params(params: Mapping[str, Any], where: str) -> None:
    """Run-wide request params may set any field but those the run or the catalog decide (one line naming it)."""
    for key in params:
        if key in RESERVED_PARAMS:
            raise BenchError(f"{where}: field 'params.{key}': set by {RESERVED_PARAMS[key]}, not by params")


def build_config(
    file_values: Mapping[str, Any], flags: Mapping[str, Any], env: Mapping[str, str] | None = None
) -> RecordConfig:
    """Defaults, then the file, then flags that were given (not None); the environment's key over all."""
    environ: Mapping[str, str] = os.environ if env is None else env
    values: dict[str, Any] = dict(file_values)
    for key, value in flags.items():
        if value is not None and value != []:
            values[key] = value
    known = {f.name for f in dataclasses.fields(RecordConfig)}
    cfg = RecordConfig(**{k: v for k, v in values.items() if k in known})
    env_key = environ.get(API_KEY_ENV)
    if env_key:
        cfg.api_key = env_key
    return cfg


def repeated(items: Any) -> list[str]:
    """The items of a list that come more than once, each named once, in order."""
    names = [str(x) for x in items] if isinstance(items, list) else []
    return list(dict.fromkeys(x for i, x in enumerate(names) if x in names[:i]))


def check_ready(cfg: RecordConfig) -> None:
    twice = repeated(cfg.models)
    if twice:
        # Every way a config is made ends here: a repeated model never reaches the jobs (each is one per model).
        raise BenchError(f"models: {', '.join(twice)} listed more than once; list each model once (--epochs N repeats)")
    if cfg.upstream is None and cfg.proxy is None:
        raise BenchError("no upstream: pass --upstream URL or set 'upstream' in bench.yaml (or run `bench demo`)")
    if not cfg.models:
        raise BenchError("no models: pass --model M (repeatable) or set 'models' in bench.yaml")
    if cfg.seed_mode not in SEED_MODES:
        raise BenchError(f"seed_mode {cfg.seed_mode!r}: choose {' or '.join(SEED_MODES)}")
    check_params(cfg.params, "params")
