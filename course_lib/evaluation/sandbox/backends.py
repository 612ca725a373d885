"""The sandbox backends: how one sample's command line is built, per backend.

* ``bwrap``  — a drop to a per-run unprivileged uid (``setpriv``), then bubblewrap namespaces (user with
  ``--disable-userns``, pid, net, ipc, uts), a seccomp filter (:mod:`course_lib.evaluation.sandbox.seccomp`),
  read-only system Python plus the numpy/pandas runtime, private tmpfs ``/tmp``, nothing of the
  project, home folder or Docker socket, cleared environment; one cgroup per run bounds memory,
  processes and CPU of the sample as a whole (:mod:`course_lib.evaluation.sandbox.cgroups`).
* ``docker`` — the lesson's design: image ``python-sandbox``, ``--network none --memory 128m``, plus
  ``--pids-limit``, ``--cpus 1``, ``--read-only``, tmpfs ``/tmp``, ``--cap-drop ALL``, no-new-privileges, non-root user.
* ``unsafe`` — a plain subprocess with rlimits. NOT isolation; only on explicit request.

Introduced in lesson 06.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from course_lib.evaluation.sandbox._harness import HARNESS_SOURCE

UID_BASE = 60000          # sandboxed code runs as a uid in [UID_BASE, UID_BASE + UID_COUNT), one per run
UID_COUNT = 4096
TMP_BYTES = 16 * 1024 * 1024
FILE_BYTES = 8 * 1024 * 1024
MAX_PROCS = 64
MAX_OPEN_FILES = 64
AS_BACKSTOP = 4           # with a per-sample memory cgroup: address space per process, x memory_mb
CPUS = 1.0                # CPU budget of one sample with cgroups (cores)
IMAGE = os.environ.get("SANDBOX_IMAGE", "python-sandbox")
LEASE_DIR = Path(os.environ.get("SANDBOX_LEASE_DIR", "/run/course-sandbox/uids"))


@dataclass(frozen=True)
class Limits:
    """The resource limits of one run (wall time, memory); invalid values raise ValueError."""

    timeout_s: float
    memory_mb: int

    def __post_init__(self) -> None:
        if not (isinstance(self.timeout_s, (int, float)) and self.timeout_s > 0 and self.timeout_s < 1e6):
            raise ValueError(f"timeout_s must be a positive number of seconds, got {self.timeout_s!r}")
        if isinstance(self.memory_mb, bool) or not isinstance(self.memory_mb, int) or not 16 <= self.memory_mb <= 1 << 20:
            raise ValueError(f"memory_mb must be an integer number of MiB >= 16, got {self.memory_mb!r}")

    def rlimits(self, nproc: bool = True, per_sample_memory: bool = False) -> dict:
        """The rlimits the harness sets on itself. With ``per_sample_memory`` (a cgroup bounds the sample
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


def sandbox_python() -> Path:
    """The interpreter that runs sampled code: ``$SANDBOX_PYTHON``, else the system ``/usr/bin/python3``,
    else the base (non-venv) interpreter of this Python. Never the course's virtual environment.
    Introduced in lesson 06."""
    env = os.environ.get("SANDBOX_PYTHON")
    candidates = [env] if env else ["/usr/bin/python3", "/usr/local/bin/python3",
                                    os.path.join(sys.base_prefix, "bin", "python3")]
    for cand in candidates:
        if cand and os.access(cand, os.X_OK):
            return Path(cand)
    raise FileNotFoundError("no Python for the sandbox: install python3 or set SANDBOX_PYTHON=/path/to/python3")


def _python_prefix(python: Path) -> Path:
    real = python.resolve()
    return real.parent.parent  # .../bin/python3.x -> prefix


def harness_argv(python: str = "python3") -> list[str]:
    """The command that starts the harness inside the sandbox (``-I``: no environment variables, no user
    site; ``site`` itself stays on, as for ``python file.py``). Introduced in lesson 06."""
    return [python, "-I", "-c", HARNESS_SOURCE]


# --- bwrap -----------------------------------------------------------------------------------------

def _runtime_mount(python: Path) -> list[str]:
    from course_lib.evaluation.sandbox.runtime import runtime_site_packages

    site = runtime_site_packages()
    name = python.resolve().name  # python3.11
    if site is None or not name.startswith("python3."):
        return []
    return ["--ro-bind", str(site), f"/usr/local/lib/{name}/dist-packages"]


def bwrap_argv(uid: int, seccomp_fd: int | None = None) -> list[str]:
    """bubblewrap command line of one run as ``uid``: what the sample sees is only the system's /usr
    (and the interpreter's prefix at its real path), the sandbox runtime (numpy, pandas) read-only,
    /etc/ld.so.cache, a private /proc, /dev and a 16 MiB /tmp. As root, ``setpriv`` first switches to
    ``uid`` (no capabilities, no groups); bwrap then runs unprivileged in a new user namespace with
    ``--disable-userns`` (no further user namespaces inside, so no way back to capabilities) and applies
    the seccomp filter read from ``seccomp_fd``. Introduced in lesson 06."""
    bwrap = shutil.which("bwrap")
    setpriv = shutil.which("setpriv")
    if not bwrap:
        raise FileNotFoundError("bubblewrap is not installed: `apt-get install bubblewrap` (as root)")
    python = sandbox_python()
    argv: list[str] = []
    if os.geteuid() == 0:
        if not setpriv:
            raise FileNotFoundError("setpriv (util-linux) is needed to drop root before bwrap")
        argv += [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
                 "--bounding-set=-all", "--"]
    argv += [bwrap, "--unshare-user", "--disable-userns", "--uid", str(uid), "--gid", str(uid),
             "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
             "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--hostname", "sandbox",
             "--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    prefix = _python_prefix(python)
    if not str(prefix).startswith("/usr/"):
        argv += ["--ro-bind", str(prefix), str(prefix)]
    if os.path.isdir("/usr/local") and not str(prefix).startswith("/usr/local"):
        # /usr/local holds site tools (and here the course machines' own); the sandbox sees only the runtime
        argv += ["--tmpfs", "/usr/local"] + _runtime_mount(python) + ["--remount-ro", "/usr/local"]
    for etc_file in ("/etc/ld.so.cache", "/etc/localtime"):
        if os.path.exists(etc_file):
            argv += ["--ro-bind", etc_file, etc_file]
    argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(TMP_BYTES), "--tmpfs", "/tmp",
             "--perms", "1777", "--size", str(TMP_BYTES), "--tmpfs", "/dev/shm",
             "--remount-ro", "/", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp",
             "--setenv", "LANG", "C.UTF-8", "--setenv", "OPENBLAS_NUM_THREADS", "1",
             "--setenv", "OMP_NUM_THREADS", "1", "--chdir", "/tmp"]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    return argv + ["--"] + harness_argv(str(python))


# --- docker ----------------------------------------------------------------------------------------

def docker_argv(uid: int, limits: Limits, name: str, host: str | None) -> list[str]:
    """``docker run`` command line of one sample (container ``name``, killed by name on timeout).
    Introduced in lesson 06."""
    docker = shutil.which("docker")
    if not docker:
        raise FileNotFoundError("the docker client is not installed: `apt-get install docker.io` (as root)")
    argv = [docker] + (["-H", host] if host else [])
    argv += ["run", "--rm", "-i", "--name", name, "--network", "none",
             "--memory", f"{limits.memory_mb}m", "--memory-swap", f"{limits.memory_mb}m",
             "--pids-limit", str(MAX_PROCS), "--read-only",
             "--tmpfs", f"/tmp:rw,nosuid,nodev,size={TMP_BYTES // (1024 * 1024)}m,mode=1777",
             "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", f"{uid}:{uid}",
             "--workdir", "/tmp", "--env", "HOME=/tmp", "--env", "OPENBLAS_NUM_THREADS=1",
             "--cpus", str(CPUS), "--log-driver", "none", "--stop-timeout", "1",
             IMAGE]
    return argv + harness_argv("python3")


# --- unsafe ----------------------------------------------------------------------------------------

def unsafe_argv() -> list[str]:
    """A plain subprocess: same harness, same rlimits, no isolation at all. Introduced in lesson 06."""
    return harness_argv(str(sandbox_python()))
