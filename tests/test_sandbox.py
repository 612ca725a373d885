"""Unit tests of course_lib.evaluation.sandbox: statuses, output capping, run_many's order, argument checks,
the backend policy, the limits' defaults, and what the judge does with the program's values."""
from __future__ import annotations

import sys

import pytest

from course_lib.evaluation import sandbox
from course_lib.evaluation.sandbox import (
    STATUSES,
    SandboxResult,
    backends,
    limits,
    policy,
    resolve_backend,
    run_code,
    run_many,
    summarize,
)
from course_lib.evaluation.sandbox import run as run_module
from tests._sandbox_support import ensure_backend


@pytest.fixture(scope="module")
def bwrap():
    ensure_backend("bwrap")
    return "bwrap"


ADD = "def add(a, b):\n    return a + b\n"


@pytest.mark.parametrize("code, tests, status", [
    (ADD, "assert add(1, 2) == 3", "passed"),
    (ADD, None, "passed"),
    ("def add(a, b):\n    return a - b\n", "assert add(1, 2) == 3", "failed"),
    ("def add(a, b)\n    return a + b\n", "assert add(1, 2) == 3", "syntax_error"),
    ("def add(a, b):\n    return a + b\n1 / 0\n", "assert add(1, 2) == 3", "runtime_error"),
    ("def add(a, b):\n    return a + undefined\n", "assert add(1, 2) == 3", "runtime_error"),
    ("import time\ntime.sleep(30)\n", None, "timeout"),
    ("x = bytearray(512 * 1024 * 1024)\n", None, "memory_limit"),
    ("print('y' * 200_000)\n", None, "output_limit"),
    ("import os\nos._exit(0)\n", "assert False", "failed"),
])
def test_statuses(bwrap, code, tests, status):
    r = run_code(code, tests, timeout_s=1.5, backend=bwrap)
    assert r.status == status, r
    assert r.status in STATUSES and r.backend == "bwrap" and r.duration_s > 0


def test_a_list_of_tests_reports_each_outcome(bwrap):
    r = run_code(ADD, ["assert add(1, 2) == 3", "assert add(2, 2) == 5", "assert add(1) == 1"], backend=bwrap)
    assert r.tests == ["ok", "assert", "error"]
    assert (r.tests_passed, r.tests_total, r.status) == (1, 3, "failed")


def test_every_test_crashing_is_a_runtime_error(bwrap):
    r = run_code("def f(x):\n    return x[10]\n", ["assert f([1]) == 1", "assert f([]) == 0"], backend=bwrap)
    assert r.status == "runtime_error" and r.tests == ["error", "error"]
    assert "IndexError" in r.detail and "IndexError" in r.stderr


def test_stdout_is_returned_without_the_marker(bwrap):
    r = run_code("print('hello')\nimport sys\nprint('oops', file=sys.stderr)\n", backend=bwrap)
    assert r.stdout == "hello" and "END-OF-RUN" not in r.stdout
    assert "oops" in r.stderr and r.exit_code == 0


def test_stdin_is_empty(bwrap):
    r = run_code("import sys\nprint(repr(sys.stdin.read()))\n", backend=bwrap)
    assert r.status == "passed" and r.stdout == "''"


def test_runs_as_unprivileged_uid_with_clean_environment(bwrap):
    r = run_code("import os\nprint(os.getuid(), os.geteuid(), sorted(os.environ))\n", backend=bwrap)
    uid, euid = map(int, r.stdout.split()[:2])
    assert uid == euid and limits.UID_BASE <= uid < limits.UID_BASE + limits.UID_COUNT, r.stdout
    assert "COURSE" not in r.stdout and "VIRTUAL_ENV" not in r.stdout


def test_sandboxed_python_is_not_the_course_venv(bwrap):
    r = run_code("import sys\nprint(sys.executable, sys.prefix)\n", backend=bwrap)
    assert ".venv" not in r.stdout and "/work" not in r.stdout and "/root" not in r.stdout, r.stdout


