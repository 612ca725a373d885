"""Run untrusted, model-written Python code and its tests in a sandbox.

One interface, several backends (``bwrap``, ``docker``, ``unsafe``; ``auto`` picks), chosen with the
``backend`` argument or ``$SANDBOX_BACKEND``::

    from course_lib.evaluation.sandbox import run_code, run_many
    r = run_code("def add(a, b):\\n    return a + b", "assert add(1, 2) == 3")
    r.status   # 'passed'

Statuses: ``passed``, ``failed`` (a test failed, or the program exited before the end-of-run marker),
``syntax_error``, ``runtime_error``, ``timeout``, ``memory_limit``, ``output_limit``, ``sandbox_error``.

Introduced in lesson 06.
"""
from __future__ import annotations

import os
import secrets
import selectors
import signal
import subprocess
import time
import uuid
import warnings
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from course_lib.evaluation.sandbox import backends as _b
from course_lib.evaluation.sandbox._harness import decode_report, encode_payload
from course_lib.evaluation.sandbox.backends import Limits, UidLease
from course_lib.evaluation.sandbox.cgroups import RunCgroup, cgroup_support

STATUSES = ("passed", "failed", "syntax_error", "runtime_error", "timeout", "memory_limit",
            "output_limit", "sandbox_error")
BACKENDS = ("bwrap", "docker", "unsafe")
OUTPUT_CAP = 64 * 1024          # bytes kept per stream; more output ends the run with output_limit


@dataclass
class SandboxResult:
    """What happened to one sample. ``tests`` holds one outcome per test (``ok``, ``assert``, ``error``)."""

    status: str
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    exit_code: int | None = None
    backend: str = ""
    tests: list[str] = field(default_factory=list)
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def tests_passed(self) -> int:
        return sum(t == "ok" for t in self.tests)

    @property
    def tests_total(self) -> int:
        return len(self.tests)

    def __repr__(self) -> str:
        extra = f", tests={self.tests_passed}/{self.tests_total}" if self.tests else ""
        detail = f", detail={self.detail[:80]!r}" if self.detail else ""
        return (f"SandboxResult(status={self.status!r}{extra}, backend={self.backend!r}, "
                f"duration_s={self.duration_s:.3f}{detail})")


# --- choosing a backend ----------------------------------------------------------------------------

_probe_cache: dict[str, tuple[bool, str, float]] = {}
_unsafe_warned = False
DOCKER_PROBE_TTL_S = 30.0   # a daemon can come and go; bwrap's answer does not change within a process


def _probe(name: str) -> tuple[bool, str]:
    """(works, reason) for a backend, by really running a tiny sample (cached per process; Docker's
    answer for :data:`DOCKER_PROBE_TTL_S`)."""
    if name in _probe_cache:
        ok, reason, when = _probe_cache[name]
        if name != "docker" or time.monotonic() - when < DOCKER_PROBE_TTL_S:
            return ok, reason
    ok, reason = False, ""
    if name == "docker":
        from course_lib.evaluation.sandbox import docker as d

        if not d.daemon_answers():
            reason = "no Docker daemon answers (start one: `python -m course_lib.evaluation.sandbox daemon`)"
        elif not d.image_exists():
            reason = f"the {_b.IMAGE!r} image is missing (build it: `python -m course_lib.evaluation.sandbox image`)"
        else:
            ok = True
    else:
        try:
            r = _run_one("assert 1 + 1 == 2", ["assert True"], Limits(10.0, 128), name)
            ok, reason = r.status == "passed", (r.detail or r.stderr.strip()[-300:])
        except (FileNotFoundError, OSError) as exc:
            reason = str(exc)
    _probe_cache[name] = (ok, reason, time.monotonic())
    return ok, reason


def available_backends() -> dict[str, str]:
    """Each real backend with "ok" or the reason it cannot run here (whether bwrap's memory limit is per
    sample: :func:`course_lib.evaluation.sandbox.cgroups.cgroup_support`). Introduced in lesson 06."""
    return {name: ("ok" if ok else reason) for name in ("bwrap", "docker") for ok, reason in [_probe(name)]}


