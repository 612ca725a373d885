"""Verifiable environments: patches, collection check, stability check, F2P/P2P, and rewards."""
from __future__ import annotations

import functools

import pytest

from course_lib.agentic.envs import (
    BrokenEnvironment,
    PatchError,
    apply_patch,
    build_environment,
    evaluate_patch,
    load_task,
    naive_fail_to_pass,
    naive_reward,
    run_tests,
    task_names,
)


@pytest.fixture(scope="module")
def runner():
    """The course sandbox; on a machine with neither Docker nor bubblewrap, its plain-subprocess backend
    (these are our own asset repositories, not model output)."""
    from course_lib.evaluation.sandbox import resolve_backend, run_code

    try:
        backend = resolve_backend(None)
    except RuntimeError as exc:
        print(f"no isolating sandbox here ({exc}); using the subprocess backend for our own assets")
        backend = "unsafe"
    return functools.partial(run_code, backend=backend)


def test_apply_patch_creates_modifies_and_checks_context():
    files = {"a.py": "x = 1\ny = 2\nz = 3\n"}
    patch = ("--- a/a.py\n+++ b/a.py\n@@ -1,3 +1,3 @@\n x = 1\n-y = 2\n+y = 20\n z = 3\n"
             "--- /dev/null\n+++ b/new.py\n@@ -0,0 +1,1 @@\n+print('hi')\n")
    out = apply_patch(files, patch)
    assert out["a.py"] == "x = 1\ny = 20\nz = 3\n" and out["new.py"] == "print('hi')\n"
    assert files["a.py"] == "x = 1\ny = 2\nz = 3\n"          # input untouched
    with pytest.raises(PatchError, match="a.py: line 2"):
        apply_patch({"a.py": "x = 1\ny = 5\nz = 3\n"}, patch)


def test_assets_load_and_gold_patches_apply():
    assert {"money_rounding", "blog_slugify", "store_inventory", "units_broken_env"} <= set(task_names())
    for name in task_names():
        task = load_task(name)
        patched = apply_patch(apply_patch(task.files, task.test_patch), task.gold_patch)
        assert set(task.gold_files) <= set(patched)


EXPECTED_F2P = {
    "money_rounding": ["tests/test_money.py::test_round_price_half_up",
                       "tests/test_money.py::test_round_price_half_up_large"],
    "blog_slugify": ["tests/test_text.py::test_slugify_collapses_separators",
                     "tests/test_text.py::test_slugify_many_spaces"],
    "store_inventory": ["tests/test_inventory.py::test_remove_too_many_raises"],
}


@pytest.mark.parametrize("name", sorted(EXPECTED_F2P))
def test_good_environments_build_with_exact_f2p_and_p2p(name, runner):
    task = load_task(name)
    report = build_environment(task, runner=runner)
    assert report.ok, report.reasons
    assert report.collected_ratio == 1.0
    assert report.fail_to_pass == EXPECTED_F2P[name]
    assert sorted(report.pass_to_pass) == sorted(set(task.expected_tests) - set(EXPECTED_F2P[name]))
    assert len(report.before) == len(report.after) == 2
    gold = evaluate_patch(task, report, task.gold_patch, runner=runner)
    noop = evaluate_patch(task, report, "", runner=runner)
    assert all(gold.values())
    assert not any(noop[t] for t in report.fail_to_pass) and all(noop[t] for t in report.pass_to_pass)


def test_broken_environment_is_rejected_and_naive_builder_rewards_a_noop(runner):
    task = load_task("units_broken_env")
    report = build_environment(task, runner=runner)
    assert not report.ok
    assert report.collected_ratio < 0.9
    assert any("collected" in r for r in report.reasons)
    # without the checks: no Fail-to-Pass test survives, so "all known tests pass" rewards a no-op
    naive_f2p = naive_fail_to_pass(task, runner=runner)
    assert naive_f2p == []
    collected = run_tests(apply_patch(task.files, task.test_patch), [], runner=runner).collected
    noop = run_tests(apply_patch(task.files, task.test_patch), collected, runner=runner).passed
    assert naive_reward(noop) == 1.0