def test_run_many_keeps_input_order_and_survives_broken_samples(bwrap):
    items = [f"print({i})" for i in range(12)]
    items[3] = "def broken(:\n"
    items[7] = {"code": "raise SystemExit(3)"}
    items[9] = {"code": "while True: pass", "timeout_s": 1.0}
    results = run_many(items, workers=4, backend=bwrap, progress=False)
    assert [r.stdout for i, r in enumerate(results) if i not in (3, 7, 9)] == [
        str(i) for i in range(12) if i not in (3, 7, 9)]
    assert [results[i].status for i in (3, 7, 9)] == ["syntax_error", "failed", "timeout"]
    counts = summarize(results)
    assert counts["passed"] == 9 and sum(counts.values()) == 12


def test_run_many_applies_default_tests(bwrap):
    results = run_many([ADD, ADD.replace("+", "*")], tests="assert add(2, 3) == 5", backend=bwrap, progress=False)
    assert [r.status for r in results] == ["passed", "failed"]


def test_bad_arguments_get_clear_errors():
    with pytest.raises(ValueError, match="unknown sandbox backend"):
        resolve_backend("chroot")
    with pytest.raises(ValueError, match="does not compile"):
        run_code("x = 1", "assert (", backend="unsafe")
    with pytest.raises(TypeError):
        run_code(b"x = 1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs 'code'"):
        run_many([{"source": "x"}], progress=False)
    assert run_many([], progress=False) == []


def test_invalid_limits_raise():
    for kw in ({"timeout_s": 0}, {"timeout_s": -1}, {"memory_mb": -1}, {"memory_mb": 0}, {"memory_mb": 1.5}):
        with pytest.raises(ValueError):
            run_code("x = 1", backend="unsafe", **kw)


def test_limits_default_to_the_documented_values_not_the_profile(monkeypatch):
    seen = {}
    monkeypatch.setattr(run_module, "run_one", lambda code, tests, lim, name: seen.setdefault("l", lim))
    monkeypatch.setenv("COURSE_PROFILE", "full")
    run_code("x = 1", backend="bwrap")
    assert (seen["l"].timeout_s, seen["l"].memory_mb) == (sandbox.DEFAULT_TIMEOUT_S, sandbox.DEFAULT_MEMORY_MB) == (10.0, 128)
    seen.clear()
    run_code("x = 1", backend="bwrap", timeout_s=7.5, memory_mb=99)
    assert (seen["l"].timeout_s, seen["l"].memory_mb) == (7.5, 99)


def test_bad_text_is_a_status_not_an_exception(bwrap):
    r = run_code("s = '\ud800'", backend=bwrap)   # as `python solution.py` reads the file: not UTF-8
    assert r.status == "syntax_error" and "utf-8" in r.detail, r
    results = run_many(["s = '\ud800'", ADD], tests="assert add(1, 2) == 3", backend=bwrap, progress=False)
    assert [x.status for x in results] == ["syntax_error", "passed"]


def test_preferred_backend_reads_the_environment_when_called(monkeypatch):
    monkeypatch.setenv("SANDBOX_BACKEND", "unsafe")
    assert sandbox.preferred_backend() == "unsafe"
    monkeypatch.setattr(policy, "_probe", lambda name: (name == "docker", "x"))
    monkeypatch.delenv("SANDBOX_BACKEND")
    assert sandbox.preferred_backend(configured="bwrap") == "docker"
    monkeypatch.setattr(policy, "_probe", lambda name: (False, "x"))
    assert sandbox.preferred_backend() is None


def test_backend_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("SANDBOX_BACKEND", "unsafe")
    assert resolve_backend() == "unsafe"
    assert resolve_backend("bwrap") == "bwrap"


