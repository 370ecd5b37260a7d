"""Shell-command tasks: run a program once per tick, supervised, with its output in the log.

A :class:`CommandTask` is an ordinary task function (it takes the
:class:`~cronlease._task.RunContext`), so the lease, history and heartbeats
work exactly as for Python tasks:

- No shell unless ``shell=True`` (then ``/bin/sh -c``). The child gets its own
  session and process group, stdin from ``/dev/null``, and the environment of
  the replica plus ``env`` plus ``CRONLEASE_TASK``, ``CRONLEASE_SLOT``,
  ``CRONLEASE_FENCE``, ``CRONLEASE_SCHEDULED_FOR`` (ISO 8601, UTC) and
  ``CRONLEASE_MANUAL`` (``1`` for a manual run).
- stdout and stderr are logged line by line as they come, to the logger
  ``cronlease.task.<name>`` (stdout at INFO, stderr at WARNING), made safe
  first: terminal controls escaped (``\\x1b``), URL passwords hidden
  (:mod:`cronlease._safe_text`); the stderr tail kept for the history is the
  text as it came. Nothing is buffered without bound: over-long lines are
  cut, and only the last lines of stderr are kept, for the run's error summary.
- Exit status 0 is success. A nonzero status (or death by a signal) raises
  :class:`~cronlease.errors.CommandError` with the status, the duration and the tail of stderr,
  so the run is recorded ``failed`` with that summary. A program that cannot
  start (not found, not executable, missing ``cwd``) is a failed run too.
- ``timeout``: the whole process group gets SIGTERM, then SIGKILL after
  ``kill_grace`` seconds; the run raises :class:`~cronlease.errors.TaskTimeout`
  and is recorded ``timed_out``.
- Lost lease: a command cannot look at ``ctx.lost``, and once the lease is
  lost another replica may start the task, so by default the process group is
  terminated the same way (TERM, then KILL) and the run is recorded ``lost``.
  Pass ``terminate_on_lost=False`` to let it run to its end instead.
- Shutdown: :func:`terminate_running` terminates every command still running
  in this process (the CLI calls it once its shutdown grace is over).
- A command that exits normally but leaves background processes behind is not
  waited for beyond a short drain of its output, and they are not killed.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import selectors
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import timezone
from pathlib import Path

from cronlease._safe_text import safe_text
from cronlease._task import RunContext
from cronlease.errors import CommandError, TaskTimeout

__all__ = ["STDERR_TAIL_HEADER", "CommandTask", "terminate_running"]

#: lines of stderr kept for the run's error summary
STDERR_TAIL_LINES = 20
#: what separates a failure's message from the stderr tail after it
STDERR_TAIL_HEADER = "; last lines of stderr:"
#: characters kept of each stderr line in that summary
TAIL_LINE_CHARS = 300
#: bytes after which an unterminated output line is logged anyway
MAX_LINE_BYTES = 16 * 1024
#: how long output is still read after the command exited (background children may hold it)
DRAIN_SECONDS = 1.0
POLL_SECONDS = 0.1

_registry_lock = threading.Lock()
_running: set[_Supervisor] = set()


def terminate_running(reason: str = "the replica is shutting down", *, kill: bool = False) -> int:
    """Terminate every command task still running in this process; returns how many.

    Each one's process group gets SIGTERM, then SIGKILL after its kill grace;
    with ``kill``, SIGKILL now (the process is about to exit: a command in a
    session of its own would outlive it). The runs end on their own threads.
    """
    with _registry_lock:
        supervisors = list(_running)
    for supervisor in supervisors:
        supervisor.request_stop(reason)
        if kill:
            with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
                os.killpg(supervisor.pgid, signal.SIGKILL)
    return len(supervisors)


class CommandTask:
    """A task function that runs ``command`` once per run. See the module documentation."""

    def __init__(
        self,
        name: str,
        command: str | Sequence[str],
        *,
        shell: bool = False,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        kill_grace: float = 5.0,
        terminate_on_lost: bool = True,
    ) -> None:
        if shell:
            if not isinstance(command, str):
                raise CommandError("with shell=True, give the command as one string")
            argv = ["/bin/sh", "-c", command]
        else:
            argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not argv or not argv[0]:
            raise CommandError(f"task {name!r}: the command is empty")
        if timeout is not None and timeout <= 0:
            raise CommandError(f"task {name!r}: timeout must be positive")
        self.name = name
        self.argv = argv
        self.display = command if isinstance(command, str) else shlex.join(command)
        self.cwd = cwd
        self.env = dict(env or {})
        self.timeout = timeout
        self.kill_grace = kill_grace
        self.terminate_on_lost = terminate_on_lost
        # A name people configure logging by, so not the (private) module's path.
        self.logger = logging.getLogger(f"cronlease.task.{name}")
        self.__name__ = name  # shown by the scheduler like a function's name

    def __repr__(self) -> str:
        return f"CommandTask({self.name!r}, {self.display!r})"

    def program_problem(self) -> str | None:
        """Why the program would not start, as far as can be told without starting it:
        not found on the PATH the run would have, or not an executable file; None if it
        looks runnable (it may still fail: permissions of what it opens, a shell's words)."""
        program = self.argv[0]
        env = {**os.environ, **self.env}
        if os.sep in program:  # a path: relative to the run's working directory
            path = Path(self.cwd or os.getcwd(), program)
            if not path.exists():
                return f"program {program!r} does not exist ({path})"
            if path.is_dir() or not os.access(path, os.X_OK):
                return f"program {program!r} is not an executable file ({path})"
            return None
        search = os.pathsep.join(os.get_exec_path(env))
        if shutil.which(program, path=search) is None:
            return f"program {program!r} is not found on PATH ({search})"
        return None

    def __call__(self, ctx: RunContext) -> None:
        env = {
            **os.environ,
            **self.env,
            "CRONLEASE_TASK": ctx.name,
            "CRONLEASE_SLOT": str(ctx.slot),
            "CRONLEASE_FENCE": str(ctx.fence),
            "CRONLEASE_SCHEDULED_FOR": ctx.scheduled_for.astimezone(timezone.utc)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "CRONLEASE_MANUAL": "1" if ctx.manual else "0",
        }
        started = time.monotonic()
        try:
            process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.cwd,
                env=env,
                start_new_session=True,  # its own process group, killed as a whole
            )
        except OSError as exc:
            raise CommandError(self._start_failure(exc)) from None
        self.logger.debug("started %s (pid %s)", self.display, process.pid)
        supervisor = _Supervisor(self, process, ctx)
        with _registry_lock:
            _running.add(supervisor)
        try:
            supervisor.supervise()
        except BaseException:
            supervisor.kill_group(signal.SIGKILL)
            raise
        finally:
            with _registry_lock:
                _running.discard(supervisor)
            supervisor.close()
        duration = time.monotonic() - started
        status = process.returncode
        tail = supervisor.stderr_tail()
        if supervisor.stop_reason == "timeout":
            raise TaskTimeout(
                f"command {self.display!r} was killed after its timeout of {self.timeout:g} s{tail}"
            )
        if supervisor.stop_reason is not None:
            raise CommandError(
                f"command {self.display!r} was terminated after {duration:.3f} s: "
                f"{supervisor.stop_reason}{tail}"
            )
        if status != 0:
            raise CommandError(
                f"command {self.display!r} {_describe_status(status)} after {duration:.3f} s{tail}"
            )
        self.logger.debug("exit status 0 after %.3f s", duration)

    def _start_failure(self, exc: OSError) -> str:
        program = self.argv[0]
        if self.cwd is not None and not os.path.isdir(self.cwd):
            return f"cannot start {self.display!r}: working directory {self.cwd!r} does not exist"
        if isinstance(exc, FileNotFoundError):
            return f"cannot start {self.display!r}: {program!r} not found"
        if isinstance(exc, PermissionError):
            return f"cannot start {self.display!r}: {program!r} is not executable (permission)"
        return f"cannot start {self.display!r}: {exc.strerror or exc}"


