"""The harness that runs *inside* the sandbox (any backend), as ``python3 -I -c HARNESS_SOURCE``.

``site`` is enabled (``exit()``/``quit()`` and the sandbox runtime's numpy/pandas work), the environment
is ignored (``-I``). The harness reads one payload from stdin: a fixed-length per-run token, then
length-prefixed fields (limits, code, tests...). It compiles the code and tests, writes the code to
``solution.py`` in a private folder, and forks:

* the **child** forgets the token (zeroes the only buffer that held it), runs the code as the module
  ``__main__`` (``__file__`` set, stdin empty), then runs each test when the parent asks for it and
  answers one line per test on a pipe;
* the **parent** holds the token, is not dumpable (its memory cannot be read by the child, even with the
  same uid), checks that the child answers in lock-step (a line that arrives before it was asked for,
  or a missing one, fails the run), and finally prints ``<token> <status> <outcomes> <error>`` on stdout.

So a sample cannot print a valid end-of-run marker (it never sees the token), cannot call a reporting
function with a fake result (the child has none that takes a result; answers must come one per request),
and an early ``os._exit(0)`` reports nothing. Its limit: the sample runs in the same process as the
assert-based tests, so it can change what those tests see (an object whose ``__eq__`` is always True,
a patched module, reading the request pipe itself). Tests as ``(input, expected)`` pairs
(:func:`course_lib.evaluation.rewards.calculate_reward`) keep the expected values in the parent, where the sample
cannot see them.

This file must stay standard-library only: the sandbox's interpreter is the system Python.

Introduced in lesson 06.
"""
from __future__ import annotations

TOKEN_BYTES = 43   # "END-OF-RUN-" + 32 hex digits

# The source below is sent to the sandboxed interpreter as a string; it is never imported on the host.
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
