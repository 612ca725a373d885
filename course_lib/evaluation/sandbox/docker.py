"""Docker for the sandbox on machines like ours: a private ``dockerd`` and an offline ``python-sandbox`` image.

Docker Hub is unreachable here, so ``assets/sandbox/Dockerfile`` (``FROM python:3.11-slim``) cannot be
built. :func:`build_image` makes an equivalent image offline with ``docker import``: a root file system
holding only the system Python, the shared libraries it and its extension modules load (found with
``ldd``), its standard library and a minimal ``/etc/passwd``. One command::

    python -m course_lib.evaluation.sandbox image      # starts the course's dockerd if needed, then builds the image

:func:`start_daemon` starts ``dockerd --iptables=false --ip6tables=false --bridge=none`` with its own data
root, exec root and socket (``/run/course-sandbox/docker.sock``) when no daemon answers; the caller stops
what it started with :meth:`Daemon.stop`.

Introduced in lesson 06.
"""
from __future__ import annotations

import io
import os
import re
import shutil
import signal
import subprocess
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from course_lib.evaluation.sandbox.backends import IMAGE
from course_lib.evaluation.sandbox.runtime import sandbox_python

STATE_DIR = Path(os.environ.get("SANDBOX_DOCKER_STATE", "/var/lib/course-sandbox"))
RUN_DIR = Path(os.environ.get("SANDBOX_DOCKER_RUN", "/run/course-sandbox"))
COURSE_SOCKET = RUN_DIR / "docker.sock"


def docker_host() -> str | None:
    """The daemon address the sandbox talks to: ``$SANDBOX_DOCKER_HOST``, ``$DOCKER_HOST``, the course's
    own socket when it exists, else None (the docker client's default, ``/var/run/docker.sock``).
    Introduced in lesson 06."""
    for var in ("SANDBOX_DOCKER_HOST", "DOCKER_HOST"):
        if os.environ.get(var):
            return os.environ[var]
    if COURSE_SOCKET.exists():
        return f"unix://{COURSE_SOCKET}"
    return None


def _docker(*args: str, host: str | None = None, timeout: float = 30, **kw) -> subprocess.CompletedProcess:
    docker = shutil.which("docker")
    if not docker:
        raise FileNotFoundError("the docker client is not installed: `apt-get install docker.io` (as root)")
    cmd = [docker] + (["-H", host] if host else []) + list(args)
    return subprocess.run(cmd, capture_output=True, timeout=timeout, **kw)


def daemon_answers(host: str | None = None) -> bool:
    """True when a Docker daemon answers at ``host`` (default :func:`docker_host`). Introduced in lesson 06."""
    if not shutil.which("docker"):
        return False
    try:
        return _docker("version", "--format", "{{.Server.Version}}", host=host or docker_host(),
                       timeout=10).returncode == 0
    except (subprocess.TimeoutExpired, OSError):
        return False


IMAGE_REVISION = "2"
"""The image's ``course.sandbox.revision`` label: 2 = the system Python, the runtime and the g++ toolchain
(:mod:`course_lib.evaluation.sandbox.cpp`). An image with another revision (an older one without g++)
counts as missing, so :func:`ensure_docker` builds it again."""


def image_exists(host: str | None = None, image: str = IMAGE) -> bool:
    """True when the daemon at ``host`` has the sandbox image at :data:`IMAGE_REVISION`. Introduced in lesson 06."""
    try:
        res = _docker("image", "inspect", "--format", '{{index .Config.Labels "course.sandbox.revision"}}', image,
                      host=host or docker_host(), timeout=20)
        return res.returncode == 0 and res.stdout.decode(errors="replace").strip() == IMAGE_REVISION
    except (subprocess.TimeoutExpired, OSError, FileNotFoundError):
        return False


@dataclass
class Daemon:
    """A Docker daemon the sandbox can use; ``started`` says whether we started it (then stop it)."""

    host: str | None
    started: bool
    pid: int | None = None
    proc: subprocess.Popen | None = field(default=None, repr=False, compare=False)

    def stop(self, timeout_s: float = 20.0) -> None:
        """Stop the daemon if this process started it (SIGTERM, then SIGKILL)."""
        if not (self.started and self.pid):
            return
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        if self.proc is not None:  # our child: wait for it (no zombie left behind)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.started = False
            return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.started = False


