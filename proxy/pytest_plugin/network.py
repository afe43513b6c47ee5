"""Refusing every connection off the machine's loopback while a test replays (docs/pytest.md says what is covered).

In the test's process, `socket.socket.connect`/`connect_ex` (asyncio, httpx, aiohttp, urllib, requests and the openai
SDK all connect through them) and `sendto`/`sendmsg` (UDP without a connect) are replaced for the test, and
`_socket.socket`, the C type under `socket.socket`, is swapped for a checked subclass, so code that builds its
socket from `_socket` is checked too. Loopback (127.0.0.0/8, ::1) and Unix sockets pass, anything else fails the
test at once. The failure is pytest's own (`pytest.fail`), a BaseException, so an SDK's retry loop (which catches
Exception) cannot turn it into three slow attempts and a vague connection error; it is also noted, so a test that
swallows it still fails.

Not covered in-process: subprocesses (curl, another Python), C extensions and ctypes calling the C library, and
sockets made before the test began. The stronger opt-in, `--bench-netns`, runs the whole pytest session in a network
namespace of its own (bench.proxy.pytest_plugin.netns): there nothing but its own loopback exists, for any process.
"""

from __future__ import annotations

import _socket
import ipaddress
import socket
from collections.abc import Callable
from typing import Any

import pytest

_REAL_CONNECT = socket.socket.connect
_REAL_CONNECT_EX = socket.socket.connect_ex
_REAL_SENDTO = socket.socket.sendto
_REAL_SENDMSG = socket.socket.sendmsg
_REAL_C_SOCKET = _socket.socket


def is_loopback(family: int, address: Any) -> bool:
    if family == getattr(socket, "AF_UNIX", None):
        return True
    if not isinstance(address, tuple) or not address:
        return False
    host = str(address[0])
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        pass
    try:  # a host name: allowed only if every address it names is loopback
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]).is_loopback for info in infos)


class NetworkBlock:
    """While installed, non-loopback connects fail; `blocked` lists what was refused."""

    def __init__(self, test: str, fix: str) -> None:
        self.test = test
        self.fix = fix
        self.blocked: list[str] = []
        self.names: dict[str, str] = {}  # address -> the host name it was looked up by, while installed
        self._getaddrinfo: Callable[..., Any] = socket.getaddrinfo  # the one in place when installed

    def _lookup(self, host: Any, *args: Any, **kwargs: Any) -> Any:
        """getaddrinfo, noting which name each address came from: a connect sees only the address."""
        infos = self._getaddrinfo(host, *args, **kwargs)
        if isinstance(host, str | bytes):
            name = host.decode() if isinstance(host, bytes) else host
            for info in infos:
                self.names.setdefault(str(info[4][0]), name)
        return infos

    def _check(self, family: int, address: Any) -> None:
        if is_loopback(family, address):
            return
        if isinstance(address, tuple) and len(address) >= 2:
            name = self.names.get(str(address[0]))
            where = (
                f"{name} ({address[0]}:{address[1]})" if name and name != address[0] else f"{address[0]}:{address[1]}"
            )
        else:
            where = str(address)
        message = (
            f"bench: {self.test} tried to connect to {where}, off this machine, while it replays from its cassette "
            f"(nothing may reach the network). If the test's own request went out: {self.fix}. If a library reaches "
            "out by itself (litellm fetches its model price table when imported), allow it: mark the test "
            "bench(allow_network=True), or switch the library offline (litellm: LITELLM_LOCAL_MODEL_COST_MAP=True)"
        )
        self.blocked.append(message)
        pytest.fail(message, pytrace=False)

    def install(self) -> None:
        check = self._check
        self._getaddrinfo = socket.getaddrinfo
        socket.getaddrinfo = self._lookup

        def connect(sock: socket.socket, address: Any) -> None:
            check(sock.family, address)
            _REAL_CONNECT(sock, address)

        def connect_ex(sock: socket.socket, address: Any) -> int:
            check(sock.family, address)
            return _REAL_CONNECT_EX(sock, address)

        def sendto(sock: socket.socket, data: Any, *args: Any) -> int:
            check(sock.family, args[-1])  # sendto(data, address) or sendto(data, flags, address)
            return _REAL_SENDTO(sock, data, *args)

        def sendmsg(sock: socket.socket, buffers: Any, *args: Any) -> int:
            if len(args) >= 3 and args[2] is not None:  # sendmsg(buffers, ancdata, flags, address)
                check(sock.family, args[2])
            return _REAL_SENDMSG(sock, buffers, *args)

        class CheckedSocket(_REAL_C_SOCKET):
            """`_socket.socket` as code that bypasses `socket.socket` gets it while the block is on."""

            def connect(self, address: Any) -> None:
                check(self.family, address)
                super().connect(address)

            def connect_ex(self, address: Any) -> int:
                check(self.family, address)
                return int(super().connect_ex(address))

            def sendto(self, data: Any, *args: Any) -> int:
                check(self.family, args[-1])
                return int(super().sendto(data, *args))

        _set(connect, connect_ex, sendto, sendmsg, CheckedSocket)

    def remove(self) -> None:
        _set(_REAL_CONNECT, _REAL_CONNECT_EX, _REAL_SENDTO, _REAL_SENDMSG, _REAL_C_SOCKET)
        socket.getaddrinfo = self._getaddrinfo


def _set(
    connect: Callable[..., None],
    connect_ex: Callable[..., int],
    sendto: Callable[..., int],
    sendmsg: Callable[..., int],
    c_socket: type[_socket.socket],
) -> None:
    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    socket.socket.sendto = sendto  # type: ignore[method-assign]
    socket.socket.sendmsg = sendmsg  # type: ignore[method-assign]
    _socket.socket = c_socket  # type: ignore[misc]
