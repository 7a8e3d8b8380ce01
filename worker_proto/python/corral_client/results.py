"""The values corral_client returns: plain dataclasses, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional


@dataclass(frozen=True)
class Caps:
    """Resource caps for a command or worker; None leaves the supervisor's default (docs/design.md
    "Units, defaults, limits"), 0 means unlimited, said explicitly."""
    memory_bytes: Optional[int] = None
    pids: Optional[int] = None
    cpu_time: Optional[float] = None      # seconds of CPU
    cpus: Optional[float] = None          # a rate, e.g. 0.5
    max_file_size: Optional[int] = None   # bytes


@dataclass(frozen=True)
class Layer:
    """One isolation layer as the supervisor's host probe found it."""
    name: str
    available: bool
    reason: str


@dataclass(frozen=True)
class Chunk:
    """Output pushed while a command runs. stream: "stdout" or "stderr"."""
    stream: str
    data: bytes


@dataclass(frozen=True)
class Timings:
    wall_ms: int
    user_cpu_ms: int
    sys_cpu_ms: int
    max_rss_kb: int                 # the largest process; 0: not measured (docs/design.md)
    memory_peak_kb: Optional[int]   # the whole tree, where a cgroup measured it


@dataclass
class ExecResult:
    """What happened to one command. A failing command is a result, not an exception.

    status: exited, signaled, timed_out, output_limit, memory_limit, cpu_limit, cancelled,
    setup_error. exit_code is None unless it exited. truncated: the output cap was hit (the
    command was killed); stdout/stderr hold the kept bytes."""
    status: str
    exit_code: Optional[int]
    signal: int
    timed_out: bool
    truncated: bool
    stdout: bytes
    stderr: bytes
    timings: Timings
    enforced: List[str] = field(default_factory=list)
    temp_dir: str = ""
    message: str = ""
    setup_step: Optional[str] = None
    setup_errno: Optional[int] = None
    launched: Optional[bool] = None  # authorized launches: False means nothing ran

    @property
    def ok(self) -> bool:
        return self.status == "exited" and self.exit_code == 0

    @property
    def text(self) -> str:
        """stdout as text (invalid UTF-8 replaced)."""
        return self.stdout.decode("utf-8", "replace")


@dataclass
class PollResult:
    """A background command's output since the previous poll, and its state (running, exited,
    failed, stopped); result once it has ended (its stdout/stderr are empty: the output came
    through the polls)."""
    state: str
    stdout: bytes
    stderr: bytes
    result: Optional[ExecResult]

    @property
    def running(self) -> bool:
        return self.result is None


@dataclass(frozen=True)
class FileWindow:
    """A window of a file: data from offset; truncated when more bytes follow it."""
    data: bytes
    offset: int
    file_size: int
    truncated: bool

    @property
    def text(self) -> str:
        return self.data.decode("utf-8")


@dataclass(frozen=True)
class DirEntry:
    name: str
    type: str        # file, dir, symlink, other
    size: int        # bytes
    mtime_ms: int    # since the epoch


@dataclass
class EvalResult:
    """One evaluation by the Python worker. value: repr() of the last expression (None when the
    code ends with a statement or None). On an exception ok is False, error is its last line
    ("ZeroDivisionError: division by zero") and traceback the whole traceback."""
    ok: bool
    value: Optional[str]
    stdout: str
    stderr: str
    error: Optional[str]
    traceback: Optional[str]