def _describe_status(status: int) -> str:
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"was killed by {name}"
    return f"exited with status {status}"


class _Lines:
    """Splits one output stream into lines and logs each as soon as it is complete."""

    def __init__(
        self, logger: logging.Logger, level: int, tail: collections.deque[str] | None
    ) -> None:
        self._logger = logger
        self._level = level
        self._tail = tail
        self._buffer = bytearray()

    def feed(self, data: bytes) -> None:
        self._buffer += data
        while True:
            end = self._buffer.find(b"\n")
            if end < 0:
                break
            self._emit(bytes(self._buffer[:end]))
            del self._buffer[: end + 1]
        while len(self._buffer) > MAX_LINE_BYTES:
            self._emit(bytes(self._buffer[:MAX_LINE_BYTES]))
            del self._buffer[:MAX_LINE_BYTES]

    def close(self) -> None:
        if self._buffer:
            self._emit(bytes(self._buffer))
            self._buffer.clear()

    def _emit(self, raw: bytes) -> None:
        line = raw.decode("utf-8", errors="replace").rstrip("\r")
        # shown safe (escapes, no URL password), kept as it is for the history's tail
        self._logger.log(self._level, "%s", safe_text(line, keep="\t"))
        if self._tail is not None:
            self._tail.append(line[:TAIL_LINE_CHARS])


