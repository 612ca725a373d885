"""One sandbox run from start to verdict, on a named backend: a cgroup and a uid for the run, the
sandbox process, the judge (:mod:`course_lib.evaluation.sandbox.judge`), and the clean-up.

This module knows nothing about choosing a backend (:mod:`course_lib.evaluation.sandbox.policy`) or
about batches (:mod:`course_lib.evaluation.sandbox.run`).

Introduced in lesson 06.
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import time
import uuid
from types import CodeType

from course_lib.evaluation.sandbox import backends as _b
from course_lib.evaluation.sandbox.cgroups import RunCgroup, cgroup_support
from course_lib.evaluation.sandbox.judge import Channel, init_message, judge_run
from course_lib.evaluation.sandbox.limits import CPUS, MAX_PROCS, OUTPUT_CAP, TMP_BYTES, Limits, UidLease
from course_lib.evaluation.sandbox.result import SandboxResult
from course_lib.evaluation.sandbox.seccomp import filter_bytes

BACKENDS = ("bwrap", "docker", "unsafe")
STARTUP_S = {"bwrap": 20.0, "docker": 60.0, "unsafe": 20.0}   # start-up is not the sample's time


def run_one(code: str, tests: list[CodeType], limits: Limits, backend: str) -> SandboxResult:
    """Run ``code`` and judge it with the compiled ``tests`` on ``backend``; never raises for the
    sample's sake (a sandbox that cannot start is a ``sandbox_error`` result)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown sandbox backend {backend!r}")
    source = code.encode("utf-8", "surrogatepass")
    cgroup = None
    memory_note = ""
    if backend == "bwrap":
        if cgroup_support()[0]:
            try:
                cgroup = RunCgroup(limits.memory_mb, MAX_PROCS, CPUS)
            except OSError as exc:
                memory_note = f"no cgroup for this run ({exc}): memory_mb limited each process, not the sample"
        else:
            memory_note = f"no cgroups ({cgroup_support()[1]}): memory_mb limited each process, not the sample"
    oom = False
    try:
        with UidLease() as lease:
            res = _run_leased(source, tests, limits, backend, lease.uid, cgroup)
    except FileNotFoundError as exc:
        res = SandboxResult("sandbox_error", backend=backend, detail=str(exc))
    finally:
        if cgroup is not None:
            oom = cgroup.oom_killed()
            cgroup.remove()
    if oom:
        res.status, res.detail = "memory_limit", (f"the sample's processes together went over "
                                                  f"{limits.memory_mb} MiB (cgroup OOM kill)")
    if memory_note:
        res.detail = (res.detail + "; " if res.detail else "") + memory_note
    return res


def _run_leased(source: bytes, tests: list[CodeType], limits: Limits, backend: str, uid: int,
                cgroup: RunCgroup | None) -> SandboxResult:
    container = host = None
    pass_fds: tuple[int, ...] = ()
    seccomp_fd = None
    tmp_bytes = TMP_BYTES + len(source)   # the program's own file does not eat the sample's /tmp
    program = filter_bytes()
    header: dict = {"nonce": secrets.randbits(62), "landlock": backend != "unsafe", "paths": _b.runtime_paths()}
    if backend == "bwrap":
        if program is not None:
            seccomp_fd = os.memfd_create("course-sandbox-seccomp", 0)
            os.write(seccomp_fd, program)
            os.lseek(seccomp_fd, 0, os.SEEK_SET)
            pass_fds = (seccomp_fd,)
        argv = _b.bwrap_argv(uid, seccomp_fd, tmp_bytes)
        header["limits"] = limits.rlimits(nproc=cgroup is None, per_sample_memory=cgroup is not None)
        if cgroup is not None:
            argv = cgroup.enter_argv(argv)
    elif backend == "docker":
        from course_lib.evaluation.sandbox.docker import docker_host

        host = docker_host()
        container = f"course-sbx-{uuid.uuid4().hex[:12]}"
        argv = _b.docker_argv(uid, limits, container, host, tmp_bytes)
        header["limits"] = limits.rlimits(nproc=False, per_sample_memory=True)
        header["paths"] = []
        if program is not None:   # the course's filter on top of Docker's default profile
            header["seccomp"] = program.hex()
    else:
        argv = _b.unsafe_argv()
        header["limits"] = limits.rlimits(nproc=False)
        header["cleanup"] = True
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    if backend == "docker":
        env.update({k: v for k, v in os.environ.items() if k.startswith("DOCKER_")})
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, env=env, cwd="/tmp" if backend == "unsafe" else None,
                                pass_fds=pass_fds)
    except OSError as exc:
        return SandboxResult("sandbox_error", backend=backend, detail=f"could not start {argv[0]}: {exc}")
    finally:
        if seccomp_fd is not None:
            os.close(seccomp_fd)
    channel = Channel(proc, OUTPUT_CAP)
    try:
        channel.send(init_message(header, source))
        verdict = judge_run(channel, tests, timeout_s=limits.timeout_s, startup_s=STARTUP_S[backend],
                            load_nonce=header["nonce"])
    finally:
        # the supervisor exits right after its exit report: a sandbox that reported its end is given a
        # moment to go by itself (its cgroup is then empty at once); any other is killed now, and a
        # container by name (a container whose supervisor reported the end stops by itself: --rm)
        ended = channel.exit_info is not None
        if ended:
            try:
                proc.wait(timeout=0.5 if backend != "docker" else 5.0)
            except subprocess.TimeoutExpired:
                pass
        _kill_tree(proc, None if ended else container, host)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            _kill_tree(proc, container, host)
            proc.wait(timeout=30)
        for f in (proc.stdin, proc.stdout, proc.stderr):
            try:
                f and f.close()
            except OSError:
                pass
    duration = time.monotonic() - t0
    stderr = channel.text("stderr")
    if verdict.notes:
        stderr = (stderr + "\n" if stderr else "") + "\n".join(verdict.notes)[-OUTPUT_CAP:]
    stdout = channel.text("stdout")
    if verdict.judge_stdout:   # what the tests printed (here, in the judge) follows the program's output
        stdout = (stdout + "\n" if stdout and not stdout.endswith("\n") else stdout) + verdict.judge_stdout[:OUTPUT_CAP]
    res = SandboxResult(verdict.status, stdout.rstrip("\n"), stderr, duration,
                        verdict.exit_code if verdict.exit_code is not None else proc.returncode, backend,
                        verdict.tests, verdict.detail, verdict.test_errors,
                        exited_at_load=verdict.exited_at_load)
    if res.status == "sandbox_error" or (res.status == "failed" and channel.started is None):
        early = bytes(channel.pre).decode("utf-8", "replace").strip()
        res.status = "sandbox_error"
        res.detail = res.detail or (f"the sandbox exited (code {proc.returncode}) before the judge's server "
                                    f"started: " + (early[-500:] or "no message"))
        res.stderr = early[-OUTPUT_CAP:]
    elif res.status == "failed" and channel.exit_info is None and backend == "docker" and proc.returncode == 137:
        res.status, res.detail = "memory_limit", "the container was killed (out of memory)"
    return res


def _kill_tree(proc: subprocess.Popen, container: str | None, host: str | None) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole process group (bwrap: its pid namespace dies too)
    except (ProcessLookupError, PermissionError):
        pass
    if container:
        subprocess.run([shutil.which("docker") or "docker"] + (["-H", host] if host else [])
                       + ["rm", "-f", container], capture_output=True, timeout=30)
