"""THE PREVIOUS, IN-PROCESS JUDGE — kept only as the benchmark's peer. No judged path uses it.

Before issue 24 the course ran a program's tests *inside* the sandboxed program's process: a two-process
harness (the parent held a per-run token and printed ``<token> <status> <outcomes>`` at the end; the
child ran the code and then each test in the same interpreter). A program could forge that judge
(walk frames to the tests, answer the harness's pipe, return an object whose ``__eq__`` is always True);
``tests/test_sandbox_forgery.py`` shows it. ``benchmarks/bench_sandbox.py`` runs it beside the current
judge (:mod:`course_lib.evaluation.sandbox.judge`) on the same samples, so the cost of judging from
outside is measured, not guessed. Same backends, cgroups, seccomp filter and uid leases as the course's
sandbox; only what runs inside and how the verdict comes back differ.

    from benchmarks._inprocess_judge import run_many_inprocess
"""
from __future__ import annotations

import os
import secrets
import selectors
import signal
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from course_lib.evaluation.sandbox import backends as _b
from course_lib.evaluation.sandbox.cgroups import RunCgroup, cgroup_support
from course_lib.evaluation.sandbox.limits import CPUS, MAX_PROCS, OUTPUT_CAP, Limits, UidLease
from course_lib.evaluation.sandbox.result import STATUSES, SandboxResult
from course_lib.evaluation.sandbox.seccomp import filter_bytes

TOKEN_BYTES = 43   # "END-OF-RUN-" + 32 hex digits
BACKENDS = ("bwrap", "docker", "unsafe")

