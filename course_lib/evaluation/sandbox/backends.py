"""The sandbox backends: the command line of one sample, per backend.

* ``bwrap``  — a drop to a per-run unprivileged uid (``setpriv``), then bubblewrap namespaces (user with
  ``--disable-userns``, pid, net, ipc, uts), a seccomp filter (:mod:`course_lib.evaluation.sandbox.seccomp`),
  read-only system Python plus the numpy/pandas runtime, private tmpfs ``/tmp``, nothing of the
  project, home folder or Docker socket, cleared environment, ``/proc/cmdline`` masked, and every mount
  at its own path (so ``/proc/self/mountinfo`` names no host path the sample cannot see anyway); one
  cgroup per run bounds memory, processes and CPU of the sample as a whole
  (:mod:`course_lib.evaluation.sandbox.cgroups`).
* ``docker`` — the lesson's design: image ``python-sandbox``, ``--network none --memory 128m``, plus
  ``--pids-limit``, ``--cpus 1``, ``--read-only``, tmpfs ``/tmp``, ``--cap-drop ALL``, no-new-privileges, non-root user.
* ``unsafe`` — a plain subprocess with rlimits. NOT isolation; only on explicit request.

Every backend runs the same in-sandbox server, :mod:`course_lib.evaluation.sandbox.inside`, as
``python3 -I -c <its source>``.

Introduced in lesson 06.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path

from course_lib.evaluation.sandbox.limits import CPUS, MAX_PROCS, TMP_BYTES, Limits
from course_lib.evaluation.sandbox.runtime import runtime_site_packages, sandbox_python

IMAGE = os.environ.get("SANDBOX_IMAGE", "python-sandbox")
INSIDE_SOURCE = (Path(__file__).with_name("inside.py")).read_text(encoding="utf-8")
"""The source of :mod:`course_lib.evaluation.sandbox.inside`, read once at import and sent with ``-c``."""
_bytecode: dict[str, str | None] = {}
_bytecode_lock = threading.Lock()


def _inside_bytecode(python: str) -> str | None:
    """A ``-c`` program that runs the server compiled by ``python`` itself (marshal, hex), made once per
    process; None when that fails.
    Loading it costs ~0.1 ms in the sandbox where compiling the source costs ~3.5 ms."""
    with _bytecode_lock:
        if python not in _bytecode:
            probe = ("import marshal, sys; sys.stdout.write(marshal.dumps(compile(sys.stdin.read(), "
                     "'<string>', 'exec', dont_inherit=True)).hex())")
            try:
                out = subprocess.run([python, "-I", "-S", "-c", probe], input=INSIDE_SOURCE, capture_output=True,
                                     text=True, timeout=60)
                code = out.stdout.strip() if out.returncode == 0 else ""
                _bytecode[python] = f"import marshal; exec(marshal.loads(bytes.fromhex({code!r})))" if code else None
            except (OSError, subprocess.SubprocessError):
                _bytecode[python] = None
        return _bytecode[python]


def inside_argv(python: str = "python3", *, precompiled: bool = False) -> list[str]:
    """The command that starts the in-sandbox server (``-I``: no environment variables, no user site;
    ``site`` itself stays on, as for ``python file.py``). With ``precompiled`` (``python`` is a path on
    this machine) the server travels as bytecode that interpreter compiled, else as source.
    Introduced in lesson 06."""
    program = _inside_bytecode(python) if precompiled else None
    return [python, "-I", "-c", INSIDE_SOURCE if program is None else program]


def _python_prefix(python: Path) -> Path:
    return python.resolve().parent.parent  # .../bin/python3.x -> prefix


def runtime_paths() -> list[str]:
    """Folders the in-sandbox server adds to ``sys.path`` (bwrap: the numpy/pandas runtime, bound at its
    own path). Introduced in lesson 06."""
    site = runtime_site_packages()
    return [str(site)] if site is not None else []


# --- bwrap -----------------------------------------------------------------------------------------

def bwrap_argv(uid: int, seccomp_fd: int | None = None, tmp_bytes: int = TMP_BYTES,
               command: list[str] | None = None) -> list[str]:
    """bubblewrap command line of one run as ``uid``: what the sample sees is only the system's /usr
    (and the interpreter's prefix at its real path), the sandbox runtime (numpy, pandas) read-only,
    /etc/ld.so.cache, a private /proc (with /proc/cmdline masked), /dev and a private /tmp of
    ``tmp_bytes``. As root, ``setpriv`` first switches to ``uid`` (no capabilities, no groups); bwrap then
    runs unprivileged in a new user namespace with ``--disable-userns`` (no further user namespaces
    inside, so no way back to capabilities) and applies the seccomp filter read from ``seccomp_fd``.
    ``command`` defaults to the in-sandbox server. Introduced in lesson 06."""
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
        # /usr/local holds site tools (and here the course machines' own): the sandbox sees it empty
        argv += ["--tmpfs", "/usr/local", "--remount-ro", "/usr/local"]
    for site in runtime_paths():  # at its own path: mountinfo shows no host path the sample cannot see
        argv += ["--ro-bind", site, site]
    if os.path.exists("/etc/ld.so.cache"):
        argv += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    if os.path.islink("/etc/localtime"):
        argv += ["--symlink", os.readlink("/etc/localtime"), "/etc/localtime"]
    elif os.path.exists("/etc/localtime"):
        argv += ["--ro-bind", "/etc/localtime", "/etc/localtime"]
    argv += ["--proc", "/proc", "--ro-bind", "/dev/null", "/proc/cmdline",
             "--dev", "/dev", "--perms", "1777", "--size", str(tmp_bytes), "--tmpfs", "/tmp",
             "--perms", "1777", "--size", str(TMP_BYTES), "--tmpfs", "/dev/shm",
             "--remount-ro", "/", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp",
             "--setenv", "LANG", "C.UTF-8", "--setenv", "OPENBLAS_NUM_THREADS", "1",
             "--setenv", "OMP_NUM_THREADS", "1", "--chdir", "/tmp"]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    return argv + ["--"] + (command or inside_argv(str(python), precompiled=True))


# --- docker ----------------------------------------------------------------------------------------

def docker_argv(uid: int, limits: Limits, name: str, host: str | None, tmp_bytes: int = TMP_BYTES,
                command: list[str] | None = None, tmp_exec: bool = False) -> list[str]:
    """``docker run`` command line of one sample (container ``name``, killed by name on timeout).
    ``command`` defaults to the in-sandbox server. Docker mounts a ``--tmpfs`` ``noexec`` unless told
    otherwise: ``tmp_exec`` (a compiled C++ program, :mod:`course_lib.evaluation.sandbox.cpp`) mounts
    ``/tmp`` with ``exec``. Introduced in lesson 06."""
    docker = shutil.which("docker")
    if not docker:
        raise FileNotFoundError("the docker client is not installed: `apt-get install docker.io` (as root)")
    tmp_mb = max(1, -(-tmp_bytes // (1024 * 1024)))
    argv = [docker] + (["-H", host] if host else [])
    argv += ["run", "--rm", "-i", "--name", name, "--network", "none",
             "--memory", f"{limits.memory_mb}m", "--memory-swap", f"{limits.memory_mb}m",
             "--pids-limit", str(MAX_PROCS), "--read-only",
             "--tmpfs", f"/tmp:rw,{'exec,' if tmp_exec else ''}nosuid,nodev,size={tmp_mb}m,mode=1777",
             "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", f"{uid}:{uid}",
             "--workdir", "/tmp", "--env", "HOME=/tmp", "--env", "OPENBLAS_NUM_THREADS=1",
             "--cpus", str(CPUS), "--log-driver", "none", "--stop-timeout", "1",
             IMAGE]
    return argv + (command or inside_argv("python3"))


# --- unsafe ----------------------------------------------------------------------------------------

def unsafe_argv(command: list[str] | None = None) -> list[str]:
    """A plain subprocess: the same server, the same rlimits, no isolation at all. Introduced in lesson 06."""
    return command or inside_argv(str(sandbox_python()), precompiled=True)