def test_flaky_tests_are_caught_by_running_twice(runner):
    calls: dict[str, int] = {}

    def flaky_runner(code, tests, **kw):          # the same environment answers differently the second time
        res = runner(code, tests, **kw)
        calls[code] = calls.get(code, 0) + 1
        if calls[code] % 2 == 0 and res.tests:
            res.tests = ["assert"] + list(res.tests[1:])
        return res

    task = load_task("store_inventory")
    report = build_environment(task, runner=flaky_runner)
    assert not report.ok and any("unstable" in r for r in report.reasons)
    once = build_environment(task, runner=flaky_runner, runs=1)   # one run cannot see it
    assert not any("unstable" in r for r in once.reasons)


def test_infrastructure_failures_are_retried_not_scored(runner):
    from types import SimpleNamespace

    from course_lib.agentic.envs import run_tests_batch

    failures = {"left": 1}

    def shaky_runner(code, tests, **kw):           # the first run dies in the sandbox, not in the tests
        if failures["left"]:
            failures["left"] -= 1
            return SimpleNamespace(status="sandbox_error", stdout="", tests=[])
        return runner(code, tests, **kw)

    task = load_task("store_inventory")
    files = apply_patch(apply_patch(task.files, task.test_patch), task.gold_patch)
    run = run_tests(files, task.expected_tests, runner=shaky_runner)
    assert run.attempts == 2 and not run.infra_error and all(run.passed.values())
    failures["left"] = 5
    dead = run_tests(files, task.expected_tests, runner=shaky_runner, retries=1)
    assert dead.infra_error and dead.attempts == 2 and not any(dead.passed.values())
    batch = run_tests_batch([(files, task.expected_tests)] * 3, runner=runner)
    assert [all(r.passed.values()) for r in batch] == [True, True, True]


def test_the_gold_patch_on_a_broken_environment_is_not_a_zero_reward(runner):
    """A sandbox that keeps failing, or an environment the builder rejected: evaluate_patch says so
    (BrokenEnvironment) instead of returning all-False test results, which would score the gold patch
    like a wrong answer."""
    from types import SimpleNamespace

    task = load_task("store_inventory")
    report = build_environment(task, runner=runner)
    assert report.ok
    dead = lambda code, tests, **kw: SimpleNamespace(status="sandbox_error", stdout="", tests=[])
    with pytest.raises(BrokenEnvironment, match="exclude or retry"):
        evaluate_patch(task, report, task.gold_patch, runner=dead, retries=1)
    broken = load_task("units_broken_env")
    broken_report = build_environment(broken, runner=runner)
    with pytest.raises(BrokenEnvironment, match="rejected"):
        evaluate_patch(broken, broken_report, broken.gold_patch, runner=runner)


# --- patches that attack the reward (issue 24.2) ---------------------------------------------------------

def _diff(files: dict, changes: dict) -> str:
    """A unified diff that turns ``files[path]`` into ``changes[path]`` (None: delete; new paths: create)."""
    import difflib

    out = []
    for path, new in changes.items():
        old = files.get(path)
        out += difflib.unified_diff((old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True),
                                    "/dev/null" if old is None else f"a/{path}", "/dev/null" if new is None else f"b/{path}")
    return "".join(out)


@pytest.fixture(scope="module")
def inventory(runner):
    task = load_task("store_inventory")
    report = build_environment(task, runner=runner)
    assert report.ok, report.reasons
    return task, report, apply_patch(task.files, task.test_patch)


