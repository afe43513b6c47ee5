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


def load_checked_yaml(path: Path, schema: dict[str, Any], *, what: str, flag: str, doc: str) -> Any:
    """The document in `path`, valid against `schema`; `what` names the file's kind, `flag` the option that gave it
    and `doc` where its format is documented, for the messages."""
    try:
        data = load_yaml(Path(path).read_text(encoding="utf-8"))
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
