"""scripts/mutation keeps its list of equivalent mutants true when a change to a function renumbers mutmut's mutants:
each entry names the change it was judged for, and is found again by that change."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import tomllib
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "mutation"


def _script() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("mutation_script", str(SCRIPT))
    spec = importlib.util.spec_from_loader("mutation_script", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


# The shape mutmut writes: the original function and each mutant as functions named after it.
MUTANTS = """
def x_clamp__mutmut_orig(value, low=0, high=10):
    if value < low:
        return low
    return min(value, high)
def x_clamp__mutmut_1(value, low=1, high=10):
    if value < low:
        return low
    return min(value, high)
def x_clamp__mutmut_2(value, low=0, high=10):
    if value <= low:
        return low
    return min(value, high)
def x_clamp__mutmut_3(value, low=0, high=10):
    if value < low:
        return low
    return min(value, None)
"""


def _mutants(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "mutants" / "pkg" / "calc.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return tmp_path


def test_each_mutant_is_told_by_its_change_and_the_def_line_counts(tmp_path: Path) -> None:
    made = _script().changes(_mutants(tmp_path, MUTANTS), ["pkg/calc.py"])
    assert made == {
        "pkg.calc.x_clamp__mutmut_1": "def x_clamp(value, low=0, high=10): -> def x_clamp(value, low=1, high=10):",
        "pkg.calc.x_clamp__mutmut_2": "if value < low: -> if value <= low:",
        "pkg.calc.x_clamp__mutmut_3": "return min(value, high) -> return min(value, None)",
    }


def test_a_renumbered_equivalent_is_found_again_and_a_vanished_one_is_counted(tmp_path: Path) -> None:
    script = _script()
    listed = [
        "pkg.calc.x_clamp__mutmut_2 | if value < low: -> if value <= low:",
        "pkg.calc.x_clamp__mutmut_3 | return min(value, high) -> return min(value, None)",
    ]
    made = script.changes(_mutants(tmp_path, MUTANTS), ["pkg/calc.py"])
    assert script.resolve_equivalents(listed, made) == (
        {"pkg.calc.x_clamp__mutmut_2", "pkg.calc.x_clamp__mutmut_3"},
        [],
        [],
    )
    # A new mutant in front renumbers the others, and the function no longer has its `min`: number 2 is now another
    # mutant (not skipped as equivalent), the `<=` one is found under 3, and the `None` one is gone.
    edited = MUTANTS.replace("min(value, high)", "value if value < high else high").replace(
        "min(value, None)", "value if value < high else None"
    )
    edited = (
        edited.replace("_mutmut_3", "_mutmut_4").replace("_mutmut_2", "_mutmut_3").replace("_mutmut_1", "_mutmut_2")
    )
    edited += "def x_clamp__mutmut_1(value, low=0, high=11):\n    if value < low:\n        return low\n"
    edited += "    return value if value < high else high\n"
    made = script.changes(_mutants(tmp_path, edited), ["pkg/calc.py"])
    equivalent, moved, gone = script.resolve_equivalents(listed, made)
    assert equivalent == {"pkg.calc.x_clamp__mutmut_3"}
    assert moved == ["pkg.calc.x_clamp__mutmut_2 -> pkg.calc.x_clamp__mutmut_3"]
    assert gone == [listed[1]]


def test_every_listed_equivalent_names_the_change_it_was_judged_for() -> None:
    config = tomllib.loads((SCRIPT.parent / "mutation.toml").read_text())
    for name, module in config["modules"].items():
        for entry in module.get("equivalent", []):
            mutant, sep, change = entry.partition(" | ")
            assert sep and " -> " in change, (
                f"{name}: {entry!r} lacks its change (paste the line scripts/mutation prints)"
            )
            assert mutant.rpartition("__mutmut_")[2].isdigit(), entry
