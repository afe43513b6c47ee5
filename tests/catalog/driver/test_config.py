"""bench.yaml: one-line errors naming the file and the field; flags win; BENCH_API_KEY wins and is never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.catalog.driver.config import build_config, load_config_file
from bench.core.errors import BenchError


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("concurrency: many\n", "concurrency"),
        ("concurency: 4\n", "concurency"),
        ("models: []\n", "models"),
        ("model_concurrency:\n  oracle: 0\n", "model_concurrency.oracle"),
        ("model_timeouts:\n  m: -1\n", "model_timeouts.m"),
        ("upstream: localhost:8000\n", "upstream"),
        ("epochs: 1.5\n", "epochs"),
    ],
)
def test_bad_fields_are_named(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "bench.yaml"
    path.write_text(text)
    with pytest.raises(BenchError) as info:
        load_config_file(path)
    msg = str(info.value)
    assert "\n" not in msg and str(path) in msg and f"'{field}'" in msg


def test_bad_yaml_and_non_mapping(tmp_path: Path) -> None:
    path = tmp_path / "bench.yaml"
    path.write_text("models: [a, b\n")
    with pytest.raises(BenchError, match=r"bench\.yaml: line \d+"):
        load_config_file(path)
    path.write_text("- a\n- b\n")
    with pytest.raises(BenchError, match="mapping"):
        load_config_file(path)
    with pytest.raises(BenchError, match="cannot read"):
        load_config_file(tmp_path / "missing.yaml")


def test_flags_win_and_env_key_wins_but_is_never_public(tmp_path: Path) -> None:
    path = tmp_path / "bench.yaml"
    path.write_text("upstream: http://a:1\nmodels: [m1]\nconcurrency: 3\napi_key: sk-file-secret\nepochs: 2\n")
    cfg = build_config(load_config_file(path), {"concurrency": 5, "models": None}, env={"BENCH_API_KEY": "sk-env"})
    assert (cfg.concurrency, cfg.models, cfg.epochs, cfg.api_key) == (5, ["m1"], 2, "sk-env")
    public = cfg.public()
    assert "sk-" not in repr(public) and "sk-" not in repr(cfg) and public["api_key_set"] is True
    assert build_config({"api_key": "sk-file"}, {}, env={}).api_key == "sk-file"


def test_a_config_that_repeats_a_model_never_reaches_the_jobs() -> None:
    """Whatever made the config (flags, a file, a resumed run's header), a repeated model is refused at the gate."""
    from bench.catalog.driver.config import check_ready

    cfg = build_config({"models": ["a", "b", "a", "b"]}, {"upstream": "http://127.0.0.1:1"})
    with pytest.raises(BenchError, match=r"^models: a, b listed more than once; list each model once"):
        check_ready(cfg)


def test_seed_mode_params_and_categories_are_read_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bench.yaml"
    path.write_text(
        "seed: 7\nseed_mode: fixed\ncategories: [tool_calling]\nparams: {top_p: 0.9, reasoning_effort: low}\n"
    )
    cfg = build_config(load_config_file(path), {}, env={})
    assert (cfg.seed, cfg.seed_mode, cfg.categories) == (7, "fixed", ["tool_calling"])
    assert cfg.params == {"top_p": 0.9, "reasoning_effort": "low"}
    assert [cfg.seed_for(e) for e in (0, 3)] == [7, 7]
    # Without seed_mode, a file's seed keeps its meaning: epoch e sends seed + e.
    assert [build_config({"seed": 7}, {}, env={}).seed_for(e) for e in (0, 3)] == [7, 10]
    assert build_config({}, {}, env={}).seed_for(2) is None


@pytest.mark.parametrize(
    ("text", "field", "says"),
    [
        ("params: {temperature: 0.2}\n", "params.temperature", "the key 'temperature'"),
        ("params: {max_tokens: 99}\n", "params.max_tokens", "max_tokens_default"),
        ("params: {messages: []}\n", "params.messages", "the catalog's tests"),
        ("params: [top_p]\n", "params", "object"),
        ("seed_mode: random\n", "seed_mode", "per-epoch"),
    ],
)
def test_params_and_seed_mode_mistakes_are_one_line(tmp_path: Path, text: str, field: str, says: str) -> None:
    path = tmp_path / "bench.yaml"
    path.write_text(text)
    with pytest.raises(BenchError) as info:
        load_config_file(path)
    msg = str(info.value)
    assert "\n" not in msg and f"'{field}'" in msg and says in msg