@pytest.mark.parametrize("works, env, configured, want", [
    ({"bwrap", "docker"}, None, None, "bwrap"),          # nothing configured: bwrap before docker
    ({"bwrap", "docker"}, None, "docker", "docker"),      # the configured backend when it works
    ({"bwrap"}, None, "docker", "bwrap"),                 # ... else the rule's order
    ({"docker"}, None, "bwrap", "docker"),
    ({"bwrap", "docker"}, "auto", "docker", "docker"),    # auto is "no explicit choice"
    ({"bwrap", "docker"}, "docker", "bwrap", "docker"),   # $SANDBOX_BACKEND beats the configured one
])
def test_one_backend_policy_for_resolve_and_preferred(monkeypatch, works, env, configured, want):
    monkeypatch.setattr(policy, "_probe", lambda name: (name in works, "probe"))
    if env is None:
        monkeypatch.delenv("SANDBOX_BACKEND", raising=False)
    else:
        monkeypatch.setenv("SANDBOX_BACKEND", env)
    assert resolve_backend(None, configured=configured) == want
    assert resolve_backend("auto", configured=configured) == want
    assert sandbox.preferred_backend(configured=configured) == want
    assert resolve_backend("unsafe", configured=configured) == "unsafe"   # an explicit argument wins


@pytest.mark.parametrize("profile", ["ci", "full"])
def test_explicit_argument_beats_the_variable_beats_the_profiles_backend(monkeypatch, profile):
    """The one rule with a profile passed down: the argument > $SANDBOX_BACKEND > the profile's
    ``sandbox.backend`` (the one key, given as ``configured``), whichever profile is active."""
    from course_lib import profiles

    P = profiles.get_profile(profile)
    monkeypatch.setattr(policy, "_probe", lambda name: (True, ""))
    monkeypatch.setenv("COURSE_PROFILE", "full" if profile == "ci" else "ci")   # never read by the policy
    monkeypatch.delenv("SANDBOX_BACKEND", raising=False)
    own = P.sandbox.backend
    assert own == {"ci": "bwrap", "full": "docker"}[profile]
    other = "bwrap" if own == "docker" else "docker"
    assert resolve_backend(None, configured=own) == sandbox.preferred_backend(own) == own
    assert sandbox.named_backend(None, configured=own) == own
    monkeypatch.setenv("SANDBOX_BACKEND", other)
    assert resolve_backend(None, configured=own) == sandbox.preferred_backend(own) == other
    assert sandbox.named_backend(None, configured=own) == other
    assert resolve_backend("unsafe", configured=own) == sandbox.named_backend("unsafe", configured=own) == "unsafe"
    monkeypatch.setenv("SANDBOX_BACKEND", "auto")              # auto: no explicit choice, the profile's again
    assert resolve_backend(None, configured=own) == sandbox.named_backend(None, configured=own) == own


def test_the_policy_reads_no_profile_when_the_caller_passes_none(monkeypatch):
    """No deep profile lookup: with nothing configured the rule goes on to bwrap, then docker."""
    from course_lib import profiles

    monkeypatch.delenv("SANDBOX_BACKEND", raising=False)
    monkeypatch.setattr(policy, "_probe", lambda name: (True, ""))
    monkeypatch.setattr(profiles, "get_profile", lambda *a, **k: pytest.fail("the policy resolved a profile"))
    assert resolve_backend() == sandbox.preferred_backend() == "bwrap"
    assert sandbox.named_backend() == "auto"


def test_auto_stops_with_a_sentence_when_nothing_works(monkeypatch):
    monkeypatch.setattr(policy, "_probe", lambda name: (False, f"{name} missing"))
    with pytest.raises(RuntimeError, match="apt-get install bubblewrap"):
        resolve_backend("auto")


def test_unsafe_backend_warns_loudly(capsys):
    run_module._unsafe_warned = False
    with pytest.warns(RuntimeWarning, match="NOT isolation"):
        r = run_code(ADD, "assert add(1, 2) == 3", backend="unsafe")
    assert r.passed


def test_bwrap_command_hides_project_and_home():
    argv = backends.bwrap_argv(60000)
    joined = " ".join(argv[: argv.index("-c")])
    assert "/work" not in joined and "/root" not in joined and "docker.sock" not in joined
    for flag in ("--unshare-pid", "--unshare-net", "--clearenv", "--die-with-parent", "--new-session",
                 "--unshare-user", "--disable-userns"):
        assert flag in argv
    binds = [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv[: argv.index("-c")]) if a == "--ro-bind"]
    assert all(src == dst for src, dst in binds if src != "/dev/null"), binds   # mountinfo: no hidden host path
    assert ("/dev/null", "/proc/cmdline") in binds


