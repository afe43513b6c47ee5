"""`bench proxy`: an aiohttp reverse proxy for OpenAI-compatible APIs that records exchanges into cassettes.

The public names load lazily so that `bench --help` and the scorer's commands (which import `bench.cli.proxy_command` to
register it) never pull in aiohttp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.proxy.app import ClientLimits
    from bench.proxy.modes import MODES
    from bench.proxy.server import RunningProxy, start_proxy
    from bench.proxy.state import ProxyStats

__all__ = ["MODES", "ClientLimits", "ProxyStats", "RunningProxy", "start_proxy"]

_HOMES = {
    "ClientLimits": "bench.proxy.app",
    "RunningProxy": "bench.proxy.server",
    "start_proxy": "bench.proxy.server",
    "MODES": "bench.proxy.modes",
    "ProxyStats": "bench.proxy.state",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'bench.proxy' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(home), name)