def test_a_patch_that_rewrites_the_tests_earns_nothing(inventory, runner):
    task, report, with_tests = inventory
    path = "tests/test_inventory.py"
    gutted = "\n".join(line if not line.strip().startswith(("assert", "raise AssertionError")) else
                       line[: len(line) - len(line.lstrip())] + "pass" for line in with_tests[path].splitlines()) + "\n"
    tamper = _diff(with_tests, {path: gutted, "tests/test_extra.py": "def test_free():\n    pass\n",
                                "tests/conftest.py": "import builtins\nbuiltins.AssertionError = Exception\n"})
    assert apply_patch(with_tests, tamper)[path] == gutted        # the patch applies: it is restored, not refused
    result = evaluate_patch(task, report, tamper, runner=runner)
    assert not any(result[t] for t in report.fail_to_pass), result
    assert all(result[t] for t in report.pass_to_pass), result   # the untouched code still passes its tests
    both = tamper + task.gold_patch                                # tampering plus the real fix: the fix counts
    assert all(evaluate_patch(task, report, both, runner=runner).values())


def test_a_patch_that_hangs_is_the_patchs_failure_not_an_excluded_sample(inventory, runner):
    task, report, with_tests = inventory
    path = "store/inventory.py"
    hang = _diff(with_tests, {path: with_tests[path].replace(
        "    def remove(self, item: str, n: int = 1) -> None:\n",
        "    def remove(self, item: str, n: int = 1) -> None:\n        while True:\n            pass\n")})
    result = evaluate_patch(task, report, hang, runner=runner, timeout_s=3, retries=0)
    assert result == {t: False for t in report.fail_to_pass + report.pass_to_pass}
    at_import = _diff(with_tests, {"store/__init__.py": "import time\ntime.sleep(3600)\n"})
    assert not any(evaluate_patch(task, report, at_import, runner=runner, timeout_s=3, retries=0).values())
    # a sandbox that keeps failing is still the environment's problem
    from types import SimpleNamespace

    dead = lambda code, tests, **kw: SimpleNamespace(status="sandbox_error", stdout="", tests=[])
    with pytest.raises(BrokenEnvironment):
        evaluate_patch(task, report, hang, runner=dead, retries=0)


def test_a_patch_that_exits_or_forges_answers_scores_zero(inventory, runner):
    task, report, with_tests = inventory
    path = "store/inventory.py"
    exits = _diff(with_tests, {path: "import os\nos._exit(0)\n"})
    forged = _diff(with_tests, {path: with_tests[path] + (
        "\n\nclass _Any(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n\n\n"
        "Inventory.count = lambda self, item: _Any(0)\n"
        "Inventory.remove = lambda self, item, n=1: (_ for _ in ()).throw(ValueError('always'))\n")})
    peek = _diff(with_tests, {path: with_tests[path] + (
        "\n\nimport os\nassert not os.path.exists('tests'), 'the tests are in the sandbox'\n")})
    for name, patch in (("exits at import", exits), ("always-equal count", forged), ("reads the tests", peek)):
        result = evaluate_patch(task, report, patch, runner=runner)
        assert not any(result[t] for t in report.fail_to_pass), (name, result)
    assert all(evaluate_patch(task, report, peek, runner=runner)[t] for t in report.pass_to_pass)