def test_docker_command_has_the_lesson_flags():
    argv = backends.docker_argv(60002, limits.Limits(10.0, 128), "course-sbx-test", None)
    text = " ".join(argv)
    for part in ("--network none", "--memory 128m", "--memory-swap 128m", "--pids-limit", "--read-only",
                 "--cap-drop ALL", "no-new-privileges", "--user 60002:60002", "--cpus 1.0", "--name course-sbx-test",
                 backends.IMAGE):
        assert part in text


def test_result_repr_and_properties():
    r = SandboxResult("failed", tests=["ok", "assert"])
    assert not r.passed and (r.tests_passed, r.tests_total) == (1, 2)
    assert "1/2" in repr(r)


@pytest.mark.parametrize("at_exit", [
    "import threading, time\nthreading.Thread(target=time.sleep, args=(3600,)).start()\n",
    "import atexit, time\natexit.register(time.sleep, 3600)\n",
])
def test_nothing_at_exit_holds_the_worker(bwrap, at_exit):
    # a non-daemon thread or an atexit handler: the result stands and the worker is free at once
    r = run_code(at_exit + ADD, "assert add(1, 2) == 3", timeout_s=2.0, backend=bwrap)
    assert r.status == "passed" and r.duration_s < 2.0, r


def test_usr_local_is_empty_and_the_runtime_imports(bwrap):
    r = run_code("import os, numpy, pandas\nprint(os.listdir('/usr/local'))\n", backend=bwrap, timeout_s=20, memory_mb=256)
    assert r.status == "passed" and r.stdout == "[]", r