HARNESS_SOURCE = r'''
import os, sys

TOKEN_BYTES = 43

def _read_exact(buf):
    view, got = memoryview(buf), 0
    while got < len(buf):
        n = os.readv(0, [view[got:]])
        if n == 0:
            raise SystemExit("harness: short payload")
        got += n

def _read_fields():
    data = sys.stdin.buffer.read()
    fields, pos = [], 0
    while pos < len(data):
        nl = data.index(b"\n", pos)
        size = int(data[pos:nl])
        fields.append(data[nl + 1:nl + 1 + size].decode("utf-8", "surrogatepass"))
        pos = nl + 1 + size
    return fields

def _set_limits(spec):
    import resource
    names = {"as": "RLIMIT_AS", "cpu": "RLIMIT_CPU", "fsize": "RLIMIT_FSIZE",
             "nofile": "RLIMIT_NOFILE", "nproc": "RLIMIT_NPROC", "core": "RLIMIT_CORE"}
    for item in spec.split(","):
        if "=" not in item:
            continue
        key, value = item.split("=", 1)
        if key not in names or value == "None":
            continue
        soft = hard = int(value)
        if key == "cpu":
            hard = soft + 1  # SIGXCPU first (reported as a timeout), SIGKILL one second later
        try:
            resource.setrlimit(getattr(resource, names[key]), (soft, hard))
        except (ValueError, OSError):
            pass

def _seccomp(spec):
    # The course's seccomp filter (raw classic-BPF, hex in the limits field), when the backend sends
    # one: Docker's default profile allows netlink sockets, so the harness adds the course's filter
    # on top of it. no_new_privs first, as the kernel requires for an unprivileged filter.
    prog = ""
    for item in spec.split(","):
        if item.startswith("seccomp="):
            prog = item[len("seccomp="):]
    if not prog:
        return
    import ctypes
    data = bytes.fromhex(prog)
    buf = ctypes.create_string_buffer(data, len(data))

    class _FProg(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = _FProg(len(data) // 8, ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:  # NO_NEW_PRIVS, SECCOMP
        raise OSError(ctypes.get_errno(), "the sandbox's seccomp filter could not be installed")

def _dumpable(flag):
    try:
        import ctypes
        ctypes.CDLL(None).prctl(4, flag, 0, 0, 0)  # PR_SET_DUMPABLE
    except Exception:
        pass

def _oom_killed():
    # inside a container the cgroup's OOM counter is visible (bwrap: the host reads it instead)
    for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
        try:
            with open(path) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and value.strip() not in ("", "0"):
                        return True
        except OSError:
            pass
    return False

def _one_line(exc):
    return " ".join(("%s: %s" % (type(exc).__name__, exc)).split())[:400]

def _print_tb():
    import traceback  # imported only when needed: it costs more than the rest of the harness
    traceback.print_exc()

def _child(code_obj, test_objs, filename, req_fd, ans_fd):
    import builtins
    _exec, _write, _read, _exit, _tb = exec, os.write, os.read, os._exit, _print_tb
    def answer(kind, text=""):
        _write(ans_fd, ("%s %s\n" % (kind, " ".join(str(text).split())[:400])).encode("utf-8", "replace"))
    module = type(sys)("__main__")
    module.__file__ = filename
    module.__builtins__ = builtins
    sys.modules["__main__"] = module
    sys.argv = [filename]
    try:
        _exec(code_obj, module.__dict__)
        first = ("ok", "")
    except SystemExit as exc:
        c = exc.code
        first = ("ok", "") if c is None or c == 0 else ("exit", "SystemExit: %s" % (c,))
        if first[0] == "exit" and not isinstance(c, int):
            print(c, file=sys.stderr)
    except MemoryError:
        first = ("memory", "MemoryError while running the code")
    except BaseException as exc:
        _tb()
        first = ("error", _one_line(exc))
    try:
        sys.stdout.flush(); sys.stderr.flush()
    except Exception:
        pass
    answer(*first)
    if first[0] != "ok":
        _exit(0)
    for obj in test_objs:
        if _read(req_fd, 2) != b"G\n":
            _exit(0)
        try:
            _exec(obj, module.__dict__)
            result = ("ok", "")
        except AssertionError as exc:
            result = ("assert", _one_line(exc))
        except MemoryError:
            result = ("memory", "MemoryError while running the tests")
        except SystemExit as exc:
            result = ("error", "SystemExit: %s" % (exc.code,))
        except BaseException as exc:
            _tb()
            result = ("error", _one_line(exc))
        try:
            sys.stdout.flush(); sys.stderr.flush()
        except Exception:
            pass
        answer(*result)
    _exit(0)

def _main():
    token = bytearray(TOKEN_BYTES)
    _read_exact(token)
    fields = _read_fields()
    limits, code, tests = fields[0], fields[1], fields[2:]
    del fields
    _dumpable(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    report_fd = os.dup(1)
    _set_limits(limits)
    _seccomp(limits)
    os.write(report_fd, b"\x1e")  # "started": the host's wall clock for the sample starts now

    def finish(status, outcomes=(), error=""):
        try:
            sys.stdout.flush(); sys.stderr.flush()
        except Exception:
            pass
        error = " ".join(str(error or "").split())[:500]
        line = b"\n" + bytes(token) + (" %s %s %s\n" % (status, ",".join(outcomes) or "-", error)).encode("utf-8", "replace")
        os.write(report_fd, line)
        os._exit(0)

    folder = "/tmp/sample-%d" % os.getpid()
    os.mkdir(folder, 0o700)
    filename = folder + "/solution.py"
    with open(filename, "wb") as f:
        f.write(code.encode("utf-8", "surrogatepass"))
    os.chdir(folder)
    try:
        # a relative name: errors and tracebacks read "solution.py, line N", never the sandbox's folder
        code_obj = compile(code, "solution.py", "exec")
    except (SyntaxError, ValueError) as exc:
        import traceback
        traceback.print_exception(type(exc), exc, None)
        finish("syntax_error", error=_one_line(exc))
    test_objs = [compile(t, "<test %d>" % i, "exec") for i, t in enumerate(tests)]
    req_r, req_w = os.pipe()
    ans_r, ans_w = os.pipe()
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        for i in range(len(token)):
            token[i] = 0
        os.close(report_fd); os.close(req_w); os.close(ans_r)
        _dumpable(1)
        try:
            _child(code_obj, test_objs, filename, req_r, ans_w)
        finally:
            os._exit(0)
    os.close(req_r); os.close(ans_w)
    buf = b""

    def next_answer():
        nonlocal buf
        while b"\n" not in buf:
            chunk = os.read(ans_r, 4096)
            if not chunk:
                return None
            buf += chunk
        line, _, buf = buf.partition(b"\n")
        if buf:
            return ("forged", "the program wrote to the harness's answer pipe")
        kind, _, text = line.decode("utf-8", "replace").partition(" ")
        return kind, text

    def died(where):
        _, status = os.waitpid(pid, 0)
        if _oom_killed():
            finish("memory_limit", error="the sample's processes together went over the memory limit (OOM kill)")
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            if sig == 24:  # SIGXCPU
                finish("timeout", error="CPU time limit")
            finish("runtime_error", error="killed by signal %d %s" % (sig, where))
        finish("failed", error="the program exited (code %d) %s: an early exit is not a pass"
               % (os.WEXITSTATUS(status), where))

    first = next_answer()
    if first is None:
        died("before its code finished")
    kind, text = first
    if kind == "forged":
        finish("failed", error=text)
    if kind == "syntax":
        finish("syntax_error", error=text)
    if kind == "memory":
        finish("memory_limit", error=text)
    if kind == "error":
        finish("runtime_error", error=text)
    if kind == "exit":
        finish("failed", error="the program exited with a non-zero status (%s)" % text)
    if kind != "ok":
        finish("failed", error="the harness got an answer it did not ask for")
    outcomes, first_error = [], ""
    for i in range(len(test_objs)):
        os.write(req_w, b"G\n")
        got = next_answer()
        if got is None:
            died("during test %d" % i)
        kind, text = got
        if kind == "forged" or kind not in ("ok", "assert", "error", "memory"):
            finish("failed", outcomes, "test %d: the program wrote to the harness's answer pipe" % i)
        if kind == "memory":
            finish("memory_limit", outcomes, text)
        outcomes.append(kind)
        first_error = first_error or text
    os.waitpid(pid, 0)
    os.set_blocking(ans_r, False)
    try:
        extra = os.read(ans_r, 1)
    except BlockingIOError:
        extra = b""
    if buf or extra:
        finish("failed", outcomes, "the program wrote to the harness's answer pipe")
    if _oom_killed():
        finish("memory_limit", outcomes, "the sample's processes together went over the memory limit (OOM kill)")
    if all(o == "ok" for o in outcomes):
        status = "passed"
    elif "error" in outcomes and "ok" not in outcomes:
        status = "runtime_error"
    else:
        status = "failed"
    finish(status, outcomes, first_error)

_main()
'''


