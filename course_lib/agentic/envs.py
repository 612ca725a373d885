"""Verifiable environments, AutoBuilder style (KAT-Coder-V2 / V2.5): from a repository, a gold patch
and a test patch to Fail-to-Pass / Pass-to-Pass sets that a reward can trust.

Building an environment:

1. apply the test patch to the base repository and run the tests in the sandbox (*before*);
2. apply the gold patch too and run them again (*after*);
3. require that at least ``min_collected`` (90%) of the expected tests were collected in both —
   a test file that fails to import silently removes its tests;
4. run each side ``runs`` times (2) and require identical outcomes (flaky tests make noisy rewards);
5. Fail-to-Pass = fail before, pass after; Pass-to-Pass = pass in both; a test that fails after the
   gold patch means the environment (not the patch) is broken.

Every test run goes through ``course_lib.evaluation.sandbox.run_code``: the repository's files travel inside
the code string, are written to the sandbox's private ``/tmp`` and imported from there.

Introduced in lesson 08.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Callable, Mapping

from course_lib.paths import assets_dir

COLLECT_MARK = "@@COLLECTED@@"
INFRA_STATUSES = ("timeout", "sandbox_error", "memory_limit", "output_limit")
Runner = Callable[..., object]   # run_code(code, tests=[...], timeout_s=...) -> result with .status/.stdout/.tests


# --- tasks and patches ------------------------------------------------------------------------------

@dataclass
class EnvTask:
    """One task: base repository files, the gold patch, the test patch and its metadata."""

    name: str
    files: dict[str, str]
    gold_patch: str
    test_patch: str
    issue: str
    gold_files: list[str]
    expected_tests: list[str]


def task_names() -> list[str]:
    """The environments shipped in ``assets/agentic/envs``. Introduced in lesson 08."""
    return sorted(p.name for p in assets_dir("agentic", "envs").iterdir() if (p / "task.json").exists())


def load_task(name: str) -> EnvTask:
    """Read one environment from ``assets/agentic/envs/<name>``. Introduced in lesson 08."""
    root = assets_dir("agentic", "envs", name)
    if not (root / "task.json").exists():
        raise FileNotFoundError(f"no environment {name!r} in {root.parent}; available: {task_names()}")
    meta = json.loads((root / "task.json").read_text(encoding="utf-8"))
    repo = root / "repo"
    files = {p.relative_to(repo).as_posix(): p.read_text(encoding="utf-8")
             for p in sorted(repo.rglob("*")) if p.is_file()}
    return EnvTask(name, files, (root / "gold.patch").read_text(encoding="utf-8"),
                   (root / "test.patch").read_text(encoding="utf-8"), meta["issue"],
                   list(meta["gold_files"]), list(meta["expected_tests"]))


class PatchError(ValueError):
    """A patch does not apply (its context lines are not in the file)."""


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def apply_patch(files: Mapping[str, str], patch: str) -> dict[str, str]:
    """Apply a unified diff (``--- a/x`` / ``+++ b/x`` / ``@@`` hunks; ``/dev/null`` creates or deletes
    a file) to ``files`` and return the new mapping. Context must match exactly, else
    :class:`PatchError` names the file and line. Introduced in lesson 08."""
    out = dict(files)
    lines = patch.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        if not lines[i].startswith("--- "):
            i += 1
            continue
        old_name = lines[i][4:].strip()
        new_name = lines[i + 1][4:].strip() if i + 1 < len(lines) else ""
        if not new_name:
            raise PatchError(f"patch line {i + 1}: '---' without '+++'")
        path = (new_name if new_name != "/dev/null" else old_name).split("/", 1)[1]
        old_text = "" if old_name == "/dev/null" else out.get(path)
        if old_text is None:
            raise PatchError(f"the patch changes {path!r}, which is not in the repository")
        src = old_text.splitlines(keepends=True)
        result, cursor = [], 0
        i += 2
        while i < len(lines) and lines[i].startswith("@@"):
            m = _HUNK.match(lines[i])
            if not m:
                raise PatchError(f"patch line {i + 1}: bad hunk header {lines[i]!r}")
            start = max(int(m.group(1)) - 1, 0) if old_name != "/dev/null" else 0
            old_left = int(m.group(2)) if m.group(2) is not None else 1
            new_left = int(m.group(4)) if m.group(4) is not None else 1
            result += src[cursor:start]
            cursor = start
            i += 1
            while i < len(lines) and (old_left > 0 or new_left > 0 or lines[i].startswith("\\")):
                tag, body = lines[i][:1], lines[i][1:]
                if tag not in (" ", "-", "+", "\\"):
                    raise PatchError(f"patch line {i + 1}: the hunk ends early ({lines[i].rstrip()!r})")
                old_left -= tag in (" ", "-")
                new_left -= tag in (" ", "+")
                if tag in (" ", "-"):
                    if cursor >= len(src) or src[cursor].rstrip("\n") != body.rstrip("\n"):
                        raise PatchError(f"{path}: line {cursor + 1} does not match the patch context "
                                         f"{body.rstrip()!r}; was the patch made for another version?")
                    if tag == " ":
                        result.append(src[cursor])
                    cursor += 1
                elif tag == "+":
                    result.append(body)
                i += 1
        result += src[cursor:]
        if new_name == "/dev/null":
            out.pop(path, None)
        else:
            out[path] = "".join(result)
    return out


# --- running tests in the sandbox --------------------------------------------------------------------

_BOOTSTRAP = r'''
import importlib.util, json, os, sys, tempfile, traceback
_FILES = json.loads(%s)
_ROOT = tempfile.mkdtemp(prefix="repo_")
for _p, _t in _FILES.items():
    _full = os.path.join(_ROOT, _p)
    os.makedirs(os.path.dirname(_full), exist_ok=True)
    with open(_full, "w", encoding="utf-8") as _f:
        _f.write(_t)
sys.path.insert(0, _ROOT)
_MODULES, _COLLECTED, _ERRORS = {}, [], {}

def _load(path):
    if path not in _MODULES:
        name = "t_" + path.replace("/", "_").replace(".", "_")
        spec = importlib.util.spec_from_file_location(name, os.path.join(_ROOT, path))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _MODULES[path] = mod
    return _MODULES[path]

for _p in sorted(_FILES):
    _base = os.path.basename(_p)
    if _p.startswith("tests/") and _base.startswith("test_") and _p.endswith(".py"):
        try:
            _m = _load(_p)
        except Exception as _exc:
            _ERRORS[_p] = "%%s: %%s" %% (type(_exc).__name__, _exc)
            continue
        _COLLECTED += ["%%s::%%s" %% (_p, n) for n in sorted(vars(_m))
                       if n.startswith("test_") and callable(getattr(_m, n))]
print(%r, json.dumps({"collected": _COLLECTED, "errors": _ERRORS}), flush=True)

def _run(test_id):
    path, name = test_id.split("::")
    getattr(_load(path), name)()
'''


def bundle_code(files: Mapping[str, str]) -> str:
    """The code string that recreates ``files`` in the sandbox's /tmp, collects the tests under
    ``tests/`` and defines ``_run(test_id)``. Introduced in lesson 08."""
    return _BOOTSTRAP % (repr(json.dumps(dict(files))), COLLECT_MARK)


@dataclass
class TestRun:
    """One run of a test suite: what was collected, the outcome of each expected test."""

    status: str
    collected: list[str]
    collection_errors: dict[str, str]
    passed: dict[str, bool]
    attempts: int = 1
    infra_error: bool = False


def default_runner() -> Runner:
    """``course_lib.evaluation.sandbox.run_code`` (the lesson's environments always run in the sandbox)."""
    from course_lib.evaluation.sandbox import run_code

    return run_code


def _agentic_setting(key: str, value):
    """``value``, or the active profile's ``agentic.<key>`` when it is None."""
    if value is not None:
        return value
    from course_lib.profiles import get_profile

    return get_profile().agentic[key]


def run_tests(files: Mapping[str, str], test_ids: list[str], *, runner: Runner | None = None,
              timeout_s: float | None = None, retries: int = 2) -> TestRun:
    """Run ``test_ids`` against ``files`` in the sandbox; a test that was not collected counts as not
    passed. A run that failed for infrastructure reasons (timeout, sandbox error, no collection
    marker) is retried up to ``retries`` times — a busy machine must not become a wrong reward.
    ``timeout_s`` (per run) None: the active profile's ``agentic.env_timeout_s``. Introduced in lesson 08."""
    runner = runner or default_runner()
    timeout_s = _agentic_setting("env_timeout_s", timeout_s)
    code, tests = bundle_code(files), [f"_run({t!r})" for t in test_ids]
    for attempt in range(1, retries + 2):  # noqa: B007 - the count is reported after the loop
        res = runner(code, tests, timeout_s=timeout_s)
        marker = [ln for ln in getattr(res, "stdout", "").splitlines() if ln.startswith(COLLECT_MARK)]
        infra_error = res.status in INFRA_STATUSES or not marker
        if not infra_error:
            break
    collected, errors = [], {}
    if marker:
        info = json.loads(marker[-1][len(COLLECT_MARK):])
        collected, errors = info["collected"], info["errors"]
    outcomes = list(getattr(res, "tests", []) or [])
    passed = {t: (i < len(outcomes) and outcomes[i] == "ok" and t in collected) for i, t in enumerate(test_ids)}
    return TestRun(res.status, collected, errors, passed, attempts=attempt, infra_error=infra_error)


def run_tests_batch(jobs: list[tuple[Mapping[str, str], list[str]]], *, runner: Runner | None = None,
                    timeout_s: float | None = None, retries: int = 2, workers: int = 4) -> list[TestRun]:
    """:func:`run_tests` for many ``(files, test_ids)`` jobs on ``workers`` threads (each sandbox run
    waits mostly on process/container start-up); results in input order. Every sandbox run leases its
    own uid. Introduced in lesson 08."""
    from concurrent.futures import ThreadPoolExecutor

    if not jobs:
        return []
    workers = max(1, min(workers, len(jobs)))

    def one(job):
        files, test_ids = job
        return run_tests(files, test_ids, runner=runner, timeout_s=timeout_s, retries=retries)

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, jobs))


