"""Python scripts started in a process forked from an interpreter that has already imported
their heavy modules (the MCP SDK builds hundreds of pydantic models on import: about 1.5 s
of CPU for every process that imports it, where a fork takes a few milliseconds).

    python preloaded.py serve SOCKET MODULE...   # import MODULEs; fork a process per launch
    python -S preloaded.py run SOCKET [--pid-file PATH] SCRIPT ARG...  # SCRIPT as __main__
    python -S preloaded.py run SOCKET [--pid-file PATH] -m MODULE ARG...  # python -m MODULE
    python -S preloaded.py run SOCKET [-u] [-B] -c CODE ARG...           # python -c CODE

A launch hands the preloader its standard streams, arguments, working directory and
environment; the preloader forks a process that takes them, starts a session of its own and
runs SCRIPT from its first line (``runpy``: only the imports are already done), or ``-m
MODULE`` as ``python -m MODULE`` runs it (the starting folder first on the path), or ``-c
CODE`` (after ``-u``, unbuffered output, and ``-B``, no bytecode written: how execnet starts
an xdist worker, tests/suite_preloader.py). The script's process ends as python ends one
(threads joined, atexit handlers run, streams flushed) but leaves its modules as they are:
tearing down what the preloader imported would copy it page by page (``_finish``). The
launch stays the process its starter knows: it exits with the script's status (or its signal), a
SIGTERM/SIGINT/SIGHUP it gets goes to the script's process group, and if the launch itself
is killed the script is killed too. It keeps none of the streams, so the script's exit is an
end of file to its reader as it would be for the script itself.

``Preloader(*modules).command(script, *args)`` is the command line of a launch (``command("-m",
module, *args)`` for a module), or the plain ``python script args`` where fork or pidfd_open
is missing (not Linux). ``Launch`` starts one
and knows its script's own pid: a test that kills the script at a chosen point signals it
there and then, not through the launch and its relay (tests/launched.py).
"""

from __future__ import annotations

# a launch imports only these (it runs for as long as the script: its start is what it costs)
import marshal
import os
import signal
import socket
import struct
import sys

TYPE_CHECKING = False  # (typing would be the launch's costliest import: ~10 ms of CPU)
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Iterator
    from typing import Any

HERE = os.path.abspath(__file__)
SHARED = "TREADLE_TEST_PRELOADER"  # the socket of the run's preloader (tests/suite_preloader.py)
_LENGTH = struct.Struct("!I")
_FD = struct.Struct("i")
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _send(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    data = marshal.dumps(message)  # both ends are this interpreter
    head = _LENGTH.pack(len(data))
    if fds:
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, b"".join(_FD.pack(fd) for fd in fds))]
        sock.sendmsg([head], rights)
    else:
        sock.sendall(head)
    sock.sendall(data)


def _receive(sock: socket.socket, max_fds: int = 0) -> tuple[dict[str, Any] | None, list[int]]:
    """One message and the descriptors that came with it; ``(None, [])`` at end of file."""
    fds: list[int] = []
    room = socket.CMSG_SPACE(max_fds * _FD.size) if max_fds else 0
    head, ancillary, _flags, _addr = sock.recvmsg(_LENGTH.size, room)
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.extend(n for (n,) in _FD.iter_unpack(data[: len(data) - len(data) % _FD.size]))
    while head and len(head) < _LENGTH.size:
        head += sock.recv(_LENGTH.size - len(head))
    if len(head) < _LENGTH.size:
        return None, fds
    (size,) = _LENGTH.unpack(head)
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None, fds
        data += chunk
    message: dict[str, Any] = marshal.loads(data)
    return message, fds


# ---- the launch (runs under ``python -S``: the standard library only) ----


def launch(path: str, script: str, args: list[str], pid_file: str | None = None) -> None:
    script_pid: list[int] = []  # known once the preloader has forked it
    early: list[int] = []  # signals that came before: forwarded once it is known

    def forward(signum: int, _frame: Any) -> None:
        if not script_pid:
            early.append(signum)
            return
        try:
            os.killpg(script_pid[0], signum)
        except ProcessLookupError:
            pass

    # before the script can start (and tell its starter so): no signal is missed
    for signum in _FORWARDED:
        signal.signal(signum, forward)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    request = {"argv": [script, *args], "cwd": os.getcwd(), "env": dict(os.environ)}
    _send(sock, request, fds=[0, 1, 2])
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the script holds them now: its exit must close them
        os.dup2(null, fd)
    os.close(null)
    started, _ = _receive(sock)
    if started is None:
        os._exit(70)
    script_pid.append(started["pid"])
    if pid_file is not None:  # whole or not there: its reader polls for it
        with open(pid_file + ".tmp", "w") as out:
            out.write(str(started["pid"]))
        os.replace(pid_file + ".tmp", pid_file)
    for number in early:
        forward(number, None)
    ended, _ = _receive(sock)
    if ended is None:
        os._exit(70)
    if "signal" in ended:
        if ended["signal"] != signal.SIGKILL:  # (whose handler cannot be set)
            signal.signal(ended["signal"], signal.SIG_DFL)
        os.kill(os.getpid(), ended["signal"])
    os._exit(ended["exit"])


