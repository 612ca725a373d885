"""The sandbox backends: how one sample's command line is built, per backend.

* ``bwrap``  — bubblewrap namespaces (pid, net, ipc, uts), read-only system Python, private tmpfs
  ``/tmp``, nothing of the project, home folder or Docker socket, cleared environment, then a drop to a
  per-worker unprivileged uid (``setpriv``) so RLIMIT_NPROC bites.
* ``docker`` — the lesson's design: image ``python-sandbox``, ``--network none --memory 128m``, plus
  ``--pids-limit``, ``--read-only``, tmpfs ``/tmp``, ``--cap-drop ALL``, no-new-privileges, non-root user.
* ``unsafe`` — a plain subprocess with rlimits. NOT isolation; only on explicit request.

Introduced in lesson 06.
"""
from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from course_lib.sandbox._harness import HARNESS_SOURCE

UID_BASE = 60000          # sandboxed code runs as uid UID_BASE + <process offset> + <worker slot>
TMP_BYTES = 16 * 1024 * 1024
FILE_BYTES = 8 * 1024 * 1024
MAX_PROCS = 64
MAX_OPEN_FILES = 64
IMAGE = os.environ.get("SANDBOX_IMAGE", "python-sandbox")


@dataclass(frozen=True)
class Limits:
    """The resource limits of one run (wall time, memory) and the derived rlimits."""

    timeout_s: float = 10.0
    memory_mb: int = 128

    def rlimits(self, nproc: bool = True) -> dict:
        return {"as": self.memory_mb * 1024 * 1024, "cpu": int(self.timeout_s) + 2, "fsize": FILE_BYTES,
                "nofile": MAX_OPEN_FILES, "nproc": MAX_PROCS if nproc else None, "core": 0}


def sandbox_uid(slot: int) -> int:
    """The unprivileged uid for worker ``slot`` of this process (distinct per process and per worker,
    so one sample's fork bomb never eats another worker's process budget). Introduced in lesson 06."""
    return UID_BASE + (os.getpid() % 512) * 64 + (slot % 64)


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
    """The command that starts the harness inside the sandbox (``-I -S``: no environment, no site).
    Introduced in lesson 06."""
    return [python, "-I", "-S", "-c", HARNESS_SOURCE]


# --- bwrap -----------------------------------------------------------------------------------------

def bwrap_argv(slot: int) -> list[str]:
    """bubblewrap command line for worker ``slot``: what the sample sees is only the system's /usr (and
    the interpreter's prefix at its real path), /etc/ld.so.cache, a private /proc, /dev and a 16 MiB
    /tmp. Capabilities are dropped by ``setpriv`` together with the switch to an unprivileged uid.
    Introduced in lesson 06."""
    bwrap = shutil.which("bwrap")
    setpriv = shutil.which("setpriv")
    if not bwrap:
        raise FileNotFoundError("bubblewrap is not installed: `apt-get install bubblewrap` (as root)")
    python = sandbox_python()
    argv = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--hostname", "sandbox",
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
        # /usr/local holds site tools (and here the course machines' own); the sandbox needs none of them
        argv += ["--tmpfs", "/usr/local", "--remount-ro", "/usr/local"]
    for etc_file in ("/etc/ld.so.cache", "/etc/localtime"):
        if os.path.exists(etc_file):
            argv += ["--ro-bind", etc_file, etc_file]
    argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(TMP_BYTES), "--tmpfs", "/tmp",
             "--remount-ro", "/", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp",
             "--setenv", "LANG", "C.UTF-8", "--chdir", "/tmp"]
    uid = sandbox_uid(slot)
    if os.geteuid() == 0:
        if not setpriv:
            raise FileNotFoundError("setpriv (util-linux) is needed to drop root inside bwrap")
        argv += ["--", setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                 "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs"]
    else:  # unprivileged bwrap: a user namespace maps us to an unprivileged uid already
        argv += ["--unshare-user", "--uid", str(uid), "--gid", str(uid), "--cap-drop", "ALL", "--"]
    return argv + harness_argv(str(python))


# --- docker ----------------------------------------------------------------------------------------

def docker_argv(slot: int, limits: Limits, name: str, host: str | None) -> list[str]:
    """``docker run`` command line of one sample (container ``name``, killed by name on timeout).
    Introduced in lesson 06."""
    docker = shutil.which("docker")
    if not docker:
        raise FileNotFoundError("the docker client is not installed: `apt-get install docker.io` (as root)")
    uid = sandbox_uid(slot)
    argv = [docker] + (["-H", host] if host else [])
    argv += ["run", "--rm", "-i", "--name", name, "--network", "none",
             "--memory", f"{limits.memory_mb}m", "--memory-swap", f"{limits.memory_mb}m",
             "--pids-limit", str(MAX_PROCS), "--read-only",
             "--tmpfs", f"/tmp:rw,nosuid,nodev,size={TMP_BYTES // (1024 * 1024)}m,mode=1777",
             "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", f"{uid}:{uid}",
             "--workdir", "/tmp", "--env", "HOME=/tmp", "--log-driver", "none", "--stop-timeout", "1",
             IMAGE]
    return argv + harness_argv("python3")


# --- unsafe ----------------------------------------------------------------------------------------

def unsafe_argv() -> list[str]:
    """A plain subprocess: same harness, same rlimits, no isolation at all. Introduced in lesson 06."""
    return harness_argv(str(sandbox_python()))