# --- building an environment -------------------------------------------------------------------------

@dataclass
class EnvReport:
    """The verdict on one environment and the sets a reward needs."""

    name: str
    ok: bool
    reasons: list[str]
    collected_ratio: float
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    before: list[TestRun] = field(repr=False, default_factory=list)
    after: list[TestRun] = field(repr=False, default_factory=list)


def split_f2p_p2p(before: Mapping[str, bool], after: Mapping[str, bool]) -> tuple[list[str], list[str]]:
    """Fail-to-Pass (failed before the gold patch, passes after) and Pass-to-Pass (passes in both),
    in the order of ``after``. Introduced in lesson 08."""
    f2p = [t for t, ok in after.items() if ok and not before.get(t, False)]
    p2p = [t for t, ok in after.items() if ok and before.get(t, False)]
    return f2p, p2p


def build_environment(task: EnvTask, *, runs: int | None = None, min_collected: float | None = None,
                      runner: Runner | None = None, timeout_s: float | None = None, workers: int = 4) -> EnvReport:
    """Validate ``task`` and derive Fail-to-Pass / Pass-to-Pass (see the module docstring).
    ``runs``, ``min_collected`` and ``timeout_s`` None: the active profile's ``agentic.env_runs``,
    ``agentic.min_collected`` and ``agentic.env_timeout_s``. Introduced in lesson 08."""
    runs = int(_agentic_setting("env_runs", runs))
    min_collected = float(_agentic_setting("min_collected", min_collected))
    with_tests = apply_patch(task.files, task.test_patch)
    with_gold = apply_patch(with_tests, task.gold_patch)
    expected = task.expected_tests
    results = run_tests_batch([(with_tests, expected)] * runs + [(with_gold, expected)] * runs,
                              runner=runner, timeout_s=timeout_s, workers=workers)
    before, after = results[:runs], results[runs:]
    reasons = []
    ratio = min(len(set(r.collected) & set(expected)) / len(expected) for r in before + after)
    if ratio < min_collected:
        errs = {k: v for r in before + after for k, v in r.collection_errors.items()}
        reasons.append(f"only {ratio:.0%} of the expected tests were collected (need {min_collected:.0%}); "
                       f"collection errors: {errs or 'none reported'}")
    for label, group in (("before", before), ("after", after)):
        if any(r.infra_error for r in group):
            reasons.append(f"the sandbox failed ({[r.status for r in group]}) while running the tests "
                           f"{label} the gold patch, even after retries")
        unstable = [t for t in expected if len({r.passed[t] for r in group}) > 1]
        if unstable:
            reasons.append(f"unstable {label} the gold patch over {runs} runs: {unstable}")
    after_pass = {t: all(r.passed[t] for r in after) for t in expected}
    before_pass = {t: all(r.passed[t] for r in before) for t in expected}
    broken = [t for t in expected if not after_pass[t]]
    if broken:
        reasons.append(f"tests fail even with the gold patch: {broken}")
    f2p, p2p = split_f2p_p2p(before_pass, after_pass)
    if not f2p:
        reasons.append("no Fail-to-Pass test: the reward could not tell a fix from a no-op")
    return EnvReport(name=task.name, ok=not reasons, reasons=reasons, collected_ratio=ratio,
                     fail_to_pass=f2p, pass_to_pass=p2p, before=before, after=after)


