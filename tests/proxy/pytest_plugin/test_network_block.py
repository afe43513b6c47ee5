"""What the replay's network block covers (docs/pytest.md): in-process, connect and UDP sendto through `socket` and
through `_socket`; and `--bench-netns`, a network namespace for the whole session, which a subprocess cannot pass
either. The in-process tests run inside a network namespace made for them, so that nothing could leave the machine
even if the block failed."""

from __future__ import annotations

import shutil
import socket
import sys

import pytest

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (scripts/test installs it)")

pytest_plugins = ["pytester"]

NO_PLUGINS = ("-p", "no:cacheprovider", "-p", "no:randomly")


def test_udp_and_the_c_socket_type_are_blocked(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_net="""
        import _socket
        import socket
        import pytest

        @pytest.mark.bench
        def test_udp():
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("192.0.2.1", 53))

        @pytest.mark.bench
        def test_udp_with_flags():
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", 0, ("192.0.2.1", 123))

        @pytest.mark.bench
        def test_c_socket():
            s = _socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(1)
            s.connect(("192.0.2.1", 80))

        @pytest.mark.bench
        def test_udp_to_loopback_passes():
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", 9))

        def test_not_bench_is_left_alone():
            assert _socket.socket is socket.socket.__mro__[1]
        """
    )
    bwrap = ["bwrap", "--dev-bind", "/", "/", "--unshare-net", "--die-with-parent", "--"]
    result = pytester.run(*bwrap, sys.executable, "-m", "pytest", *NO_PLUGINS, "-rf", "test_net.py")
    result.assert_outcomes(failed=3, passed=2)
    out = result.stdout.str()
    for where in ("192.0.2.1:53", "192.0.2.1:123", "192.0.2.1:80"):
        assert f"tried to connect to {where}, off this machine" in out


@pytest.fixture
def loopback_service() -> tuple[socket.socket, int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    yield server, server.getsockname()[1]
    server.close()


def _accepted(server: socket.socket) -> int:
    n = 0
    while True:
        try:
            server.accept()[0].close()
            n += 1
        except BlockingIOError:
            return n


def test_bench_netns_holds_subprocesses_which_the_in_process_block_cannot(
    pytester: pytest.Pytester, loopback_service: tuple[socket.socket, int]
) -> None:
    server, port = loopback_service
    pytester.makepyfile(
        test_sub=f"""
        import subprocess, sys
        import pytest

        @pytest.mark.bench
        def test_a_subprocess_reaches_the_host():
            code = "import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
            assert subprocess.run([sys.executable, "-c", code]).returncode == 0
        """
    )
    # The in-process block lets a subprocess through (documented): it reaches the service on the host's loopback.
    pytester.runpytest_subprocess(*NO_PLUGINS).assert_outcomes(passed=1)
    assert _accepted(server) == 1
    # In its own network namespace nothing of the session reaches it: its loopback is another one.
    pytester.runpytest_subprocess(*NO_PLUGINS, "--bench-netns").assert_outcomes(failed=1)
    assert _accepted(server) == 0


def test_bench_netns_is_for_replay_only(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest_subprocess(*NO_PLUGINS, "--bench-netns", "--bench-record-mode=once")
    assert result.ret != 0 and "--bench-netns replays only" in result.stderr.str()
