"""A user's YAML file (a rules file, a price table) read, depth-checked and validated, every problem one line.

Each problem is a BenchError naming the file and, for a schema error, the field, with the fix: the CLI prints it as
it is. Nesting is bounded by bench.core.nesting before anything recursive (yaml, jsonschema) walks the document.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import yaml

from bench.core.errors import BenchError
from bench.core.nesting import TooDeep, load_yaml

# The largest YAML file bench reads (a rules file, a price table, bench.yaml, a catalog suite; the built-in suites are
# 13 KB at most). A 31 MB file took past 60 s and 1.1 GB to parse: past the bound it is refused unread.
MAX_YAML_BYTES = 4 << 20


def read_yaml_text(path: Path, what: str) -> str:
    """The text of a user's YAML file, at most MAX_YAML_BYTES, decoded as UTF-8: BenchError (one line naming the file
    and the fix) when it is larger or not UTF-8; OSError when it cannot be read."""
    with Path(path).open("rb") as fh:
        data = fh.read(MAX_YAML_BYTES + 1)
    if len(data) > MAX_YAML_BYTES:
        raise BenchError(f"{path}: {what} larger than {MAX_YAML_BYTES >> 20} MiB, not read; split it or trim it")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BenchError(f"{path}: {what} is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None


def load_checked_yaml(path: Path, schema: dict[str, Any], *, what: str, flag: str, doc: str) -> Any:
    """The document in `path`, valid against `schema`; `what` names the file's kind, `flag` the option that gave it
    and `doc` where its format is documented, for the messages."""
    try:
        data = load_yaml(read_yaml_text(path, what))
    except OSError as exc:
        raise BenchError(f"{path}: cannot read {what}: {exc.strerror}; pass an existing {flag} file") from None
    except TooDeep as exc:
        raise BenchError(f"{path}: {exc}; a {what} never needs that: flatten it") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}:" if mark is not None else ""
        raise BenchError(f"{path}:{where} {getattr(exc, 'problem', None) or 'invalid YAML'}; fix the YAML") from None
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(data))
    if error is not None:
        field = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        raise BenchError(f"{path}: field '{field}': {error.message}; see {doc}")
    return data
