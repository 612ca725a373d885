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

Every test run goes through ``course_lib.evaluation.sandbox.run_code``: the repository's files (without
``tests/``) travel inside the code string and are written to the sandbox's private ``/tmp``; the test
files run in the judge (the calling process) and import the repository's modules from the sandbox, so a
patch can change what the code returns but never what a test asserts.

The ``runs``, ``min_collected`` and ``timeout_s`` a function is not given come from the ``agentic`` section
of its ``profile`` argument (a resolved profile or a name; None: the default profile, for a notebook's or a
test's direct call); a function that calls another here passes the values down, never the lookup.

Introduced in lesson 08.
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Callable, Mapping

from course_lib.paths import assets_dir
from course_lib.profiles import ProfileLike, resolve_profile

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
    """A patch does not apply: its context lines are not in the file, it is malformed, too big, or names a
    path outside the repository."""


MAX_PATCH_BYTES = 4 * 1024 * 1024   # a candidate patch larger than this cannot be applied (it scores 0)


def _repo_path(name: str, line_no: int) -> str:
    """The repository path of a ``--- a/x`` / ``+++ b/x`` name; PatchError when it has no ``a/``-style
    prefix or leaves the repository (absolute — ``/etc/x`` as much as ``b//etc/x`` —, ``..``, empty parts)."""
    name = name.split("\t")[0]
    if name.startswith("/"):
        raise PatchError(f"patch line {line_no}: {name[:80]!r} is an absolute path, outside the repository")
    if "/" not in name:
        raise PatchError(f"patch line {line_no}: {name[:80]!r} is not a/<path> or b/<path>")
    path = name.split("/", 1)[1]
    parts = path.split("/")
    if (not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts)
            or "\\" in path or "\0" in path):
        raise PatchError(f"patch line {line_no}: {path[:80]!r} is outside the repository")
    return path


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def apply_patch(files: Mapping[str, str], patch: str) -> dict[str, str]:
    """Apply a unified diff (``--- a/x`` / ``+++ b/x`` / ``@@`` hunks; ``/dev/null`` creates or deletes
    a file) to ``files`` and return the new mapping. Context must match exactly, else
    :class:`PatchError` names the file and line. Introduced in lesson 08."""
    if not isinstance(patch, str):
        raise PatchError(f"a patch is text, got {type(patch).__name__}")
    size = len(patch.encode("utf-8", "surrogatepass"))
    if size > MAX_PATCH_BYTES:
        raise PatchError(f"the patch is {size / 2**20:.1f} MiB, over the {MAX_PATCH_BYTES // 2**20} MiB a patch may be")
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
        if not lines[i + 1].startswith("+++ "):
            raise PatchError(f"patch line {i + 2}: '---' not followed by '+++'")
        if old_name == new_name == "/dev/null":
            raise PatchError(f"patch line {i + 1}: both sides are /dev/null")
        for name, at in ((old_name, i + 1), (new_name, i + 2)):   # neither side may name a path outside
            if name != "/dev/null":
                _repo_path(name, at)
        path = _repo_path(new_name if new_name != "/dev/null" else old_name, i + 1)
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
            if start < cursor or start > len(src):
                raise PatchError(f"patch line {i + 1}: the hunk starts at line {start + 1} of {path}, "
                                 f"which has {len(src)} lines (or overlaps the previous hunk)")
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


# --- running tests: the repository in the sandbox, its tests in the judge ---------------------------

_BOOTSTRAP = r'''
import json as _json, os as _os, sys as _sys, tempfile as _tempfile
_root = _tempfile.mkdtemp(prefix="repo_")
_path = _text = _full = _f = None
for _path, _text in _json.loads(%s).items():
    _full = _os.path.normpath(_os.path.join(_root, _path))
    if not _full.startswith(_root + _os.sep):
        continue
    try:
        _os.makedirs(_os.path.dirname(_full), exist_ok=True)
        with open(_full, "w", encoding="utf-8") as _f:
            _f.write(_text)
    except OSError:
        pass   # a path the patch made impossible: importing it fails in the tests
_sys.path.insert(0, _root)
_os.chdir(_root)
del _json, _os, _sys, _tempfile, _root, _path, _text, _full, _f
'''