def start_daemon(wait_s: float = 60.0) -> Daemon:
    """Make sure a Docker daemon answers; start the course's own ``dockerd`` if none does.

    The course's daemon: ``dockerd --iptables=false --ip6tables=false --bridge=none`` with data root
    ``/var/lib/course-sandbox/docker``, exec root ``/run/course-sandbox/exec`` and socket
    ``/run/course-sandbox/docker.sock`` (no networking is needed: samples run with ``--network none``).
    Needs root and ``dockerd`` (``apt-get install docker.io``). Introduced in lesson 06.
    """
    host = docker_host()
    if daemon_answers(host):
        return Daemon(host=host, started=False)
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    import fcntl

    with open(RUN_DIR / "start.lock", "w") as lock:  # two sessions starting at once: one daemon
        fcntl.flock(lock, fcntl.LOCK_EX)
        host = docker_host()
        if daemon_answers(host):
            return Daemon(host=host, started=False)
        return _spawn_dockerd(wait_s)


def _spawn_dockerd(wait_s: float) -> Daemon:
    dockerd = shutil.which("dockerd")
    if not dockerd:
        raise RuntimeError("no Docker daemon answers and dockerd is not installed: "
                           "`apt-get install docker.io` (as root), or use SANDBOX_BACKEND=bwrap")
    if os.geteuid() != 0:
        raise RuntimeError("no Docker daemon answers and starting dockerd needs root; "
                           "start Docker yourself or use SANDBOX_BACKEND=bwrap")
    (STATE_DIR / "docker").mkdir(parents=True, exist_ok=True)
    (RUN_DIR / "exec").mkdir(parents=True, exist_ok=True)
    pidfile = RUN_DIR / "dockerd.pid"
    if pidfile.exists():  # a stale daemon of ours that no longer answers
        try:
            os.kill(int(pidfile.read_text().strip()), 0)
            raise RuntimeError(f"the course's dockerd (pid file {pidfile}) runs but does not answer; "
                               f"see {STATE_DIR / 'dockerd.log'}")
        except (ProcessLookupError, ValueError):
            pidfile.unlink(missing_ok=True)
    log = open(STATE_DIR / "dockerd.log", "ab")
    proc = subprocess.Popen(
        [dockerd, "--iptables=false", "--ip6tables=false", "--bridge=none",
         "--data-root", str(STATE_DIR / "docker"), "--exec-root", str(RUN_DIR / "exec"),
         "-H", f"unix://{COURSE_SOCKET}", "--pidfile", str(pidfile)],
        stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    host = f"unix://{COURSE_SOCKET}"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"dockerd exited with code {proc.returncode}; see {STATE_DIR / 'dockerd.log'}")
        if COURSE_SOCKET.exists() and daemon_answers(host):
            return Daemon(host=host, started=True, pid=proc.pid, proc=proc)
        time.sleep(0.3)
    proc.terminate()
    raise RuntimeError(f"dockerd did not answer within {wait_s:.0f} s; see {STATE_DIR / 'dockerd.log'}")


# --- the offline image -----------------------------------------------------------------------------

