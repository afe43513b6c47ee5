"""bench as a user installs it: the wheel holds one import package, `bench`, and nothing else at the top; installed
into a fresh virtualenv beside proxy.py (which installs a top-level `proxy`) and used by a project that has its own
`proxy/` and `catalog/` packages, pytest starts and the project's bench-marked tests record, then replay offline."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import tomllib
import urllib.request
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
PROJECT_TEST = """
import proxy
import catalog
import pytest
from openai import OpenAI


def test_the_project_s_own_packages_are_its_own():
    assert proxy.OWNER == "the user" and catalog.OWNER == "the user"


@pytest.mark.bench
def test_an_answer():
    reply = OpenAI().chat.completions.create(model="oracle", messages=[{"role": "user", "content": "Say hi."}])
    assert reply.choices[0].message.content
"""


def _source_copy(dest: Path) -> Path:
    """The tree as a clean clone has it: tracked files and new ones not ignored, as they are on disk (links kept)."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        source, target = ROOT / rel, dest / rel
        if not source.is_symlink() and not source.is_file():
            continue  # listed but deleted in the working tree
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    src = _source_copy(work / "src")
    out = work / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(src)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (found,) = out.glob("*.whl")
    return found


def test_the_wheel_installs_one_package_and_its_metadata(wheel: Path) -> None:
    name = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"].replace("-", "_")
    with zipfile.ZipFile(wheel) as zf:
        tops = {n.split("/", 1)[0] for n in zf.namelist()}
        names = set(zf.namelist())
        entry_points = zf.read(f"{name}-0.1.0.dist-info/entry_points.txt").decode()
    assert tops == {"bench", f"{name}-0.1.0.dist-info"}
    # Every module of the source folders is in it, under bench/ (the links proxy/, catalog/, scorer/ followed).
    for top in ("proxy", "catalog", "scorer"):
        for py in (ROOT / top).rglob("*.py"):
            assert f"bench/{py.relative_to(ROOT).as_posix()}" in names, py
    assert "bench = bench.proxy.pytest_plugin.plugin" in entry_points


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _dependencies_only(venv_site: Path) -> Path:
    """A folder of this environment's installed packages minus bench itself, so that the fresh virtualenv gets bench
    only from the wheel (a path listed in a .pth file: its own .pth files, the editable install's, stay unread)."""
    here = Path(sysconfig.get_paths()["purelib"])
    deps = venv_site.parent / "deps"
    deps.mkdir()
    for entry in here.iterdir():
        if entry.name.startswith(("llm_gateway_bench", "__editable__", "bench")) or entry.suffix == ".pth":
            continue
        (deps / entry.name).symlink_to(entry)
    return deps


def test_a_user_project_with_its_own_proxy_package_records_and_replays(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (site / "deps.pth").write_text(f"{_dependencies_only(site)}\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    # proxy.py's top-level `proxy` is in the environment (a dependency of the suite, like the user's own).
    check = subprocess.run(
        [python, "-c", "import proxy, bench.proxy, os; print(os.path.dirname(proxy.__file__))"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0 and "deps" in check.stdout, check.stdout + check.stderr

    project = tmp_path / "project"
    for pkg in ("proxy", "catalog"):
        (project / pkg).mkdir(parents=True)
        (project / pkg / "__init__.py").write_text('OWNER = "the user"\n')
    (project / "tests").mkdir()
    (project / "tests" / "test_app.py").write_text(PROJECT_TEST)
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')

    port = _free_port()
    sim = subprocess.Popen([venv / "bin" / "bench", "sim", "--port", str(port)], stdout=subprocess.DEVNULL)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PYTEST_", "BENCH_"))}
    pytest_cmd = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the simulator did not start"
                time.sleep(0.1)
        recorded = subprocess.run(
            [*pytest_cmd, "--bench-record-mode=once", f"--bench-upstream=http://127.0.0.1:{port}/v1"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        sim.terminate()
        sim.wait(timeout=30)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert "2 passed" in recorded.stdout
    assert list((project / "tests" / "cassettes").rglob("test_an_answer.cassette"))
    replayed = subprocess.run(pytest_cmd, cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "2 passed" in replayed.stdout