def preferred_backend() -> str | None:
    """The sandbox backend to use here and now, or None when no sandbox works.

    ``$SANDBOX_BACKEND`` when set (read at each call; ``unsafe`` only when named), else the active
    profile's ``sandbox.backend`` when it works, else bubblewrap, else Docker, whichever works first.
    This is the one answer to "is a sandbox there, and which one" for the whole course.
    Introduced in lesson 06."""
    explicit = (os.environ.get("SANDBOX_BACKEND") or "").lower()
    if explicit and explicit != "auto":
        if explicit not in BACKENDS:
            raise ValueError(f"SANDBOX_BACKEND={explicit!r} is not one of auto, {', '.join(BACKENDS)}")
        return explicit if explicit == "unsafe" or _probe(explicit)[0] else None
    candidates = ["bwrap", "docker"]
    if not explicit:
        configured = str(_profile_sandbox().get("backend") or "auto").lower()
        if configured in ("bwrap", "docker"):
            candidates.remove(configured)
            candidates.insert(0, configured)
    for cand in candidates:
        if _probe(cand)[0]:
            return cand
    return None


def _profile_sandbox() -> dict:
    from course_lib.profiles import get_profile

    return dict(get_profile().sandbox)


def resolve_backend(backend: str | None = None) -> str:
    """The backend to use: the argument, else ``$SANDBOX_BACKEND``, else ``auto`` — Docker when a daemon
    answers and has the image, else bubblewrap when a probe run succeeds, else an error that says what
    to install. ``unsafe`` is only ever used when asked for by name. Introduced in lesson 06."""
    name = (backend or os.environ.get("SANDBOX_BACKEND") or "auto").lower()
    if name in BACKENDS:
        return name
    if name != "auto":
        raise ValueError(f"unknown sandbox backend {name!r}; choose one of auto, {', '.join(BACKENDS)}")
    reasons = []
    for cand in ("docker", "bwrap"):
        ok, reason = _probe(cand)
        if ok:
            return cand
        reasons.append(f"{cand}: {reason}")
    raise RuntimeError("no sandbox backend works here (" + "; ".join(reasons) + "). Install bubblewrap "
                       "(`apt-get install bubblewrap`) or Docker (`apt-get install docker.io`), or — only "
                       "on a throwaway machine — set SANDBOX_BACKEND=unsafe (NOT isolation).")


# --- one run -----------------------------------------------------------------------------------------

MARKER_EXIT_GRACE_S = 10.0   # Docker only: after the end-of-run marker, time for the container's teardown