# ---- the preloader ----


def serve(path: str, modules: list[str]) -> None:
    import gc
    import importlib
    import threading

    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:  # not installed (an extra): a script that needs it fails on its own
            pass
    if threading.active_count() != 1:
        raise SystemExit(f"a preloaded module started a thread: {threading.enumerate()}")
    gc.collect()
    gc.freeze()  # the forks share these pages instead of copying them on the next collection
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(0))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    try:
        request, fds = _accept(listener)  # returns in a script's process only
    except SystemExit:
        for remove, name in ((os.unlink, path), (os.rmdir, os.path.dirname(path))):
            try:
                remove(name)
            except OSError:
                pass
        raise
    _finish(_ran(request, fds))


def _accept(listener: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """Fork a relay (below) per launch, until stopped (SIGTERM) or the starter is gone (an
    end of file on stdin). The relays are reaped here, so their CPU time (and their
    scripts') counts in this process's children's, as a plain start's would."""
    import select

    try:
        while True:
            ready, _, _ = select.select([listener, sys.stdin], [], [])
            if sys.stdin in ready:
                sys.exit(0)
            conn, _ = listener.accept()
            if os.fork() == 0:
                listener.close()
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                try:
                    job = _relay(conn)
                except BaseException:
                    import traceback

                    traceback.print_exc()
                    os._exit(70)
                if job is None:
                    os._exit(0)
                return job
            conn.close()
            _reap()
    except SystemExit:  # stopped (SIGTERM)
        _reap()
        raise


def _reap() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def _relay(conn: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """Fork the script's process (there: return what it runs), tell the launch its pid,
    then how it ended; kill it if the launch goes away first."""
    import select

    request, fds = _receive(conn, max_fds=3)
    if request is None or len(fds) != 3:
        return None
    session, led = os.pipe()
    pid = os.fork()
    if pid == 0:
        conn.close()
        os.close(session)
        os.setsid()  # its own session and process group, before anyone signals that group
        os.close(led)
        return request, fds
    os.close(led)
    os.read(session, 1)  # end of file: the script leads its group (or died trying)
    os.close(session)
    for fd in fds:
        os.close(fd)
    try:
        _send(conn, {"pid": pid})
        gone = False
    except OSError:  # the launch was killed already (the script may have printed first)
        gone = True
    ended = os.pidfd_open(pid)
    ready = [] if gone else select.select([ended, conn], [], [])[0]
    if ended not in ready:  # the launch is gone (killed): so is the script
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _, status = os.waitpid(pid, 0)
    ended_by = (
        {"signal": os.WTERMSIG(status)}
        if os.WIFSIGNALED(status)
        else {"exit": os.WEXITSTATUS(status)}
    )
    try:
        _send(conn, ended_by)
    except OSError:  # the launch is gone
        pass
    return None


def _ran(request: dict[str, Any], fds: list[int]) -> int:
    """Run the launch's script (:func:`_run`); its exit status, as python would end with it
    (an exception's traceback printed, a status of 1; the signal of a KeyboardInterrupt
    as a negative number)."""
    try:
        _run(request, fds)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return (exc.code or 0) & 0xFF
        print(exc.code, file=sys.stderr)  # (as python prints a status that is no number)
        return 1
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        return -signal.SIGINT  # python ends killed by SIGINT, after the traceback
    except BaseException:
        sys.excepthook(*sys.exc_info())
        return 1
    return 0


def _finish(status: int) -> None:
    """End the script's process as python ends, but without tearing its modules down: their
    objects are shared with the preloader, and freeing them one by one copies them page by
    page (~0.1 s of CPU a launch from the whole suite's preloader). As python does first,
    the non-daemon threads are joined (after the shutdown hooks of thread pools), the
    atexit handlers run and the standard streams are flushed; objects still alive are not
    finalized one by one (a script closes what it opens, as these do)."""
    import atexit
    import threading

    threading._shutdown()  # type: ignore[attr-defined]  # (python's own first step at exit)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if status < 0:
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    os._exit(status)


def _run(request: dict[str, Any], fds: list[int]) -> None:
    """Become the launch's script: its streams, session, directory, environment and
    arguments; then run it as ``python SCRIPT`` (or ``python -m MODULE``) would: its exit,
    atexit and all."""
    import runpy

    for fd, target in zip(fds, (0, 1, 2), strict=True):  # received as 3 and up
        os.dup2(fd, target)
        os.close(fd)
    for signum in _FORWARDED:
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # KeyboardInterrupt, as usual
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if "tempfile" in sys.modules:  # its folder is read from TMPDIR once, then kept
        sys.modules["tempfile"].tempdir = None
    argv = list(request["argv"])
    while argv[0] in ("-u", "-B"):  # the interpreter's options that come first
        option = argv.pop(0)
        if option == "-B":
            sys.dont_write_bytecode = True
        else:
            for stream in (sys.stdout, sys.stderr):
                stream.reconfigure(write_through=True)
    if argv[0] == "-c":  # as python -c: in a fresh __main__, the folder it starts in first
        import types

        main = types.ModuleType("__main__")
        sys.modules["__main__"] = main
        sys.argv = ["-c", *argv[2:]]
        sys.path[0] = ""
        exec(compile(argv[1], "<string>", "exec"), main.__dict__)
        return
    if argv[0] == "-m":  # as python -m: the folder it starts in, then the module
        module, *args = argv[1:]
        sys.argv = [module, *args]  # (runpy puts the module's file in sys.argv[0])
        sys.path[0] = os.getcwd()
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return
    script = os.path.abspath(argv[0])  # __file__ (and sys.argv[0]: runpy's)
    sys.argv = argv
    sys.path[0] = os.path.dirname(script)
    runpy.run_path(script, run_name="__main__")


class Preloader:
    """A preloader process importing ``modules``, started on first use, stopped by
    ``close()``; or, :meth:`borrowed`, one that another process started."""

    def __init__(self, *modules: str) -> None:
        self.modules = modules
        self.folder: str | None = None
        self.process: subprocess.Popen[str] | None = None
        self.borrowed_socket: str | None = None

    @classmethod
    def borrowed(cls, socket: str) -> Preloader:
        """The preloader listening on ``socket`` (its starter stops it, not ``close()``)."""
        preloader = cls()
        preloader.borrowed_socket = socket
        return preloader

    @staticmethod
    def available() -> bool:
        return hasattr(os, "fork") and hasattr(os, "pidfd_open") and hasattr(socket, "AF_UNIX")

    def command(
        self, script: str | os.PathLike[str], *args: str, pid_file: str | None = None
    ) -> list[str]:
        """The command line that runs ``python script args`` from the preloader; with
        ``pid_file``, the launch writes the script's pid there as soon as it knows it (the
        plain command writes nothing: the script is the process started)."""
        if not self.available():
            return [sys.executable, str(script), *args]
        told = ["--pid-file", pid_file] if pid_file is not None else []
        return [*self.command_prefix(), *told, str(script), *args]

    def command_prefix(self) -> list[str]:
        """What comes before ``script args`` (or ``-c code``) in a launch's command line."""
        return [sys.executable, "-S", HERE, "run", self.socket()]

    def socket(self) -> str:
        import subprocess
        import tempfile

        if self.borrowed_socket is not None:
            return self.borrowed_socket
        if self.process is None:
            self.folder = tempfile.mkdtemp(prefix="treadle-preload-")
            path = os.path.join(self.folder, "socket")
            self.process = subprocess.Popen(
                [sys.executable, HERE, "serve", path, *self.modules],
                stdin=subprocess.PIPE,  # closed when this process ends: the preloader stops
                stdout=subprocess.PIPE,
                text=True,
            )
            assert self.process.stdout is not None
            if self.process.stdout.readline().strip() != "ready":
                self.close()
                raise RuntimeError(f"the preloader of {self.modules} did not start")
        assert self.folder is not None
        return os.path.join(self.folder, "socket")

    def close(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None
        if self.folder is not None:
            import shutil

            shutil.rmtree(self.folder, ignore_errors=True)  # (the preloader removes it)
            self.folder = None


def preloading(*modules: str) -> Iterator[Preloader]:
    """A session fixture's body: the run's preloader, which has imported ``modules`` among
    others (in an xdist worker of a run that has one: tests/suite_preloader.py), else a
    :class:`Preloader` of ``modules`` of the fixture's own, closed after."""
    shared = os.environ.get(SHARED)
    if shared:
        yield Preloader.borrowed(shared)
        return
    preloader = Preloader(*modules)
    try:
        yield preloader
    finally:
        preloader.close()


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3:])
    elif sys.argv[1] == "run" and sys.argv[3] == "--pid-file":
        launch(sys.argv[2], sys.argv[5], sys.argv[6:], pid_file=sys.argv[4])
    elif sys.argv[1] == "run":
        launch(sys.argv[2], sys.argv[3], sys.argv[4:])
