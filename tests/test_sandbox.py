"""Unit tests of course_lib.evaluation.sandbox: statuses, output capping, run_many's order, argument checks."""
from __future__ import annotations

import pytest

from course_lib.evaluation import sandbox
from course_lib.evaluation.sandbox import (
    STATUSES,
    SandboxResult,
    backends,
    resolve_backend,
    run_code,
    run_many,
    summarize,
)
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
    assert uid == euid and backends.UID_BASE <= uid < backends.UID_BASE + backends.UID_COUNT, r.stdout
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


def test_limits_default_to_the_profile(monkeypatch):
    seen = {}
    monkeypatch.setattr(sandbox, "_run_one", lambda code, tests, limits, name: seen.setdefault("l", limits))
    monkeypatch.setattr(sandbox, "_profile_sandbox", lambda: {"timeout_s": 7.5, "memory_mb": 99, "backend": "bwrap"})
    run_code("x = 1", backend="bwrap")
    assert (seen["l"].timeout_s, seen["l"].memory_mb) == (7.5, 99)


def test_bad_text_is_a_status_not_an_exception(bwrap):
    r = run_code("s = '\ud800'", backend=bwrap)
    assert r.status == "syntax_error" and "surrogates" in r.detail, r
    results = run_many(["s = '\ud800'", ADD], tests="assert add(1, 2) == 3", backend=bwrap, progress=False)
    assert [x.status for x in results] == ["syntax_error", "passed"]


def test_preferred_backend_reads_the_environment_when_called(monkeypatch):
    monkeypatch.setenv("SANDBOX_BACKEND", "unsafe")
    assert sandbox.preferred_backend() == "unsafe"
    monkeypatch.setattr(sandbox, "_probe", lambda name: (name == "docker", "x"))
    monkeypatch.delenv("SANDBOX_BACKEND")
    assert sandbox.preferred_backend() == "docker"
    monkeypatch.setattr(sandbox, "_probe", lambda name: (False, "x"))
    assert sandbox.preferred_backend() is None


def test_backend_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("SANDBOX_BACKEND", "unsafe")
    assert resolve_backend() == "unsafe"
    assert resolve_backend("bwrap") == "bwrap"


def test_auto_stops_with_a_sentence_when_nothing_works(monkeypatch):
    monkeypatch.setattr(sandbox, "_probe", lambda name: (False, f"{name} missing"))
    with pytest.raises(RuntimeError, match="apt-get install bubblewrap"):
        resolve_backend("auto")


def test_unsafe_backend_warns_loudly(capsys):
    sandbox._unsafe_warned = False
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


def test_docker_command_has_the_lesson_flags():
    argv = backends.docker_argv(60002, backends.Limits(10.0, 128), "course-sbx-test", None)
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


def test_usr_local_holds_only_the_runtime(bwrap):
    r = run_code("import os\nfor root, dirs, files in os.walk('/usr/local'):\n"
                 "    if root.endswith('dist-packages'):\n        dirs[:] = []\n    print(root)\n", backend=bwrap)
    assert r.status == "passed", r
    assert all(line.startswith("/usr/local/lib") or line == "/usr/local" for line in r.stdout.splitlines()), r.stdout


def test_a_sandbox_that_cannot_start_is_a_sandbox_error(monkeypatch, tmp_path):
    # Docker pointed at a socket where no daemon listens: not the sample's fault, and never a pass
    monkeypatch.setenv("SANDBOX_DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    r = run_code(ADD, "assert add(1, 2) == 3", backend="docker", timeout_s=5)
    assert r.status == "sandbox_error" and r.detail, r