def _communicate(proc: subprocess.Popen, payload: bytes, timeout_s: float, cap: int, startup_s: float,
                 token: bytes = b"", exit_grace_s: float = 0.0):
    """Feed stdin, read stdout/stderr with a cap and a deadline. Returns (out, err, why_stopped).

    The sample's clock starts when the harness writes its "started" byte (so container start-up is not
    charged to the sample); until then the deadline is ``startup_s``. Once the end-of-run marker line
    has arrived the result is known: reading stops after ``exit_grace_s`` (Docker: its container's
    teardown; bwrap: 0, so nothing the sample does at exit can hold the worker)."""
    sel = selectors.DefaultSelector()
    bufs = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    sel.register(proc.stdout, selectors.EVENT_READ)
    sel.register(proc.stderr, selectors.EVENT_READ)
    view, sent = memoryview(payload), 0
    if payload:
        os.set_blocking(proc.stdin.fileno(), False)
        sel.register(proc.stdin, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    deadline = time.monotonic() + startup_s
    started = marker_seen = False
    why = None
    while sel.get_map():
        left = deadline - time.monotonic()
        if left <= 0:
            why = "after_marker" if marker_seen else ("timeout" if started else "startup")
            break
        for key, _ in sel.select(min(left, 0.5)):
            f = key.fileobj
            if f is proc.stdin:
                try:
                    sent += os.write(f.fileno(), view[sent:sent + 65536])
                except (BrokenPipeError, OSError):
                    sent = len(payload)
                if sent >= len(payload):
                    sel.unregister(f)
                    f.close()
                continue
            chunk = os.read(f.fileno(), 65536)
            if not chunk:
                sel.unregister(f)
                continue
            if f is proc.stdout and not started:
                started = True
                deadline = time.monotonic() + timeout_s
                if chunk.startswith(b"\x1e"):
                    chunk = chunk[1:]
            bufs[f] += chunk
            if token and f is proc.stdout and not marker_seen:
                at = bufs[f].rfind(token, max(0, len(bufs[f]) - len(chunk) - len(token) - 4096))
                if at >= 0 and b"\n" in bufs[f][at:]:
                    marker_seen = True
                    deadline = min(deadline, time.monotonic() + exit_grace_s)
            if len(bufs[f]) > cap + 4096:  # slack for the end-of-run marker line
                why = "output_limit"
                break
        if why:
            break
    sel.close()
    if why is None and not started:
        why = "never_started"  # the harness never ran: the sandbox itself failed
    return bytes(bufs[proc.stdout]), bytes(bufs[proc.stderr]), why


def _kill_tree(proc: subprocess.Popen, container: str | None, host: str | None) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole process group (bwrap: its pid namespace dies too)
    except (ProcessLookupError, PermissionError):
        pass
    if container:
        import shutil

        subprocess.run([shutil.which("docker") or "docker"] + (["-H", host] if host else [])
                       + ["rm", "-f", container], capture_output=True, timeout=30)


def _decode(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace")
    return text if len(text) <= OUTPUT_CAP else text[:OUTPUT_CAP] + "\n[... output truncated]"


def _run_one(code: str, tests: list[str], limits: Limits, backend: str) -> SandboxResult:
    if backend not in BACKENDS:
        raise ValueError(f"unknown sandbox backend {backend!r}")
    cgroup = None
    memory_note = ""
    if backend == "bwrap":
        if cgroup_support()[0]:
            try:
                cgroup = RunCgroup(limits.memory_mb, _b.MAX_PROCS, _b.CPUS)
            except OSError as exc:
                memory_note = f"no cgroup for this run ({exc}): memory_mb limited each process, not the sample"
        else:
            memory_note = f"no cgroups ({cgroup_support()[1]}): memory_mb limited each process, not the sample"
    try:
        with UidLease() as lease:
            res = _run_leased(code, tests, limits, backend, lease.uid, cgroup)
    finally:
        if cgroup is not None:
            oom = cgroup.oom_killed()
            cgroup.remove()
    if cgroup is not None and oom:
        res.status, res.detail = "memory_limit", (f"the sample's processes together went over "
                                                  f"{limits.memory_mb} MiB (cgroup OOM kill)")
    if memory_note:
        res.detail = (res.detail + "; " if res.detail else "") + memory_note
    return res


def _run_leased(code: str, tests: list[str], limits: Limits, backend: str, uid: int,
                cgroup: RunCgroup | None) -> SandboxResult:
    token = "END-OF-RUN-" + secrets.token_hex(16)
    container = host = None
    pass_fds: tuple[int, ...] = ()
    seccomp_fd = None
    if backend == "bwrap":
        from course_lib.evaluation.sandbox.seccomp import filter_bytes

        program = filter_bytes()
        if program is not None:
            seccomp_fd = os.memfd_create("course-sandbox-seccomp", 0)
            os.write(seccomp_fd, program)
            os.lseek(seccomp_fd, 0, os.SEEK_SET)
            pass_fds = (seccomp_fd,)
        argv = _b.bwrap_argv(uid, seccomp_fd)
        rl = limits.rlimits(nproc=cgroup is None, per_sample_memory=cgroup is not None)
        if cgroup is not None:
            argv = cgroup.enter_argv(argv)
    elif backend == "docker":
        from course_lib.evaluation.sandbox.docker import docker_host

        host = docker_host()
        container = f"course-sbx-{uuid.uuid4().hex[:12]}"
        argv, rl = _b.docker_argv(uid, limits, container, host), limits.rlimits(nproc=False, per_sample_memory=True)
        from course_lib.evaluation.sandbox.seccomp import filter_bytes

        program = filter_bytes()  # the course's filter on top of Docker's default profile (netlink, ...)
        if program is not None:
            rl = {**rl, "seccomp": program.hex()}
    else:
        argv, rl = _b.unsafe_argv(), limits.rlimits(nproc=False)
    payload = encode_payload(token, rl, code, tests)
    startup_s = 60.0 if backend == "docker" else 20.0  # start-up is not the sample's time
    t0 = time.monotonic()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    if backend == "docker":
        env.update({k: v for k, v in os.environ.items() if k.startswith("DOCKER_")})
    cwd = "/tmp" if backend == "unsafe" else None
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, env=env, cwd=cwd, pass_fds=pass_fds)
    except OSError as exc:
        return SandboxResult("sandbox_error", backend=backend, detail=f"could not start {argv[0]}: {exc}")
    finally:
        if seccomp_fd is not None:
            os.close(seccomp_fd)
    why = "sandbox_error"
    grace = MARKER_EXIT_GRACE_S if backend == "docker" else 0.2
    try:
        out, err, why = _communicate(proc, payload, limits.timeout_s, OUTPUT_CAP, startup_s, token.encode(), grace)
    finally:
        if why not in (None, "never_started"):  # timeout, output limit, after the marker: kill the tree
            _kill_tree(proc, container, host)
        try:
            proc.wait(timeout=5 if why in (None, "never_started") else 30)
        except subprocess.TimeoutExpired:
            _kill_tree(proc, container, host)
            proc.wait(timeout=30)
        for f in (proc.stdin, proc.stdout, proc.stderr):
            try:
                f and f.close()
            except OSError:
                pass
    duration = time.monotonic() - t0
    # anything left in the process group (e.g. unsafe backend) goes too
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if why == "after_marker":
        why = None
    return _classify(out, err, why, proc.returncode, token, backend, duration, len(tests))


def _classify(out: bytes, err: bytes, why: str | None, rc: int | None, token: str, backend: str,
              duration: float, n_tests: int) -> SandboxResult:
    stdout_text = out.decode("utf-8", errors="replace")
    stderr = _decode(err)
    report = None
    marker_at = stdout_text.rfind(token)
    if marker_at >= 0:
        rest = stdout_text[marker_at + len(token):].strip()
        report = decode_report(rest.splitlines()[0]) if rest else None
        if report is not None and report["status"] not in STATUSES:
            report = None
        if report is not None and report["status"] == "passed" and len(report["tests"]) != n_tests:
            report = {"status": "failed", "tests": report["tests"],
                      "error": f"{len(report['tests'])} of {n_tests} tests reported: every test must report"}
        stdout_text = stdout_text[:marker_at].rstrip("\n")
    stdout = _decode(stdout_text.encode("utf-8"))
    res = SandboxResult("failed", stdout, stderr, duration, rc, backend)
    if why == "output_limit":
        res.status, res.detail = "output_limit", f"more than {OUTPUT_CAP // 1024} KiB of output"
    elif why == "startup":
        res.status, res.detail = "sandbox_error", "the sandbox did not start in time"
    elif why == "never_started":
        res.status = "sandbox_error"
        res.detail = (f"the sandbox exited (code {rc}) before the harness started: "
                      + (stderr.strip()[-500:] or "no message"))
    elif report is not None:  # the harness finished in time (a slow exit afterwards does not matter)
        res.status, res.tests, res.detail = report["status"], report.get("tests", []), report.get("error") or ""
    elif why == "timeout":
        res.status, res.detail = "timeout", "killed after the time limit"
    elif backend == "bwrap" and (stderr.startswith("bwrap:") or stderr.startswith("setpriv:")):
        res.status, res.detail = "sandbox_error", stderr.strip()[:500]
    elif backend == "docker" and rc in (125, 126, 127) and "Traceback" not in stderr:
        res.status, res.detail = "sandbox_error", stderr.strip()[:500]
    elif rc in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
        res.status, res.detail = "timeout", "CPU time limit"
    elif "MemoryError" in stderr or (backend == "docker" and rc == 137):
        res.status, res.detail = "memory_limit", "ran out of memory (killed by the memory limit)"
    elif rc is not None and (rc < 0 or rc > 128):
        res.status, res.detail = "runtime_error", f"killed by signal {abs(rc) if rc < 0 else rc - 128}"
    else:
        res.status = "failed"
        res.detail = (f"exited (code {rc}) without the harness's end-of-run marker: "
                      f"an early exit is not a pass")
    return res


def _normalize_tests(tests: str | Sequence[str] | None) -> list[str]:
    if tests is None:
        return []
    tests = [tests] if isinstance(tests, str) else list(tests)
    for i, t in enumerate(tests):
        if not isinstance(t, str):
            raise TypeError(f"test {i} is a {type(t).__name__}; tests must be Python source strings")
        try:
            compile(t, f"<test {i}>", "exec")
        except SyntaxError as exc:
            raise ValueError(f"test {i} does not compile ({exc}); fix the tests, not the sample") from None
    return tests


def run_code(code: str, tests: str | Sequence[str] | None = None, *, timeout_s: float | None = None,
             memory_mb: int | None = None, backend: str | None = None) -> SandboxResult:
    """Run ``code`` as a program (``solution.py``, module ``__main__``) and then ``tests`` (one source
    string, or a list: one outcome each) in a sandbox.

    ``timeout_s`` and ``memory_mb`` default to the active profile's ``sandbox`` section; values <= 0
    raise ValueError. The result's ``.status`` is one of :data:`STATUSES`; ``.stdout``/``.stderr`` are
    capped at 64 KiB; ``.tests`` lists the outcome of each test ("ok", "assert", "error"). A pass counts
    only when the harness's per-run end-of-run marker was printed and every test reported. Each run
    leases its own unprivileged uid (:class:`~course_lib.evaluation.sandbox.backends.UidLease`), so callers never
    pick one. Introduced in lesson 06.
    """
    global _unsafe_warned
    if not isinstance(code, str):
        raise TypeError(f"code must be a str of Python source, got {type(code).__name__}")
    test_list = _normalize_tests(tests)
    limits = _limits(timeout_s, memory_mb)
    name = resolve_backend(backend)
    if name == "unsafe" and not _unsafe_warned:
        _unsafe_warned = True
        msg = ("SANDBOX_BACKEND=unsafe: samples run as plain subprocesses with rlimits — this is NOT "
               "isolation (they can read your files, use the network, kill processes). Use bwrap or docker.")
        warnings.warn(msg, RuntimeWarning, stacklevel=2)
    try:
        return _run_one(code, test_list, limits, name)
    except FileNotFoundError as exc:
        return SandboxResult("sandbox_error", backend=name, detail=str(exc))


def _limits(timeout_s: float | None, memory_mb: int | None) -> Limits:
    if timeout_s is None or memory_mb is None:
        section = _profile_sandbox()
        timeout_s = section["timeout_s"] if timeout_s is None else timeout_s
        memory_mb = section["memory_mb"] if memory_mb is None else memory_mb
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)):
        raise ValueError(f"timeout_s must be a number of seconds, got {timeout_s!r}")
    if isinstance(memory_mb, float) and memory_mb.is_integer():
        memory_mb = int(memory_mb)
    return Limits(float(timeout_s), memory_mb)