def is_test_file(path: str) -> bool:
    """Whether ``path`` belongs to the test suite (everything under ``tests/``). Introduced in lesson 08."""
    return path.startswith("tests/")


def bundle_code(files: Mapping[str, str]) -> str:
    """The program that recreates the repository **without its tests** in the sandbox's /tmp and puts
    it on ``sys.path``. The tests never enter the sandbox (:func:`judge_tests`). Introduced in lesson 08."""
    program = {p: t for p, t in files.items() if not is_test_file(p)}
    return _BOOTSTRAP % repr(json.dumps(program))


def _loader(path: str, source: str) -> str:
    """Judge-side code that executes one test file once, as a module whose imports of the repository's
    packages (``from store.inventory import Inventory``) are answered by the sandbox."""
    name = "t_" + re.sub(r"\W", "_", path)
    return (f"if '_TEST_MODULES' not in globals():\n    _TEST_MODULES = {{}}\n"
            f"if {path!r} not in _TEST_MODULES:\n"
            f"    import types as _types\n"
            f"    _m = _types.ModuleType({name!r})\n"
            f"    _m.__dict__.update(__builtins__=__builtins__, __file__={path!r})\n"
            f"    exec(compile({source!r}, {path!r}, 'exec'), _m.__dict__)\n"
            f"    _TEST_MODULES[{path!r}] = _m\n")


def judge_tests(files: Mapping[str, str], test_ids: list[str]) -> tuple[list[str], list[str]]:
    """The tests as the judge runs them: one source per test id (load its file, call the function),
    then one per test file (load it: ``ok`` means it was collected). Returns (sources, test files).
    Introduced in lesson 08."""
    test_files = sorted(p for p in files if is_test_file(p) and p.rsplit("/", 1)[-1].startswith("test_")
                        and p.endswith(".py"))
    sources = []
    for test_id in test_ids:
        path, _, name = test_id.partition("::")
        if path not in files or not name.isidentifier():
            sources.append(f"raise LookupError({('no test ' + test_id)!r})")
            continue
        sources.append(_loader(path, files[path]) + f"_TEST_MODULES[{path!r}].{name}()\n")
    return sources + [_loader(p, files[p]) for p in test_files], test_files


