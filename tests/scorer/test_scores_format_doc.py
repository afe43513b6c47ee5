"""docs/scores-format.md's field tables and scorer/results.py say the same thing."""

from __future__ import annotations

import msgspec
import pytest

from bench.core.cassette.records import RunMeta, Settings
from bench.scorer.results import CassetteInfo, CheckScore, ExchangeScore, Meta, Result
from tests.support.doc_tables import ROOT, doc_tables, mismatches, struct_fields

DOC = ROOT / "docs" / "scores-format.md"


@pytest.mark.parametrize(
    ("heading", "struct"),
    [
        ("meta fields", Meta),
        ("meta.cassettes[] fields", CassetteInfo),
        ("result fields", Result),
        ("result.checks[] fields", CheckScore),
        ("result.exchanges[] fields", ExchangeScore),
    ],
)
def test_every_documented_field_exists_with_its_type_and_every_field_is_documented(
    heading: str, struct: type[msgspec.Struct]
) -> None:
    # A cassette's settings and run metadata are the cassette header's, documented in docs/cassette-format.md.
    assert mismatches(doc_tables(DOC)[heading], struct, elsewhere=("settings", "run_meta", "server")) == []


def test_the_lists_of_structs_are_the_tables_given_for_them() -> None:
    fields = struct_fields(Meta)
    assert fields["cassettes"] == "[map, …]" and fields["budgets.deadline_s"] == "float or nil"
    assert struct_fields(Result)["checks"] == "[map, …]" == struct_fields(Result)["exchanges"]
    cassette = struct_fields(CassetteInfo)
    assert cassette["settings.mode"] == struct_fields(Settings)["mode"]
    assert cassette["run_meta.id"] == struct_fields(RunMeta)["id"]
