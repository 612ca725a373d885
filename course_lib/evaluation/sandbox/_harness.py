"""The harness that runs *inside* the sandbox (any backend), as ``python3 -I -S -c HARNESS_SOURCE``.

It reads one payload from stdin (length-prefixed fields: a per-run token, limits, code, tests), lowers
its own rlimits, runs the code and then each test in the same namespace, and finally prints the
end-of-run marker ``<token> <status> <outcomes> <error>`` on the stdout it saved at start. The host counts a pass only when that
marker is there, so ``os._exit(0)`` / ``sys.exit(0)`` before the tests end cannot fake one.

This file must stay standard-library only and runnable by any Python >= 3.8: the sandbox's
interpreter is the system Python, not the course's virtual environment.

Introduced in lesson 06.
"""
from __future__ import annotations

# The source below is sent to the sandboxed interpreter as a string; it is never imported on the host.
HARNESS_SOURCE = r'''
import os, sys

def _read_payload():
    # length-prefixed fields: no json (its import costs ~10-30 ms per sample)
    data = sys.stdin.buffer.read()
    fields, pos = [], 0
    while pos < len(data):
        nl = data.index(b"\n", pos)
        size = int(data[pos:nl])
        fields.append(data[nl + 1:nl + 1 + size].decode("utf-8"))
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

def _print_exc(exc, with_traceback=True):
    import traceback
    traceback.print_exception(type(exc), exc, exc.__traceback__ if with_traceback else None)

def _main():
    fields = _read_payload()
    token, limits, code, tests = fields[0], fields[1], fields[2], fields[3:]
    del fields
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    report_fd = os.dup(1)
    _set_limits(limits)
    os.write(report_fd, b"\x1e")  # "started": the host's wall clock for the sample starts now

    def finish(status, outcomes=(), error=None):
        try:
            sys.stdout.flush(); sys.stderr.flush()
        except Exception:
            pass
        error = " ".join(str(error or "").split())[:500]
        line = "\n%s %s %s %s\n" % (token, status, ",".join(outcomes) or "-", error)
        os.write(report_fd, line.encode("utf-8", "replace"))

    try:
        code_obj = compile(code, "<solution>", "exec")
    except (SyntaxError, ValueError) as exc:
        _print_exc(exc, with_traceback=False)
        return finish("syntax_error", error="%s: %s" % (type(exc).__name__, exc))
    test_objs = [compile(t, "<test %d>" % i, "exec") for i, t in enumerate(tests)]
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        exec(code_obj, namespace)
    except MemoryError:
        return finish("memory_limit", error="MemoryError while running the code")
    except SystemExit:
        raise
    except BaseException as exc:
        _print_exc(exc)
        return finish("runtime_error", error="%s: %s" % (type(exc).__name__, exc))
    outcomes = []
    first_error = None
    for obj in test_objs:
        try:
            exec(obj, namespace)
            outcomes.append("ok")
        except AssertionError as exc:
            outcomes.append("assert")
            first_error = first_error or "AssertionError: %s" % (exc,)
        except MemoryError:
            return finish("memory_limit", outcomes, "MemoryError while running the tests")
        except SystemExit:
            raise
        except BaseException as exc:
            _print_exc(exc)
            outcomes.append("error")
            first_error = first_error or "%s: %s" % (type(exc).__name__, exc)
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
    """The harness's stdin: length-prefixed UTF-8 fields token, limits, code, tests..."""
    spec = ",".join(f"{k}={v}" for k, v in limits.items())
    out = bytearray()
    for field in [token, spec, code, *tests]:
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