def test_a_patch_that_cannot_be_applied_scores_zero_with_the_reason(inventory, runner):
    """Too big, malformed, outside the repository, or a runner that raises anything at all: every test
    False and ``.reason`` says why — never an exception out of evaluate_patch (issue 34)."""
    from course_lib.agentic.envs import MAX_PATCH_BYTES

    task, report, with_tests = inventory
    path = "store/inventory.py"
    tests = report.fail_to_pass + report.pass_to_pass
    huge = _diff(with_tests, {path: with_tests[path] + "#" + "x" * MAX_PATCH_BYTES + "\n"})
    over_32 = "--- a/x\n+++ b/x\n" + "+" * (33 << 20)
    cases = {
        "too big": (huge, "MiB"), "over the program limit": (over_32, "MiB"),
        "no +++": ("--- a/store/inventory.py\n@@ -1 +1 @@\n-x\n+y\n", "+++"),
        "no a/ prefix": ("--- inventory.py\n+++ inventory.py\n@@ -1 +1 @@\n-x\n+y\n", "a/<path>"),
        "dot-dot": ("--- /dev/null\n+++ b/../../escape.py\n@@ -0,0 +1 @@\n+x = 1\n", "outside the repository"),
        "absolute": ("--- /dev/null\n+++ b//etc/passwd\n@@ -0,0 +1 @@\n+x\n", "outside the repository"),
        "absolute, no prefix": ("--- /dev/null\n+++ /etc/cron.d/job\n@@ -0,0 +1 @@\n+x\n", "outside the repository"),
        "absolute old side": ("--- /store/inventory.py\n+++ /store/inventory.py\n@@ -1 +1 @@\n-x\n+y\n",
                              "outside the repository"),
        "old side leaves": ("--- a/../../etc/passwd\n+++ b/store/inventory.py\n@@ -1 +1 @@\n-x\n+y\n",
                            "outside the repository"),
        "bad hunk": ("--- a/store/inventory.py\n+++ b/store/inventory.py\n@@ -x +y @@\n", "hunk"),
        "hunk past the end": ("--- a/store/inventory.py\n+++ b/store/inventory.py\n@@ -9999,1 +9999,1 @@\n-a\n+b\n",
                              "lines"),
        "not text": (b"--- a/x\n", "text"),
    }
    for name, (patch, words) in cases.items():
        result = evaluate_patch(task, report, patch, runner=runner)
        assert result == {t: False for t in tests}, (name, result)
        assert words in result.reason, (name, result.reason)
    for kind in (SystemExit, KeyboardInterrupt, GeneratorExit, ValueError):
        def raising(code, tests, kind=kind, **kw):
            raise kind("the runner broke")
        result = evaluate_patch(task, report, task.gold_patch, runner=raising)
        assert not any(result.values()) and kind.__name__ in result.reason, (kind, result.reason)
    gold = evaluate_patch(task, report, task.gold_patch, runner=runner)
    assert all(gold.values()) and gold.reason == ""


def test_settings_come_from_the_profile_passed_down_not_from_the_environment(monkeypatch):
    """``runs`` / ``timeout_s`` left out come from the ``profile`` argument, resolved once by the function
    the caller called and passed down as values (no lookup of ``$COURSE_PROFILE`` inside)."""
    from types import SimpleNamespace

    from course_lib import profiles
    from course_lib.agentic.harness import make_rl_datum

    seen: list[float] = []

    def recording_runner(code, tests, **kw):        # every test collected and passing, before and after
        seen.append(kw["timeout_s"])
        return SimpleNamespace(status="passed", stdout="", tests=["ok"] * len(tests), test_errors=[])

    full = profiles.get_profile("full")
    monkeypatch.setenv("COURSE_PROFILE", "ci")
    real = profiles.get_profile
    lookups: list = []
    monkeypatch.setattr(profiles, "get_profile", lambda *a, **k: lookups.append(a) or real(*a, **k))
    task = load_task("store_inventory")
    report = build_environment(task, runner=recording_runner, profile=full)
    assert len(seen) == 2 * full.agentic.env_runs == 6 and set(seen) == {full.agentic.env_timeout_s} == {60.0}
    seen.clear()
    run_tests(apply_patch(task.files, task.test_patch), task.expected_tests, runner=recording_runner, profile="full")
    assert seen == [60.0] and lookups == [("full",)]                  # a name is resolved once, where it is given
    report.ok, report.fail_to_pass = True, task.expected_tests[:1]    # accepted, so it can become a datum
    seen.clear()
    make_rl_datum(task, report, profile=full, runner=recording_runner).verifier("")
    assert seen == [60.0] and lookups == [("full",)]
