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

    def _check(self, sock: socket.socket, address: Any) -> None:
        if is_loopback(sock.family, address):
            return
        where = f"{address[0]}:{address[1]}" if isinstance(address, tuple) and len(address) >= 2 else str(address)
        message = (
            f"bench: {self.test} tried to connect to {where}, off this machine, while it replays from its cassette "
            f"(nothing may reach the network); {self.fix}"
        )
        self.blocked.append(message)
        pytest.fail(message, pytrace=False)

    def install(self) -> None:
        check = self._check

        def connect(sock: socket.socket, address: Any) -> None:
            check(sock, address)
            _REAL_CONNECT(sock, address)

        def connect_ex(sock: socket.socket, address: Any) -> int:
            check(sock, address)
            return _REAL_CONNECT_EX(sock, address)

        _set(connect, connect_ex)

    def remove(self) -> None:
        _set(_REAL_CONNECT, _REAL_CONNECT_EX)


def _set(connect: Callable[..., None], connect_ex: Callable[..., int]) -> None:
    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
