"""`bench proxy`: an aiohttp reverse proxy for OpenAI-compatible APIs that records exchanges into cassettes.

The public names load lazily so that `bench --help` and the scorer's commands (which import `proxy.proxy_command` to
register it) never pull in aiohttp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from proxy.app import ClientLimits
    from proxy.modes import MODES
    from proxy.server import RunningProxy, start_proxy
    from proxy.state import ProxyStats

__all__ = ["MODES", "ClientLimits", "ProxyStats", "RunningProxy", "start_proxy"]

_HOMES = {
    "ClientLimits": "proxy.app",
    "RunningProxy": "proxy.server",
    "start_proxy": "proxy.server",
    "MODES": "proxy.modes",
    "ProxyStats": "proxy.state",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'proxy' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(home), name)
