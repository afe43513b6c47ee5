"""`bench export`: scores and recordings in the formats other tools read (docs/export.md).

`tables` writes results and exchanges as Parquet or CSV (pyarrow), `otlp` sends or writes OpenTelemetry GenAI spans
and metrics (the OpenTelemetry SDK and its OTLP exporters). Each needs its extra; `extra` says which when it is
missing.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from bench.core.errors import BenchError


def extra(module: str, name: str, what: str) -> ModuleType:
    """`module`, imported; a one-line BenchError naming the extra to install when it is not there."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise BenchError(f"{what} needs the '{name}' extra: pip install 'llm-gateway-bench[{name}]'") from None