def test_a_sandbox_that_cannot_start_is_a_sandbox_error(monkeypatch, tmp_path):
    # Docker pointed at a socket where no daemon listens: not the sample's fault, and never a pass
    monkeypatch.setenv("SANDBOX_DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    r = run_code(ADD, "assert add(1, 2) == 3", backend="docker", timeout_s=5)
    assert r.status == "sandbox_error" and r.detail, r


# --- what the judge does with the program's values (the tests run in this process) -------------------

def test_in_place_functions_write_back_into_the_callers_objects(bwrap):
    code = ("def rev(xs):\n    xs.reverse()\n"
            "def fill(d, s, b):\n    d['k'] = [1]\n    s.add(3)\n    b[0] = 65\n"
            "def rotate(m):\n    m[:] = [list(r) for r in zip(*m[::-1])]\n")
    tests = ["x = [1, 2, 3]\nassert rev(x) is None and x == [3, 2, 1]",
             "d, s, b = {}, {1}, bytearray(b'z')\nfill(d, s, b=b)\nassert (d, s, b) == ({'k': [1]}, {1, 3}, bytearray(b'A'))",
             "m = [[1, 2], [3, 4]]\nrow = m[0]\nrotate(m)\nassert m == [[3, 1], [4, 2]]"]
    r = run_code(code, tests, backend=bwrap)
    assert r.tests == ["ok", "ok", "ok"], (r, r.test_errors)


def test_objects_methods_exceptions_and_iteration_cross_as_python_would(bwrap):
    code = ("class Shop:\n    def __init__(self):\n        self.stock = {}\n"
            "    def add(self, k, n=1):\n        self.stock[k] = self.stock.get(k, 0) + n\n        return self\n"
            "    def take(self, k):\n        if not self.stock.get(k):\n            raise KeyError(k)\n"
            "        self.stock[k] -= 1\n"
            "class OutOfStock(ValueError):\n    pass\n"
            "def fail():\n    raise OutOfStock('none left')\n"
            "def squares(n):\n    for i in range(n):\n        yield i * i\n"
            "from collections import OrderedDict, namedtuple, Counter\nP = namedtuple('P', 'x y')\n"
            "def shapes():\n    return OrderedDict(a=1), P(1, 2), Counter('aab'), {1, 2}, frozenset(), b'x', 1 + 2j, 2 ** 100\n")
    tests = [
        "s = Shop()\nassert s.add('a', 2) is s and s.stock == {'a': 2} and s == s and s != Shop()",
        "s = Shop()\ntry:\n    s.take('zz')\nexcept KeyError as e:\n    assert e.args == ('zz',)\nelse:\n    raise AssertionError",
        "try:\n    fail()\nexcept ValueError as e:\n"
        "    assert type(e).__name__ == 'OutOfStock' and str(e) == 'none left'\nelse:\n    raise AssertionError",
        "assert list(squares(4)) == [0, 1, 4, 9] and 9 in squares(4) and 5 not in squares(4)",
        "assert shapes() == ({'a': 1}, (1, 2), {'a': 2, 'b': 1}, {1, 2}, frozenset(), b'x', 1 + 2j, 2 ** 100)",
        "assert type(shapes()[1]) is tuple and type(shapes()[0]) is dict",
    ]
    r = run_code(code, tests, backend=bwrap)
    assert r.tests == ["ok"] * len(tests), (r, r.test_errors)


def test_test_imports_use_the_judges_standard_library_and_the_programs_own_modules(bwrap):
    code = ("import math\nmath.isclose = lambda *a, **k: True\nmath.pi = 3\n"
            "import os\nos.makedirs('/tmp/pkg', exist_ok=True)\n"
            "open('/tmp/pkg/helper.py', 'w').write('def twice(x):\\n    return 2 * x\\n')\n"
            "import sys\nsys.path.insert(0, '/tmp/pkg')\n")
    tests = ["import math\nassert not math.isclose(1.0, 2.0) and math.pi > 3.14",   # the judge's math, not the program's
             "import math as m\nassert m.sqrt(16) == 4",
             "from helper import twice\nassert twice(21) == 42",             # the program's module, in the sandbox
             "import json\nassert json.loads('[1]') == [1]"]
    r = run_code(code, tests, backend=bwrap)
    assert r.tests == ["ok"] * 4, (r, r.test_errors)
    # a test that does not import math sees the program's module as a handle (its answers, never the
    # judge's module mapped by name: issue 34), so the tampered isclose cannot reach an importing test
    r = run_code(code, ["import types\nassert not isinstance(math, types.ModuleType)", "assert math.pi == 3"],
                 backend=bwrap)
    assert r.tests == ["ok", "ok"], (r, r.test_errors)


def test_values_that_cannot_cross_are_an_error_not_a_pass(bwrap):
    code = ("def deep():\n    x = []\n    for _ in range(500):\n        x = [x]\n    return x\n"
            "def loop():\n    x = []\n    x.append(x)\n    return x\n"
            "def takes(f):\n    return 1\n")
    r = run_code(code, ["deep()", "loop()", "takes(lambda: 0)"], backend=bwrap)
    assert r.tests == ["error", "error", "error"], (r, r.test_errors)
    assert "cannot cross" in r.test_errors[0] and "cannot be passed" in r.test_errors[2], r.test_errors


def test_what_the_tests_print_is_kept_and_the_programs_output_too(bwrap):
    r = run_code("print('from the program')\ndef f():\n    print('in a call')\n    return 1\n",
                 ["print('from a test')\nassert f() == 1"], backend=bwrap)
    assert r.passed and r.stdout.splitlines() == ["from the program", "in a call", "from a test"], r.stdout


@pytest.mark.parametrize("code, status", [
    ("import sys\nsys.exit(0.0)", "failed"),             # not an int: printed, exit status 1 (Python's rule)
    ("import sys\nsys.exit(False)", "passed"),            # bool is an int: 0
    ("import sys\nsys.exit(True)", "failed"),
    ("import sys\nsys.exit(None)", "passed"),
    ("import sys\nsys.exit(256)", "passed"),              # the exit status is the low byte, as the OS keeps it
    ("import sys\nclass Zero(int):\n    def __eq__(self, other):\n        return True\nsys.exit(Zero(3))", "failed"),
    ("\ufeffprint('a BOM is fine')", "passed"),            # Python reads a UTF-8 BOM
    ("# -*- coding: latin-1 -*-\nprint('caf\u00e9')", "passed"),
])
def test_exits_and_encodings_are_judged_as_python_does(bwrap, code, status):
    r = run_code(code, backend=bwrap)
    assert r.status == status, (r, r.stderr)


def test_a_large_valid_program_is_accepted_and_a_huge_one_is_a_clear_error(bwrap):
    big = "DATA = '" + "x" * (9 * 1024 * 1024) + "'\ndef n():\n    return len(DATA)\n"
    r = run_code(big, "assert n() == 9 * 1024 * 1024", backend=bwrap, timeout_s=30, memory_mb=256)
    assert r.status == "passed", r
    with pytest.raises(ValueError, match="programs up to 32 MiB"):
        run_code("#" * (33 * 1024 * 1024), backend=bwrap)


def test_the_in_sandbox_server_is_a_standard_library_module_with_no_course_imports():
    import ast
    from pathlib import Path

    from course_lib.evaluation.sandbox import inside

    tree = ast.parse(Path(inside.__file__).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)
    assert backends.INSIDE_SOURCE == Path(inside.__file__).read_text()


def test_the_sandbox_package_has_no_import_cycle():
    import ast
    from pathlib import Path

    folder = Path(backends.__file__).parent
    graph = {}
    for f in folder.glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(f.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                if name.startswith("course_lib.evaluation.sandbox."):
                    deps.add(name.split(".")[3])
                elif name == "course_lib.evaluation.sandbox" and isinstance(node, ast.ImportFrom):
                    deps.update(a.name for a in node.names if (folder / f"{a.name}.py").exists())
        graph[f.stem] = deps - {f.stem}

    def reaches(start, goal, seen=()):
        return any(d == goal or (d not in seen and reaches(d, goal, seen + (d,))) for d in graph.get(start, ()))

    cycles = [m for m in graph if m != "__init__" and reaches(m, m)]
    assert not cycles, {m: graph[m] for m in cycles}


def test_a_sandbox_that_never_starts_is_a_sandbox_error_within_the_startup_limit(monkeypatch):
    from course_lib.evaluation.sandbox import execute

    monkeypatch.setattr(backends, "unsafe_argv", lambda command=None: ["/bin/sleep", "30"])
    monkeypatch.setitem(execute.STARTUP_S, "unsafe", 1.0)
    r = execute.run_one("print(1)", [], limits.Limits(), "unsafe")
    assert r.status == "sandbox_error" and "did not start" in r.detail and r.duration_s < 10, r


def test_a_sandbox_error_is_run_once_more_and_says_so(monkeypatch):
    """A sandbox that failed to start (busy machine) is the sandbox's failure, not the program's: run_code runs
    the sample once more; a second sandbox_error is reported as such, naming the first."""
    from course_lib.evaluation.sandbox import run as run_mod
    from course_lib.evaluation.sandbox.result import SandboxResult

    outcomes = [SandboxResult("sandbox_error", backend="bwrap", detail="did not start"),
                SandboxResult("passed", backend="bwrap")]
    calls = []

    def fake_run_one(code, tests, limits, name):
        calls.append(name)
        return outcomes[len(calls) - 1] if len(calls) <= len(outcomes) else outcomes[-1]

    monkeypatch.setattr(run_mod, "run_one", fake_run_one)
    monkeypatch.setattr(run_mod, "resolve_backend", lambda backend=None: "bwrap")
    res = run_mod.run_code("x = 1")
    assert (res.status, len(calls)) == ("passed", 2) and "did not start" in res.detail
    calls.clear()
    outcomes[1] = SandboxResult("sandbox_error", backend="bwrap", detail="still not")
    res = run_mod.run_code("x = 1")
    assert (res.status, len(calls)) == ("sandbox_error", 2) and "still not" in res.detail and "did not start" in res.detail
    calls.clear()
    outcomes[0] = SandboxResult("runtime_error", backend="bwrap")
    assert run_mod.run_code("x = 1").status == "runtime_error" and len(calls) == 1   # a program's verdict: once
