"""The harness that runs *inside* the sandbox (any backend), as ``python3 -I -S -c HARNESS_SOURCE``.

It reads one JSON payload from stdin (code, tests, limits, a per-run token), lowers its own rlimits,
runs the code and then each test in the same namespace, and finally prints the end-of-run marker
``<token> {json report}`` on the stdout it saved at start. The host counts a pass only when that
marker is there, so ``os._exit(0)`` / ``sys.exit(0)`` before the tests end cannot fake one.

This file must stay standard-library only and runnable by any Python >= 3.8: the sandbox's
interpreter is the system Python, not the course's virtual environment.

Introduced in lesson 06.
"""
# The source below is sent to the sandboxed interpreter as a string; it is never imported on the host.
HARNESS_SOURCE = r'''
import json, os, resource, sys, traceback

def _set_limits(limits):
    names = {"as": "RLIMIT_AS", "cpu": "RLIMIT_CPU", "fsize": "RLIMIT_FSIZE",
             "nofile": "RLIMIT_NOFILE", "nproc": "RLIMIT_NPROC", "core": "RLIMIT_CORE"}
    for key, value in limits.items():
        if value is None or key not in names:
            continue
        soft = hard = int(value)
        if key == "cpu":
            hard = soft + 1  # SIGXCPU first (reported as a timeout), SIGKILL one second later
        try:
            resource.setrlimit(getattr(resource, names[key]), (soft, hard))
        except (ValueError, OSError):
            pass

def _main():
    payload = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    report_fd = os.dup(1)
    token = payload.pop("token")
    _set_limits(payload.get("limits", {}))
    os.write(report_fd, b"\x1e")  # "started": the host's wall clock for the sample starts now

    def finish(status, tests=(), error=None):
        try:
            sys.stdout.flush(); sys.stderr.flush()
        except Exception:
            pass
        line = "\n%s %s\n" % (token, json.dumps({"status": status, "tests": list(tests), "error": error}))
        os.write(report_fd, line.encode("utf-8"))

    try:
        code_obj = compile(payload["code"], "<solution>", "exec")
    except (SyntaxError, ValueError) as exc:
        traceback.print_exception(type(exc), exc, None)
        return finish("syntax_error", error="%s: %s" % (type(exc).__name__, exc))
    tests = payload.get("tests") or []
    test_objs = [compile(t, "<test %d>" % i, "exec") for i, t in enumerate(tests)]
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        exec(code_obj, namespace)
    except MemoryError:
        return finish("memory_limit", error="MemoryError while running the code")
    except SystemExit:
        raise
    except BaseException as exc:
        traceback.print_exc()
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
            traceback.print_exc()
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