def _test_functions(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return sorted(n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.name.startswith("test_"))


@dataclass
class TestRun:
    """One run of a test suite: what was collected, the outcome of each expected test."""

    status: str
    collected: list[str]
    collection_errors: dict[str, str]
    passed: dict[str, bool]
    attempts: int = 1
    infra_error: bool = False


def default_runner(backend: str | None = None) -> Runner:
    """``course_lib.evaluation.sandbox.run_code`` (the lesson's environments always run in the sandbox), on
    ``backend`` (None: the sandbox's rule with nothing configured; a notebook passes the backend it chose
    with its profile, ``resolve_backend(None, configured=profile.sandbox.backend)``)."""
    from functools import partial

    from course_lib.evaluation.sandbox import run_code

    return run_code if backend is None else partial(run_code, backend=backend)


def _agentic_setting(key: str, value, profile: ProfileLike):
    """``value``, or ``agentic.<key>`` of ``profile`` (see the module docstring) when it is None."""
    return value if value is not None else resolve_profile(profile).agentic[key]


def run_tests(files: Mapping[str, str], test_ids: list[str], *, runner: Runner | None = None,
              timeout_s: float | None = None, retries: int = 2, profile: ProfileLike = None) -> TestRun:
    """Run ``test_ids`` against ``files``: the repository (without ``tests/``) in the sandbox, the test
    files in the judge, importing the repository's modules from the sandbox; a test that was not
    collected counts as not passed. A run that failed for infrastructure reasons (timeout, sandbox
    error, memory or output limit) is retried up to ``retries`` times — a busy machine must not become
    a wrong reward. ``timeout_s`` (per run) None: ``profile``'s ``agentic.env_timeout_s``.
    Introduced in lesson 08."""
    runner = runner or default_runner()
    timeout_s = _agentic_setting("env_timeout_s", timeout_s, profile)
    code = bundle_code(files)
    tests, test_files = judge_tests(files, test_ids)
    for attempt in range(1, retries + 2):  # noqa: B007 - the count is reported after the loop
        res = runner(code, tests, timeout_s=timeout_s)
        infra_error = res.status in INFRA_STATUSES
        if not infra_error:
            break
    outcomes = list(getattr(res, "tests", []) or [])
    reasons = list(getattr(res, "test_errors", []) or [])
    collected, errors = [], {}
    for i, path in enumerate(test_files, start=len(test_ids)):
        if i < len(outcomes) and outcomes[i] == "ok":
            collected += [f"{path}::{name}" for name in _test_functions(files[path])]
        elif i < len(outcomes):
            errors[path] = reasons[i] if i < len(reasons) and reasons[i] else f"the file did not load ({outcomes[i]})"
    passed = {t: (i < len(outcomes) and outcomes[i] == "ok" and t in collected) for i, t in enumerate(test_ids)}
    return TestRun(res.status, collected, errors, passed, attempts=attempt, infra_error=infra_error)


def run_tests_batch(jobs: list[tuple[Mapping[str, str], list[str]]], *, runner: Runner | None = None,
                    timeout_s: float | None = None, retries: int = 2, workers: int = 4,
                    profile: ProfileLike = None) -> list[TestRun]:
    """:func:`run_tests` for many ``(files, test_ids)`` jobs on ``workers`` threads (each sandbox run
    waits mostly on process/container start-up); results in input order. Every sandbox run leases its
    own uid. ``timeout_s`` None: ``profile``'s ``agentic.env_timeout_s``. Introduced in lesson 08."""
    from concurrent.futures import ThreadPoolExecutor

    if not jobs:
        return []
    timeout_s = _agentic_setting("env_timeout_s", timeout_s, profile)
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
                      runner: Runner | None = None, timeout_s: float | None = None, workers: int = 4,
                      profile: ProfileLike = None) -> EnvReport:
    """Validate ``task`` and derive Fail-to-Pass / Pass-to-Pass (see the module docstring).
    ``runs``, ``min_collected`` and ``timeout_s`` None: ``profile``'s ``agentic.env_runs``,
    ``agentic.min_collected`` and ``agentic.env_timeout_s``. Introduced in lesson 08."""
    runs = int(_agentic_setting("env_runs", runs, profile))
    min_collected = float(_agentic_setting("min_collected", min_collected, profile))
    timeout_s = _agentic_setting("env_timeout_s", timeout_s, profile)
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


def patched_paths(patch: str) -> set[str]:
    """The repository paths a unified diff creates, changes or deletes. Introduced in lesson 08."""
    paths = set()
    for line in patch.splitlines():
        if line.startswith(("--- ", "+++ ")):
            name = line[4:].strip().split("\t")[0]
            if name != "/dev/null" and "/" in name:
                paths.add(name.split("/", 1)[1])
    return paths


def restore_tests(with_tests: Mapping[str, str], patched: Mapping[str, str], test_patch: str) -> dict[str, str]:
    """SWE-bench's order: after the candidate patch, every test file is put back as the test patch made
    it (files under ``tests/`` and whatever the test patch touches); test files the candidate created are
    dropped. A patch can change the code under test, never the tests. Introduced in lesson 08."""
    protected = {p for p in with_tests if is_test_file(p)} | patched_paths(test_patch)
    files = {p: t for p, t in patched.items() if p not in protected and not is_test_file(p)}
    files.update({p: with_tests[p] for p in protected if p in with_tests})
    return files


class PatchVerdict(dict):
    """What :func:`evaluate_patch` returns: test id → passed, plus ``reason`` — why every test failed
    without running when the patch could not be applied or run (``""`` otherwise). Introduced in lesson 08."""

    def __init__(self, passed: Mapping[str, bool], reason: str = "") -> None:
        super().__init__(passed)
        self.reason = reason


