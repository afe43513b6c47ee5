"""docs/architecture.md is the maintainers' map: every file and module it names exists, and it names every package."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = ("bench", "catalog", "proxy", "scorer")
# A repository path: a top-level folder of the project, then a path, in backticks or in the drawing.
PATH = re.compile(r"\b((?:bench|catalog|proxy|scorer|tests|docs|benchmarks|scripts)/[\w./<>-]*)")
# A dotted module name in backticks, e.g. `bench.scorer.pipeline`.
MODULE = re.compile(r"`((?:bench|catalog|proxy|scorer)(?:\.\w+)+)`")


def named_paths(text: str) -> set[str]:
    paths = set()
    for match in PATH.finditer(text):
        path = match.group(1).rstrip(".,;:)")
        if "<" in path:  # a pattern such as scorer/evaluators/<group>.py: its folder must exist
            path = path[: path.rindex("/", 0, path.index("<")) + 1]
        paths.add(path)
    return paths


def test_every_named_path_exists() -> None:
    text = DOC.read_text(encoding="utf-8")
    paths = named_paths(text)
    assert len(paths) > 40  # the doc names the pipeline's modules, not a handful of folders
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_named_module_exists() -> None:
    text = DOC.read_text(encoding="utf-8")
    missing = []
    for match in MODULE.finditer(text):
        base = ROOT.joinpath(*match.group(1).split("."))
        if not (base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()):
            missing.append(match.group(1))
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def test_every_package_is_named() -> None:
    text = DOC.read_text(encoding="utf-8")
    packages = sorted(
        init.parent.relative_to(ROOT).as_posix() + "/"
        for top in PACKAGES
        for init in (ROOT / top).rglob("__init__.py")
        if "data" not in init.relative_to(ROOT).parts
    )
    unnamed = [p for p in packages if p not in text]
    assert not unnamed, f"docs/architecture.md does not say where these packages fit: {unnamed}"


def test_paths_are_checked() -> None:
    # The checker itself: a name that does not exist is caught, and a pattern keeps its folder.
    assert named_paths("see `scorer/nope.py`, scorer/evaluators/<group>.py, scorer/report/render_<f>.py") == {
        "scorer/nope.py",
        "scorer/evaluators/",
        "scorer/report/",
    }


def test_every_bare_file_name_exists() -> None:
    # The drawing names modules by file name under their package (`record_run.py` under catalog/driver/): each such
    # name must be a file of the project (file names are unique, apart from the few the doc's rules allow).
    text = DOC.read_text(encoding="utf-8")
    names = {m.group(1) for m in re.finditer(r"(?<![/\w])(\w+\.py)\b", text)}
    assert len(names) > 15
    files = {f.name for top in PACKAGES for f in (ROOT / top).rglob("*.py")}
    missing = sorted(names - files)
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"


def test_the_layers_drawn_are_the_ones_import_linter_enforces() -> None:
    import tomllib

    text = DOC.read_text(encoding="utf-8")
    block = text.split("<!-- layers:", 1)[1].split("```", 2)[1]
    drawn = [line.split("  ", 1)[0].strip() for line in block.strip().splitlines()]
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in config if c["type"] == "layers"]
    assert drawn == layers


def test_every_command_module_is_named() -> None:
    text = DOC.read_text(encoding="utf-8")
    commands = sorted(p.name for p in (ROOT / "bench" / "cli").glob("*_command.py"))
    assert len(commands) >= 10
    assert [c for c in commands if c not in text] == []