class _Supervisor:
    """One running command: reads its output, enforces timeout, lost lease and stop requests."""

    def __init__(
        self, task: CommandTask, process: subprocess.Popen[bytes], ctx: RunContext
    ) -> None:
        self.task = task
        self.process = process
        self.ctx = ctx
        self.pgid = process.pid  # start_new_session: the child leads its own group
        self.deadline = None if task.timeout is None else time.monotonic() + task.timeout
        self.stop_reason: str | None = None
        self._stop_requested: str | None = None
        self._term_sent_at: float | None = None
        self._killed = False
        self._tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._selector = selectors.DefaultSelector()
        assert process.stdout is not None and process.stderr is not None
        self._selector.register(
            process.stdout, selectors.EVENT_READ, _Lines(task.logger, logging.INFO, None)
        )
        self._selector.register(
            process.stderr, selectors.EVENT_READ, _Lines(task.logger, logging.WARNING, self._tail)
        )

    def request_stop(self, reason: str) -> None:
        self._stop_requested = reason

    def supervise(self) -> None:
        exited_at: float | None = None
        while True:
            self._read(POLL_SECONDS)
            now = time.monotonic()
            if self.process.poll() is not None:
                if not self._selector.get_map():
                    break
                exited_at = exited_at or now
                if now - exited_at >= DRAIN_SECONDS:
                    break  # a background child keeps the output open: stop reading
                continue
            if self.stop_reason is None:
                self._check_stop(now)
            elif (
                not self._killed
                and self._term_sent_at is not None
                and now - self._term_sent_at >= self.task.kill_grace
            ):
                self.kill_group(signal.SIGKILL)
        if self.stop_reason is not None:
            self._finish_group()

    def _check_stop(self, now: float) -> None:
        if self.deadline is not None and now >= self.deadline:
            self.stop_reason = "timeout"
            self.task.logger.warning(
                "timeout of %g s reached: terminating the process group", self.task.timeout
            )
        elif self.task.terminate_on_lost and self.ctx.lost:
            self.stop_reason = "the run lost its lease (another replica may run the task now)"
            self.task.logger.warning("the run lost its lease: terminating the process group")
        elif self._stop_requested is not None:
            self.stop_reason = self._stop_requested
            self.task.logger.warning("%s: terminating the process group", self._stop_requested)
        if self.stop_reason is not None:
            self._term_sent_at = now
            self.kill_group(signal.SIGTERM)

    def _read(self, timeout: float) -> None:
        if not self._selector.get_map():
            self.process_wait(timeout)
            return
        for key, _events in self._selector.select(timeout):
            lines: _Lines = key.data
            try:
                data = os.read(key.fd, 65536)
            except OSError:
                data = b""
            if data:
                lines.feed(data)
            else:
                lines.close()
                self._selector.unregister(key.fileobj)

    def process_wait(self, timeout: float) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout)

    def _finish_group(self) -> None:
        """After a TERM: wait out the grace for the rest of the group, then KILL it."""
        assert self._term_sent_at is not None
        while not self._killed and _group_alive(self.pgid):
            if time.monotonic() - self._term_sent_at >= self.task.kill_grace:
                self.kill_group(signal.SIGKILL)
                break
            time.sleep(0.05)

    def kill_group(self, signum: signal.Signals) -> None:
        if signum == signal.SIGKILL:
            self._killed = True
        with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
            os.killpg(self.pgid, signum)
        if signum == signal.SIGKILL and self.process.returncode is None:
            self.process_wait(1.0)

    def stderr_tail(self) -> str:
        if not self._tail:
            return ""
        return STDERR_TAIL_HEADER + "\n" + "\n".join(self._tail)

    def close(self) -> None:
        for key in list(self._selector.get_map().values()):
            key.data.close()
        self._selector.close()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        if self.process.returncode is None:
            self.process_wait(0)


def _group_alive(pgid: int) -> bool:
    """Whether any process (other than a zombie) is left in the process group."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    # Zombies still count for killpg; they are gone for our purpose.
    try:
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as stat:
                    fields = stat.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != b"Z":
                return True
        return False
    except OSError:  # no /proc (macOS): trust killpg
        return True
