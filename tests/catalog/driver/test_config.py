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
