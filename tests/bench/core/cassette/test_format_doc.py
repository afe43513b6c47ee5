"""docs/cassette-format.md's field tables and bench/core/cassette/records.py say the same thing."""

from __future__ import annotations

import msgspec
import pytest

from bench.core.cassette.records import End, Exchange, Header, Part, ServedModel
from tests.support.doc_tables import ROOT, doc_tables, mismatches, struct_fields

DOC = ROOT / "docs" / "cassette-format.md"


@pytest.mark.parametrize(
    ("heading", "struct"),
    [
        ("header", Header),
        ("header.server.models[]", ServedModel),
        ("exchange", Exchange),
        ("end", End),
        ("part", Part),
    ],
)
def test_every_documented_field_exists_with_its_type_and_every_field_is_documented(
    heading: str, struct: type[msgspec.Struct]
) -> None:
    assert mismatches(doc_tables(DOC)[heading], struct) == []


def test_the_check_itself_catches_a_difference() -> None:
    table = dict(doc_tables(DOC)["header"])
    table["settings.mode"] = "int"
    del table["run.id"]
    table["run.ghost"] = "str"
    table["run.source"] = "str"  # an optional field documented as always written
    assert sorted(mismatches(table, Header)) == [
        "run.ghost: documented, but Header has no such field",
        "run.id: a field of Header missing from the document",
        "run.source: documented as 'str', Header says 'str, optional'",
        "settings.mode: documented as 'int', Header says 'str or nil'",
    ]
    assert struct_fields(End)["interrupted"] == "bool, optional"