def _python_paths(python: Path) -> dict:
    probe = ("import sys, sysconfig, json; p = sysconfig.get_paths(); print(json.dumps({"
             "'stdlib': p['stdlib'], 'platstdlib': p['platstdlib'], 'exe': sys.executable, "
             "'dynload': [m for m in sys.path if m.endswith('lib-dynload')]}))")
    import json

    out = subprocess.run([str(python), "-I", "-S", "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def _shared_libraries(binaries: list[Path]) -> set[str]:
    libs: set[str] = set()
    for binary in binaries:
        res = subprocess.run(["ldd", str(binary)], capture_output=True, text=True)
        for line in res.stdout.splitlines():
            parts = line.split()
            if "=>" in parts:
                idx = parts.index("=>")
                if idx + 1 < len(parts) and parts[idx + 1].startswith("/"):
                    libs.add(parts[idx + 1])
            elif parts and parts[0].startswith("/"):
                libs.add(parts[0])
    return libs


_SKIP_DIRS = {"test", "tests", "idlelib", "tkinter", "turtledemo", "ensurepip", "__pycache__", "lib2to3",
              "site-packages", "dist-packages", "config-3.11-x86_64-linux-gnu"}


TOOLCHAIN_PACKAGES = ("g++",)
"""Debian packages whose files (with their installed dependencies) the image carries for the C++ judge."""
_TOOLCHAIN_SKIP_PACKAGES = {"libasan8", "liblsan0", "libtsan2", "libubsan1", "libhwasan0", "libgprofng0"}
_TOOLCHAIN_SKIP = re.compile(r"^/usr/share/(doc|man|info|locale|lintian|bug|gdb)/|/(lto1|cc1|[^/]*lto-dump[^/]*)$"
                             r"|/lib(a|l|t|ub|hwa)san[^/]*$")


def _installed_dependencies(roots: tuple[str, ...]) -> list[str]:
    seen: dict[str, bool] = {}
    todo = list(roots)
    while todo:
        pkg = todo.pop()
        if pkg in seen or pkg in _TOOLCHAIN_SKIP_PACKAGES:
            continue
        out = subprocess.run(["dpkg-query", "-W", "-f=${Depends}, ${Pre-Depends}", pkg], capture_output=True, text=True)
        seen[pkg] = out.returncode == 0
        if out.returncode:
            continue
        for alternatives in out.stdout.split(","):
            for choice in alternatives.split("|"):
                name = re.split(r"[ (:]", choice.strip())[0]
                if name:   # the first alternative that is installed, else the first one
                    if subprocess.run(["dpkg-query", "-W", name], capture_output=True).returncode == 0:
                        todo.append(name)
                        break
    return sorted(p for p, ok in seen.items() if ok)


def toolchain_files() -> list[str]:
    """The files of the g++ toolchain (:data:`TOOLCHAIN_PACKAGES` and the installed packages they depend
    on, without documentation, the C compiler proper, LTO and the sanitizer runtimes), as ``dpkg -L``
    lists them. Raises RuntimeError saying what to install when g++ is missing. Introduced for issue 38."""
    if not shutil.which("dpkg-query") or subprocess.run(["dpkg-query", "-W", "g++"], capture_output=True).returncode:
        raise RuntimeError("the C++ judge's toolchain is missing: `apt-get install g++` (as root; scripts/setup.sh does it)")
    files: list[str] = []
    for pkg in _installed_dependencies(TOOLCHAIN_PACKAGES):
        listing = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True).stdout.splitlines()
        files += [f for f in listing if f.startswith("/") and not _TOOLCHAIN_SKIP.search(f)
                  and not os.path.isdir(f) and (os.path.islink(f) or os.path.isfile(f))]
    return sorted(set(files))


def rootfs_tar(python: Path | None = None) -> bytes:
    """A tar archive of a minimal root file system that runs ``python3``: the interpreter, its shared
    libraries, its standard library (without tests and GUI modules), the sandbox runtime (numpy,
    pandas: :mod:`course_lib.evaluation.sandbox.runtime`) and the libraries its extensions load, /etc/passwd and
    an empty /tmp.
    Introduced in lesson 06."""
    python = Path(python or sandbox_python())
    info = _python_paths(python)
    exe = Path(info["exe"]).resolve()
    stdlib = Path(info["stdlib"])
    dynload = [Path(d) for d in info["dynload"]] or [stdlib / "lib-dynload"]
    extension_modules = [p for d in dynload if d.is_dir() for p in d.glob("*.so")]
    from course_lib.evaluation.sandbox.runtime import runtime_site_packages

    runtime = runtime_site_packages()
    if runtime is None:
        raise RuntimeError("the sandbox runtime (numpy, pandas) is not built: "
                           "`python -m course_lib.evaluation.sandbox runtime` first")
    extension_modules += list(runtime.rglob("*.so"))
    # libraries the runtime bundles itself (numpy.libs, found through $ORIGIN rpaths) travel with it
    libs = {lib for lib in _shared_libraries([exe] + extension_modules)
            if not os.path.realpath(lib).startswith(os.path.realpath(runtime) + os.sep)}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        def add_dir(name: str, mode: int = 0o755) -> None:
            ti = tarfile.TarInfo(name.lstrip("/"))
            ti.type, ti.mode = tarfile.DIRTYPE, mode
            tar.addfile(ti)

        def add_bytes(name: str, data: bytes, mode: int = 0o644) -> None:
            ti = tarfile.TarInfo(name.lstrip("/"))
            ti.size, ti.mode = len(data), mode
            tar.addfile(ti, io.BytesIO(data))

        for d in ("/tmp",):
            add_dir(d, 0o1777)
        for d in ("/etc", "/usr", "/usr/bin"):
            add_dir(d)
        add_bytes("/etc/passwd", b"root:x:0:0:root:/root:/bin/false\nnobody:x:65534:65534:nobody:/tmp:/bin/false\n")
        add_bytes("/etc/group", b"root:x:0:\nnogroup:x:65534:\n")
        # the interpreter at its own path, plus /usr/bin/python3 -> it
        tar.add(str(exe), arcname=str(exe).lstrip("/"))
        if str(exe) != "/usr/bin/python3":
            ti = tarfile.TarInfo("usr/bin/python3")
            ti.type, ti.linkname = tarfile.SYMTYPE, str(exe)
            tar.addfile(ti)
        added = set()
        for lib in sorted(libs):
            tar.add(os.path.realpath(lib), arcname=lib.lstrip("/"))
            added.add(lib.lstrip("/"))
        # the C++ judge's g++ toolchain, each file at its packaged path (links stay links)
        for path in toolchain_files():
            arcname = path.lstrip("/")
            if arcname not in added and not arcname.startswith("usr/bin/python"):
                tar.add(path, arcname=arcname, recursive=False)
                added.add(arcname)
        for root, dirs, files in os.walk(stdlib):
            dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]
            for f in files:
                path = Path(root) / f
                tar.add(str(path), arcname=str(path).lstrip("/"), recursive=False)
        for d in dynload:
            if not str(d).startswith(str(stdlib)) and d.is_dir():
                tar.add(str(d), arcname=str(d).lstrip("/"))
        # the sandbox runtime where the system Python's site looks: /usr/local/lib/python3.X/dist-packages
        target = f"usr/local/lib/{exe.name}/dist-packages"
        for path in sorted(runtime.rglob("*")):
            if path.is_file() and path.name != ".complete":
                tar.add(str(path), arcname=f"{target}/{path.relative_to(runtime)}", recursive=False)
    return buf.getvalue()