def _as_kwargs(item: Any) -> dict:
    if isinstance(item, str):
        return {"code": item}
    if isinstance(item, dict):
        unknown = set(item) - {"code", "tests", "timeout_s", "memory_mb", "backend"}
        if unknown or "code" not in item:
            raise ValueError(f"a run_many item needs 'code' and may have tests/timeout_s/memory_mb/backend; "
                             f"got keys {sorted(item)}")
        return dict(item)
    raise TypeError(f"run_many items are code strings or dicts, got {type(item).__name__}")


def run_many(items: Iterable[Any], *, workers: int = 8, progress: bool = True, **kw) -> list[SandboxResult]:
    """Run many samples on a pool of ``workers`` (every run with its own leased sandbox uid); results
    come back in input order, and one broken sample — bad text, an invalid item — is a
    ``sandbox_error`` result for that sample, never an exception for the batch. ``items`` are code strings or dicts with
    :func:`run_code`'s keywords; ``kw`` gives defaults (``tests=``, ``timeout_s=``, ``backend=``, ...).
    Introduced in lesson 06.
    """
    jobs = [{**kw, **_as_kwargs(it)} for it in items]
    if not jobs:
        return []
    backend = resolve_backend(kw.get("backend"))
    for job in jobs:
        job.setdefault("backend", backend)
    n_workers = max(1, int(workers))
    results: list[SandboxResult | None] = [None] * len(jobs)

    def work(index: int) -> None:
        try:
            results[index] = run_code(**jobs[index])
        except Exception as exc:  # never let one sample stop the batch
            results[index] = SandboxResult("sandbox_error", backend=jobs[index]["backend"],
                                           detail=f"{type(exc).__name__}: {exc}")

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(jobs), desc=f"sandbox[{backend}]", unit="sample", leave=False)
    with ThreadPoolExecutor(max_workers=n_workers) as pool:
        futures = [pool.submit(work, i) for i in range(len(jobs))]
        for fut in as_completed(futures):
            fut.result()
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    return [r for r in results]  # type: ignore[misc]


def summarize(results: Iterable[SandboxResult]) -> dict[str, int]:
    """Count results per status (every status present, zeros included). Introduced in lesson 06."""
    counts = {s: 0 for s in STATUSES}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    return counts


__all__ = ["run_code", "run_many", "SandboxResult", "STATUSES", "BACKENDS", "resolve_backend",
           "preferred_backend", "available_backends", "summarize", "Limits", "UidLease"]
