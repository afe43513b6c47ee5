"""The field tables of a format document, compared with the msgspec Structs that define the format.

A table is the first markdown table after a heading; its rows are `| field | type | meaning |`, nested fields dotted
(`request.method`). Types are written in the documents' vocabulary: str, int, bool, number, bin, map, `[X, …]`,
`X or nil`. A type may be followed by `, optional`: a field some writers leave out (UNSET in the Struct, so that a
record read and written again keeps it absent).
"""

from __future__ import annotations

from pathlib import Path

import msgspec
from msgspec import inspect as mi

ROOT = Path(__file__).resolve().parents[2]


def doc_tables(doc: Path) -> dict[str, dict[str, str]]:
    """Heading -> {field: type} for every table in the document."""
    tables: dict[str, dict[str, str]] = {}
    heading = ""
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) < 2 or cells[0] in ("field", "") or set(cells[0]) <= {"-"}:
            continue
        kind = cells[1]
        tables.setdefault(heading, {})[cells[0]] = kind
    return tables


def _name(t: mi.Type) -> str:
    if isinstance(t, mi.UnionType):
        kinds = [k for k in t.types if not isinstance(k, mi.NoneType)]
        numbers = {type(k) for k in kinds} == {mi.IntType, mi.FloatType}
        base = "number" if numbers else " or ".join(_name(k) for k in kinds)
        return f"{base} or nil" if len(kinds) < len(t.types) else base
    if isinstance(t, mi.ListType):
        if isinstance(t.item_type, mi.ListType) and isinstance(t.item_type.item_type, mi.StrType):
            return "[[name, value], …]"
        return f"[{_name(t.item_type)}, …]"
    names = {
        mi.StrType: "str",
        mi.IntType: "int",
        mi.FloatType: "float",
        mi.BoolType: "bool",
        mi.BytesType: "bin",
        mi.DictType: "map",
        mi.StructType: "map",
    }
    return names.get(type(t), type(t).__name__)


def struct_fields(struct: type[msgspec.Struct], prefix: str = "") -> dict[str, str]:
    """Every field of the Struct and of the Structs inside it, dotted, with its type in the documents' words; a
    tagged Struct's tag field too."""
    info = mi.type_info(struct)
    assert isinstance(info, mi.StructType)
    out: dict[str, str] = {}
    if info.tag_field is not None and not prefix:
        out[info.tag_field] = "str"
    names = struct.__struct_fields__
    defaults = dict(zip(names[len(names) - len(struct.__struct_defaults__) :], struct.__struct_defaults__, strict=True))
    for field in info.fields:
        name = prefix + field.encode_name
        out[name] = _name(field.type) + (", optional" if defaults.get(field.name) is msgspec.UNSET else "")
        inner = field.type
        if isinstance(inner, mi.UnionType):
            structs = [k for k in inner.types if isinstance(k, mi.StructType)]
            inner = structs[0] if len(structs) == 1 else inner
        if isinstance(inner, mi.StructType):
            out.update(struct_fields(inner.cls, name + "."))
    return out


def mismatches(documented: dict[str, str], struct: type[msgspec.Struct], elsewhere: tuple[str, ...] = ()) -> list[str]:
    """Differences in words: fields documented but missing or of another type, fields not documented. A struct
    documented only through its sub-fields (request.method…) needs no row of its own; the sub-fields of the names in
    `elsewhere` are documented in another table or document."""
    actual = {
        name: kind
        for name, kind in struct_fields(struct).items()
        if not name.startswith(tuple(f"{e}." for e in elsewhere))
    }
    problems = []
    for name, kind in documented.items():
        if name not in actual:
            problems.append(f"{name}: documented, but {struct.__name__} has no such field")
        elif actual[name] != kind:
            problems.append(f"{name}: documented as {kind!r}, {struct.__name__} says {actual[name]!r}")
    for name in actual:
        if name not in documented and not any(d.startswith(name + ".") for d in documented):
            problems.append(f"{name}: a field of {struct.__name__} missing from the document")
    return problems
