"""tests/preloaded.py: a script launched from the preloader behaves, for its starter, as
``python script.py`` would: its output, exit status, arguments, folder and environment; a
signal to the launch reaches it; a launch killed takes it along; and it runs from its first
line in a process of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.launched import Launch
from tests.preloaded import Preloader

pytestmark = pytest.mark.skipif(not Preloader.available(), reason="fork and pidfd_open")

SCRIPT = textwrap.dedent(
    """
    import atexit, json, os, signal, sys, tempfile, time
    atexit.register(lambda: print("atexit"))
    what = sys.argv[1]
    if what == "wait":  # before the first line: a starter that read it may signal at once
        signal.signal(signal.SIGTERM, lambda *_: sys.exit("got SIGTERM"))
    print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "pid": os.getpid(),
                      "env": os.environ.get("PRELOADED_TEST"), "tmp": tempfile.gettempdir(),
                      "name": __name__, "file": __file__, "preloaded": "json" in PRELOADED}),
          flush=True)
    print("to stderr", file=sys.stderr)
    if what == "raise":
        raise ValueError("boom")
    if what == "exit":
        sys.exit(3)
    if what == "crash":
        os._exit(5)
    if what == "wait":
        time.sleep(60)
    if what == "hold":
        time.sleep(60)
    """
)


@pytest.fixture(scope="module")
def preloader() -> Iterator[Preloader]:
    preloader = Preloader("json")
    yield preloader
    preloader.close()


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "script.py"
    # a name the preloader's process has and a plain one has not: proof of the fork
    path.write_text("import sys\nPRELOADED = set(sys.modules)\n" + SCRIPT)
    return path


def launch(preloader: Preloader, script: Path, what: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        preloader.command(script.name, what),
        cwd=script.parent,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_script_runs_as_python_would_run_it(preloader: Preloader, script: Path) -> None:
    temp = script.parent / "tmp"
    temp.mkdir()
    done = launch(preloader, script, "ok", PRELOADED_TEST="yes", TMPDIR=str(temp))
    out, err = done.communicate(timeout=60)
    assert done.returncode == 0, err
    first, last = out.splitlines()
    import json

    seen = json.loads(first)
    assert seen["argv"] == ["ok"] and seen["cwd"] == str(script.parent)
    assert seen["env"] == "yes" and seen["tmp"] == str(temp)  # its own TMPDIR, not a kept one
    assert seen["name"] == "__main__" and seen["file"] == str(script)
    assert seen["preloaded"] and seen["pid"] != done.pid  # a fork, not the launch itself
    assert last == "atexit" and err == "to stderr\n"


@pytest.mark.parametrize(("what", "code"), [("raise", 1), ("exit", 3), ("crash", 5)])
def test_the_launch_exits_as_the_script_did(
    preloader: Preloader, script: Path, what: str, code: int
) -> None:
    done = launch(preloader, script, what)
    _, err = done.communicate(timeout=60)
    assert done.returncode == code
    assert ("ValueError: boom" in err) == (what == "raise")


def test_a_signal_to_the_launch_reaches_the_script(preloader: Preloader, script: Path) -> None:
    running = launch(preloader, script, "wait")
    assert running.stdout is not None
    assert running.stdout.readline()  # it has started (and handles SIGTERM)
    running.send_signal(signal.SIGTERM)
    _, err = running.communicate(timeout=60)
    assert running.returncode == 1 and err.endswith("got SIGTERM\n"), err


def test_a_script_killed_by_a_signal_is_a_launch_killed_by_it(
    preloader: Preloader, script: Path
) -> None:
    import json

    running = launch(preloader, script, "hold")
    assert running.stdout is not None
    pid = json.loads(running.stdout.readline())["pid"]
    os.kill(pid, signal.SIGKILL)  # the script itself, not the launch
    running.communicate(timeout=60)
    assert running.returncode == -signal.SIGKILL


def test_a_killed_launch_takes_the_script_along(preloader: Preloader, script: Path) -> None:
    import json

    running = launch(preloader, script, "hold")
    assert running.stdout is not None
    pid = json.loads(running.stdout.readline())["pid"]
    running.kill()
    running.communicate(timeout=60)
    deadline = time.monotonic() + 30  # a guard against a hang, not the thing tested
    while _alive(pid):
        assert time.monotonic() < deadline, "the script outlived its killed launch"
        time.sleep(0.02)


def test_a_launch_tells_its_script_s_own_pid_where_a_test_kills_it(
    preloader: Preloader, script: Path
) -> None:
    import json

    def start() -> Launch:
        return Launch(
            preloader,
            script.name,
            "hold",
            folder=str(script.parent),
            cwd=script.parent,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    running = start()
    assert running.stdout is not None
    pid = json.loads(running.stdout.readline())["pid"]
    assert running.script_pid() == pid != running.pid
    running.kill_script()
    assert running.returncode == -signal.SIGKILL and not _alive(pid)
    running.communicate()

    early = start()
    early.kill_script()  # (it waits for the pid: before the script's first line is fine)
    assert early.returncode == -signal.SIGKILL
    early.communicate()


MODULE = textwrap.dedent(
    """
    import json, os, sys
    print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "name": __name__,
                      "file": __file__, "cwd": os.getcwd()}))
    sys.exit(int(sys.argv[1]))
    """
)


def test_a_module_runs_as_python_m_would_run_it(preloader: Preloader, tmp_path: Path) -> None:
    (tmp_path / "probe_module.py").write_text(MODULE)
    seen = []
    launch = preloader.command("-m", "probe_module", "4")
    assert "run" in launch  # from the preloader, not a plain python
    for command in (
        launch,
        [sys.executable, "-m", "probe_module", "4"],
    ):
        done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert done.returncode == 4, done.stderr
        seen.append(done.stdout)
    launched, plain = seen
    assert launched == plain  # its file in argv[0], the folder first on the path, __main__


ENDING = textwrap.dedent(
    """
    import atexit, concurrent.futures, sys, threading, time
    atexit.register(lambda: print("atexit", flush=True))
    def late():
        time.sleep(0.2)
        print("thread done")
    threading.Thread(target=late).start()  # not a daemon: the end waits for it
    pool = concurrent.futures.ThreadPoolExecutor(1)  # never shut down: its hook does it
    pool.submit(print, "pooled")
    sys.stdout.write("unflushed")  # flushed at the end
    """
)


def test_a_script_ends_as_python_ends_it(preloader: Preloader, tmp_path: Path) -> None:
    """The launched process ends without tearing its (preloaded) modules down, but as python
    ends a script otherwise: threads joined, atexit handlers run, the streams flushed."""
    (tmp_path / "ending.py").write_text(ENDING)
    done = subprocess.run(
        preloader.command("ending.py"), cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.replace("unflushed", "").split()) == sorted(
        ["pooled", "thread", "done", "atexit"]
    )
    assert done.stdout.index("thread done") < done.stdout.index("atexit")
    assert "unflushed" in done.stdout


CODE = (
    "import json, sys; print(json.dumps({'argv': sys.argv, 'path0': sys.path[0], "
    "'name': __name__, 'bytecode': not sys.dont_write_bytecode})); sys.exit(int(sys.argv[1]))"
)


def test_code_runs_as_python_c_would_run_it(preloader: Preloader, tmp_path: Path) -> None:
    """(how execnet starts an xdist worker: ``python -u -c CODE``, tests/suite_preloader.py)"""
    seen = []
    for command in (
        [*preloader.command_prefix(), "-u", "-B", "-c", CODE, "6"],
        [sys.executable, "-u", "-B", "-c", CODE, "6"],
    ):
        done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert done.returncode == 6, done.stderr
        seen.append(done.stdout)
    launched, plain = seen
    assert launched == plain  # argv ["-c", ...], "" first on the path, __main__, no bytecode


def test_a_module_that_is_not_installed_is_left_to_the_script(tmp_path: Path) -> None:
    (tmp_path / "needs.py").write_text("import json, treadle_no_such_module\n")
    preloader = Preloader("json", "treadle_no_such_module")
    try:
        done = subprocess.run(
            preloader.command("needs.py"), cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
    finally:
        preloader.close()
    assert done.returncode == 1  # the preloader started; the script fails as it would alone
    assert "ModuleNotFoundError: No module named 'treadle_no_such_module'" in done.stderr


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:  # a zombie is not alive
            return stat.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_without_fork_the_command_is_the_plain_one(
    monkeypatch: pytest.MonkeyPatch, script: Path
) -> None:
    monkeypatch.setattr(Preloader, "available", staticmethod(lambda: False))
    assert Preloader("json").command(script, "ok") == [sys.executable, str(script), "ok"]
