"""Refusing every connection off the machine's loopback while a test replays.

`socket.socket.connect`/`connect_ex` are replaced for the test (asyncio, httpx, aiohttp, urllib and the openai SDK all
connect through them): loopback (127.0.0.0/8, ::1) and Unix sockets pass, anything else fails the test at once. The
failure is pytest's own (`pytest.fail`), a BaseException, so an SDK's retry loop (which catches Exception) cannot turn
it into three slow attempts and a vague connection error; it is also noted, so a test that swallows it still fails.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any

import pytest

_REAL_CONNECT = socket.socket.connect
_REAL_CONNECT_EX = socket.socket.connect_ex


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

    def _check(self, sock: socket.socket, address: Any) -> None:
        if is_loopback(sock.family, address):
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
            check(sock, address)
            _REAL_CONNECT(sock, address)

        def connect_ex(sock: socket.socket, address: Any) -> int:
            check(sock, address)
            return _REAL_CONNECT_EX(sock, address)

        _set(connect, connect_ex)

    def remove(self) -> None:
        _set(_REAL_CONNECT, _REAL_CONNECT_EX)
        socket.getaddrinfo = self._getaddrinfo


def _set(connect: Callable[..., None], connect_ex: Callable[..., int]) -> None:
    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