class BrokenEnvironment(RuntimeError):
    """The environment, not the patch, failed: the sample has no reward (exclude it or retry it)."""


def evaluate_patch(task: EnvTask, report: EnvReport, patch: str, *, runner: Runner | None = None,
                   timeout_s: float | None = None, retries: int = 2) -> dict[str, bool]:
    """Apply the test patch and a candidate ``patch`` (may be empty) and run the F2P + P2P tests:
    test id → passed. A patch that does not apply fails every test (the patch's fault).

    A broken environment is never a reward of 0: when ``report`` rejected the environment, or the
    sandbox still fails after ``retries`` (timeout, sandbox error, no collection marker), this raises
    :class:`BrokenEnvironment` saying which — the caller excludes the sample or retries it later.
    (A timeout is counted as the environment's failure here; a harness that can tell a patch's
    infinite loop from a stalled machine should score the former.) ``timeout_s`` None: the active
    profile's ``agentic.env_timeout_s``. Introduced in lesson 08."""
    if not report.ok:
        raise BrokenEnvironment(f"environment {task.name!r} was rejected when it was built "
                                f"({'; '.join(report.reasons)[:200]}); exclude its samples")
    tests = report.fail_to_pass + report.pass_to_pass
    try:
        files = apply_patch(apply_patch(task.files, task.test_patch), patch)
    except PatchError:
        return {t: False for t in tests}
    run = run_tests(files, tests, runner=runner, timeout_s=timeout_s, retries=retries)
    if run.infra_error:
        raise BrokenEnvironment(f"environment {task.name!r}: the sandbox failed ({run.status}) in all "
                                f"{run.attempts} attempts; exclude or retry this sample, do not score it 0")
    return run.passed


def naive_fail_to_pass(task: EnvTask, *, runner: Runner | None = None) -> list[str]:
    """What a builder *without* the checks derives: one run each side, only the tests that happened
    to be collected, no stability or collection check. Introduced in lesson 08."""
    with_tests = apply_patch(task.files, task.test_patch)
    with_gold = apply_patch(with_tests, task.gold_patch)
    probe = run_tests(with_tests, [], runner=runner)
    tests = probe.collected
    before = run_tests(with_tests, tests, runner=runner).passed
    after = run_tests(with_gold, tests, runner=runner).passed
    return [t for t in tests if after[t] and not before[t]]


def naive_reward(results: Mapping[str, bool]) -> float:
    """'All the tests we know about pass' — 1.0 for an empty set, which is the bug. Introduced in lesson 08."""
    return float(all(results.values()))