def encode_payload(token: str, limits: dict, code: str, tests: list) -> bytes:
    """The harness's stdin: the token (exactly :data:`TOKEN_BYTES` bytes), then length-prefixed UTF-8
    fields limits, code, tests... (lone surrogates pass through, so any ``str`` can be sent)."""
    raw = token.encode("ascii")
    if len(raw) != TOKEN_BYTES:
        raise ValueError(f"the token must be {TOKEN_BYTES} ASCII bytes")
    spec = ",".join(f"{k}={v}" for k, v in limits.items())
    out = bytearray(raw)
    for field in [spec, code, *tests]:
        data = field.encode("utf-8", "surrogatepass")
        out += b"%d\n" % len(data) + data
    return bytes(out)


def decode_report(line: str) -> dict | None:
    """Parse the text after the token on the marker line: ``status outcomes error``."""
    parts = line.strip().split(" ", 2)
    if len(parts) < 2:
        return None
    outcomes = [] if parts[1] == "-" else parts[1].split(",")
    return {"status": parts[0], "tests": outcomes, "error": parts[2] if len(parts) > 2 else ""}


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
                cgroup = RunCgroup(limits.memory_mb, MAX_PROCS, CPUS)
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
        program = filter_bytes()
        if program is not None:
            seccomp_fd = os.memfd_create("course-sandbox-seccomp", 0)
            os.write(seccomp_fd, program)
            os.lseek(seccomp_fd, 0, os.SEEK_SET)
            pass_fds = (seccomp_fd,)
        argv = _b.bwrap_argv(uid, seccomp_fd, command=_harness_argv(str(_b.sandbox_python())))
        rl = limits.rlimits(nproc=cgroup is None, per_sample_memory=cgroup is not None)
        if cgroup is not None:
            argv = cgroup.enter_argv(argv)
    elif backend == "docker":
        from course_lib.evaluation.sandbox.docker import docker_host

        host = docker_host()
        container = f"course-sbx-{uuid.uuid4().hex[:12]}"
        argv = _b.docker_argv(uid, limits, container, host, command=_harness_argv('python3'))
        rl = limits.rlimits(nproc=False, per_sample_memory=True)
        program = filter_bytes()  # the course's filter on top of Docker's default profile (netlink, ...)
        if program is not None:
            rl = {**rl, "seccomp": program.hex()}
    else:
        argv, rl = _b.unsafe_argv(_harness_argv(str(_b.sandbox_python()))), limits.rlimits(nproc=False)
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




def _harness_argv(python: str) -> list[str]:
    return [python, "-I", "-c", HARNESS_SOURCE]


def run_code_inprocess(code: str, tests=None, *, timeout_s: float = 10.0, memory_mb: int = 128,
                       backend: str = "bwrap") -> SandboxResult:
    """The previous judge: ``code`` and its ``tests`` (strings) run in one sandboxed process."""
    tests = [] if tests is None else ([tests] if isinstance(tests, str) else list(tests))
    return _run_one(code, tests, Limits(float(timeout_s), memory_mb), backend)


def run_many_inprocess(items, *, workers: int = 8, backend: str = "bwrap") -> list[SandboxResult]:
    """:func:`run_code_inprocess` for dict items (``code``, ``tests``, ``timeout_s``) on a thread pool."""
    def one(item):
        item = {"code": item} if isinstance(item, str) else item
        return run_code_inprocess(item["code"], item.get("tests"), timeout_s=item.get("timeout_s", 10.0),
                                  memory_mb=item.get("memory_mb", 128), backend=backend)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, items))
