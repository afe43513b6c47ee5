"""`bench doctor`: probe an OpenAI-compatible gateway for what `bench record` relies on."""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "doctor",
        help="probe a gateway: models list, streaming, tool calls, usage, system_fingerprint",
        description="Probe an OpenAI-compatible gateway for what `bench record` relies on; prints a checklist.",
    )
    p.add_argument("--upstream", required=True, help="gateway base URL")
    p.add_argument("--model", help="model to try (default: the first listed)")
    p.set_defaults(handler=run_doctor)


def run_doctor(args: argparse.Namespace) -> int:
    from bench.catalog.driver.config import API_KEY_ENV
    from bench.catalog.driver.doctor import diagnose, render

    checks = asyncio.run(diagnose(args.upstream, os.environ.get(API_KEY_ENV) or None, args.model))
    print(render(checks))
    return 0 if all(c.ok or not c.required for c in checks) else 1
