"""The sandbox's limits and per-run resources: defaults, :class:`Limits`, and the host-wide uid lease.

``run_code(timeout_s=None, memory_mb=None)`` means :data:`DEFAULT_TIMEOUT_S` (10 s) and
:data:`DEFAULT_MEMORY_MB` (128 MiB), the lecture's ``docker run --memory 128m`` settings; callers that
follow a profile pass its values explicitly. Nothing here reads the course profile.

Introduced in lesson 06.
"""
from __future__ import annotations

import fcntl
import os
import threading
from dataclasses import dataclass
from pathlib import Path

DEFAULT_TIMEOUT_S = 10.0  # wall-clock seconds of one sample (start-up not counted)
DEFAULT_MEMORY_MB = 128   # the lecture's `docker run --memory 128m`
OUTPUT_CAP = 64 * 1024    # bytes kept per stream; more output ends the run with output_limit
UID_BASE = 60000          # sandboxed code runs as a uid in [UID_BASE, UID_BASE + UID_COUNT), one per run
UID_COUNT = 4096
TMP_BYTES = 16 * 1024 * 1024            # the sample's private /tmp (plus the size of its program)
FILE_BYTES = 8 * 1024 * 1024            # RLIMIT_FSIZE: the largest file the program may write
MAX_PROGRAM_BYTES = 32 * 1024 * 1024    # larger programs raise ValueError in run_code
MAX_PROCS = 64
MAX_OPEN_FILES = 64
AS_BACKSTOP = 4           # with a per-sample memory cgroup: address space per process, x memory_mb
CPUS = 1.0                # CPU budget of one sample with cgroups (cores)
LEASE_DIR = Path(os.environ.get("SANDBOX_LEASE_DIR", "/run/course-sandbox/uids"))


@dataclass(frozen=True)
class Limits:
    """The resource limits of one run (wall time, memory); invalid values raise ValueError."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    memory_mb: int = DEFAULT_MEMORY_MB

    def __post_init__(self) -> None:
        if isinstance(self.timeout_s, bool) or not (isinstance(self.timeout_s, (int, float))
                                                    and 0 < self.timeout_s < 1e6):
            raise ValueError(f"timeout_s must be a positive number of seconds, got {self.timeout_s!r}")
        if isinstance(self.memory_mb, bool) or not isinstance(self.memory_mb, int) or not 16 <= self.memory_mb <= 1 << 20:
            raise ValueError(f"memory_mb must be an integer number of MiB >= 16, got {self.memory_mb!r}")

    @classmethod
    def of(cls, timeout_s: float | None = None, memory_mb: int | None = None) -> "Limits":
        """The limits a caller asked for; None means the documented default (not a profile's value)."""
        timeout_s = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
        memory_mb = DEFAULT_MEMORY_MB if memory_mb is None else memory_mb
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)):
            raise ValueError(f"timeout_s must be a number of seconds, got {timeout_s!r}")
        if isinstance(memory_mb, float) and memory_mb.is_integer():
            memory_mb = int(memory_mb)
        return cls(float(timeout_s), memory_mb)

    def rlimits(self, nproc: bool = True, per_sample_memory: bool = False) -> dict:
        """The rlimits the sandbox sets on itself. With ``per_sample_memory`` (a cgroup bounds the sample
        as a whole) RLIMIT_AS is only a backstop of :data:`AS_BACKSTOP` × ``memory_mb`` per process, so one
        huge allocation fails at once with MemoryError; without it, RLIMIT_AS is ``memory_mb`` itself."""
        as_mb = self.memory_mb * (AS_BACKSTOP if per_sample_memory else 1)
        return {"as": as_mb * 1024 * 1024, "cpu": int(self.timeout_s) + 2,
                "fsize": FILE_BYTES, "nofile": MAX_OPEN_FILES, "nproc": MAX_PROCS if nproc else None, "core": 0}


class UidLease:
    """An unprivileged uid held by one run, host-wide: a lock on ``LEASE_DIR/<uid>`` (``flock``), so two
    runs — in this process, another pool, or another process — never share a uid. Use as a context
    manager; :attr:`uid` is the leased uid. Introduced in lesson 06."""

    _next = 0
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.uid: int | None = None
        self._fd: int | None = None

    def __enter__(self) -> "UidLease":
        LEASE_DIR.mkdir(parents=True, exist_ok=True)
        with UidLease._lock:
            start = (os.getpid() * 61 + UidLease._next) % UID_COUNT
            UidLease._next += 1
        for i in range(UID_COUNT):
            uid = UID_BASE + (start + i) % UID_COUNT
            fd = os.open(LEASE_DIR / str(uid), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self.uid, self._fd = uid, fd
            return self
        raise RuntimeError(f"all {UID_COUNT} sandbox uids are in use")

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing releases the flock
            self._fd = None
