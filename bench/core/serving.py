"""Starting an aiohttp server on a host and port, shared by the proxy and the simulator.

Lives in the core for both of them; the scorer never imports it (it is the one core module that imports aiohttp).
"""

from __future__ import annotations

import errno
import socket

from aiohttp import web

from bench.core.errors import BenchError

# aiohttp's default backlog of 128 overflows when hundreds of clients connect at once (docs/proxy.md, "Measured facts").
LISTEN_BACKLOG = 2048


def check_port(port: int) -> None:
    if not 0 <= port <= 65535:
        raise BenchError(f"--port {port}: give a port from 1 to 65535, or 0 for any free one")


Address = tuple[socket.AddressFamily, socket.SocketKind, int, tuple[object, ...]]


def address_of(host: str, port: int) -> Address:
    """Family, type, protocol and address to listen on host:port; a port out of range or a host this machine does
    not have is one line naming it and the fix."""
    check_port(port)
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (socket.gaierror, UnicodeError):
        raise BenchError(
            f"--host {host}: not an address of this machine; give an IP address or a name it has"
        ) from None
    return family, kind, proto, tuple(address)


def cannot_listen(host: str, port: int, exc: OSError) -> BenchError:
    why = "already in use by another program" if exc.errno == errno.EADDRINUSE else exc.strerror
    return BenchError(f"cannot listen on {host}:{port}: {why}; choose another --port (0: any free one) or --host")


def reserve(host: str, port: int) -> socket.socket:
    """A socket listening on host:port now, before any slow work (`bench view` loads its results after): a port out
    of range, in use or not allowed, or a host this machine does not have, is one line naming it and the fix."""
    family, kind, proto, address = address_of(host, port)
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        raise cannot_listen(host, port, exc) from None
    sock.setblocking(False)
    return sock


async def listen(app: web.Application | web.Server, host: str, port: int) -> tuple[web.BaseRunner, web.TCPSite, str]:
    """Serve `app` (an application, or a low-level server as the proxy runs); returns the runner, the site and the
    base URL with the port actually bound (port 0: any)."""
    check_port(port)  # out of range: aiohttp would raise OverflowError, a traceback
    runner: web.BaseRunner
    if isinstance(app, web.Application):
        runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0)
    else:
        runner = web.ServerRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=LISTEN_BACKLOG)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise BenchError(f"cannot listen on {host}:{port}: {exc.strerror}; choose another --port or --host") from None
    bound = runner.addresses[0]
    return runner, site, f"http://{host if ':' not in host else f'[{host}]'}:{bound[1]}"


async def serve_on(app: web.Server, sock: socket.socket) -> tuple[web.BaseRunner, web.SockSite, str]:
    """Serve `app` on a socket already listening (one worker's of several sharing a port); returns the runner, the
    site and the base URL."""
    runner = web.ServerRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    site = web.SockSite(runner, sock)
    await site.start()
    host, port = sock.getsockname()[:2]
    return runner, site, f"http://{host if ':' not in host else f'[{host}]'}:{port}"