def evaluate_patch(task: EnvTask, report: EnvReport, patch: str, *, runner: Runner | None = None,
                   timeout_s: float | None = None, retries: int = 2, profile: ProfileLike = None) -> dict[str, bool]:
    """Apply the test patch and a candidate ``patch`` (may be empty), restore the test files
    (:func:`restore_tests`), and run the F2P + P2P tests: test id → passed (a :class:`PatchVerdict`).
    Any patch that cannot be applied or run — it does not apply, is malformed, too big
    (:data:`MAX_PATCH_BYTES`, or a repository over the sandbox's program limit), names a path outside
    the repository, or makes the run raise anything at all — fails every test (the patch's fault, a
    reward of 0) with the reason in ``.reason``; nothing the patch does makes this raise.

    A broken environment is never a reward of 0: when ``report`` rejected the environment, or the
    sandbox itself keeps failing after ``retries``, this raises :class:`BrokenEnvironment` — the caller
    excludes the sample or retries it later. A patch whose tests run out of time, memory or output while
    the environment without it finishes (run again now, same limits) is the **patch's** failure: every
    test False, never an excluded sample (otherwise hanging would be a way out of a bad reward).
    ``timeout_s`` None: ``profile``'s ``agentic.env_timeout_s``. Introduced in lesson 08."""
    if not report.ok:
        raise BrokenEnvironment(f"environment {task.name!r} was rejected when it was built "
                                f"({'; '.join(report.reasons)[:200]}); exclude its samples")
    tests = report.fail_to_pass + report.pass_to_pass
    with_tests = apply_patch(task.files, task.test_patch)
    timeout_s = _agentic_setting("env_timeout_s", timeout_s, profile)
    try:
        files = restore_tests(with_tests, apply_patch(with_tests, patch), task.test_patch)
        run = run_tests(files, tests, runner=runner, timeout_s=timeout_s, retries=retries)
    except BaseException as exc:  # noqa: BLE001 - a patch that cannot be applied or run scores 0, never raises
        why = "the patch does not apply" if isinstance(exc, PatchError) else "the patched repository cannot run"
        return PatchVerdict({t: False for t in tests}, f"{why}: {type(exc).__name__}: {str(exc)[:300]}")
    if not run.infra_error:
        return PatchVerdict(run.passed)
    if run.status != "sandbox_error":
        baseline = run_tests(with_tests, tests, runner=runner, timeout_s=timeout_s, retries=0)
        if not baseline.infra_error:
            return PatchVerdict({t: False for t in tests}, f"the patched repository's tests ended with "
                                                         f"{run.status} (the repository without it does not)")
    raise BrokenEnvironment(f"environment {task.name!r}: the sandbox failed ({run.status}) in all "
                            f"{run.attempts} attempts; exclude or retry this sample, do not score it 0")


def naive_fail_to_pass(task: EnvTask, *, runner: Runner | None = None, timeout_s: float | None = None,
                       profile: ProfileLike = None) -> list[str]:
    """What a builder *without* the checks derives: one run each side, only the tests that happened
    to be collected, no stability or collection check (``timeout_s`` None: ``profile``'s
    ``agentic.env_timeout_s``). Introduced in lesson 08.
    Public: documented in docs/agentic.md, for students to call."""
    with_tests = apply_patch(task.files, task.test_patch)
    with_gold = apply_patch(with_tests, task.gold_patch)
    timeout_s = _agentic_setting("env_timeout_s", timeout_s, profile)
    probe = run_tests(with_tests, [], runner=runner, timeout_s=timeout_s)
    tests = probe.collected
    before = run_tests(with_tests, tests, runner=runner, timeout_s=timeout_s).passed
    after = run_tests(with_gold, tests, runner=runner, timeout_s=timeout_s).passed
    return [t for t in tests if after[t] and not before[t]]


def naive_reward(results: Mapping[str, bool]) -> float:
    """'All the tests we know about pass' — 1.0 for an empty set, which is the bug. Introduced in lesson 08."""
    return float(all(results.values()))