def build_image(host: str | None = None, image: str = IMAGE, python: Path | None = None) -> str:
    """Build the ``python-sandbox`` image offline with ``docker import`` (no registry needed).

    Equivalent to ``assets/sandbox/Dockerfile`` for the sandbox's purpose: ``python3`` on PATH, user
    65534, workdir /tmp. Returns the image name. Introduced in lesson 06.
    """
    host = host or docker_host()
    data = rootfs_tar(python)
    res = _docker("import", "--change", "USER 65534:65534", "--change", "WORKDIR /tmp",
                  "--change", f"LABEL course.sandbox.revision={IMAGE_REVISION}",
                  "--change", "ENV PATH=/usr/local/bin:/usr/bin:/bin", "--change", 'CMD ["python3"]',
                  "--message", "course_lib.evaluation.sandbox offline image (docker import)", "-", image,
                  host=host, timeout=300, input=data)
    if res.returncode != 0:
        raise RuntimeError(f"docker import failed: {res.stderr.decode(errors='replace').strip()}")
    return image


def ensure_docker(build: bool = True) -> Daemon:
    """Start the daemon if needed and build the image if missing; returns the :class:`Daemon` (call
    ``.stop()`` when done if ``.started``). Introduced in lesson 06."""
    daemon = start_daemon()
    if build and not image_exists(daemon.host):
        build_image(daemon.host)
    return daemon
