"""Rewards from execution feedback (lesson 06): the lecture's ``calculate_reward``, run in the sandbox.

The lecture's rule: a syntax error scores -1, a runtime error -0.5, anything else the fraction of test
cases that pass. :func:`calculate_reward` takes the test cases in either of two forms:

* the lecture's form: ``(input, expected)`` pairs for a function named ``solution`` — the reward is -0.5
  when ``solution`` is missing or any call raises, else the share of pairs with
  ``solution(input) == expected`` (:func:`io_tests` turns the pairs into sandbox tests);
* the course's form: assert statements as strings (``"assert add(1, 2) == 3"``), one outcome each.

**The one reward module.** Every reward in the course — lesson 06's, the drill's, lesson 10's RL
rewards and the exercises' references — is :func:`shaped_reward` (or :func:`reward_of_result` on a
:class:`~course_lib.evaluation.sandbox.SandboxResult`), over the **planned** tests: a test is an
assertion counted before the run (setup lines are not tests), and a run that ended early failed every
test it never answered. The lecture's shaping, status by status:

=====================================================  ========  ==========  ===========================
status (what the sandbox returns)                       ``pass``  ``fraction``  ``lecture``
=====================================================  ========  ==========  ===========================
``syntax_error``, ``no_code`` (no code in the answer)   0         0           -1
``runtime_error``; an exit at load (the program ended   0         0           -0.5
before its code finished loading); ``timeout``,
``memory_limit``, ``output_limit``
``failed`` (a test failed; the run ended early)         0         share       share of the planned tests
``passed``                                              1         share       share (1 with no test)
``sandbox_error``                                       unscored: raises (not the sample's fault)
=====================================================  ========  ==========  ===========================

Either way the program runs in :mod:`course_lib.evaluation.sandbox`, never with ``exec()`` in the trainer's
process, and the tests run in the judge (the calling process): ``solution(input) == expected`` is
evaluated here on the plain value the program returned, so the expected values never enter the
program's process and an object with its own ``__eq__`` cannot make a comparison true.

Introduced in lesson 06.
"""
from __future__ import annotations

import ast
from typing import Any, Iterable, Sequence

from course_lib.evaluation.sandbox import STATUSES, SandboxResult, run_code, run_many

SYNTAX_ERROR_REWARD = -1.0
RUNTIME_ERROR_REWARD = -0.5
NO_CODE = "no_code"   # a status of no run at all: the answer held no code (RL rollouts)
SYNTAX_STATUSES = ("syntax_error", NO_CODE)                                     # -1: nothing ran
# A sample that ran out of time, memory or output is treated like a runtime error: it crashed.
CRASH_STATUSES = ("runtime_error", "timeout", "memory_limit", "output_limit")   # -0.5
REWARD_STATUSES = tuple(s for s in STATUSES if s != "sandbox_error") + (NO_CODE,)
REWARDS = ("pass", "fraction", "lecture")
REWARD_DOC = {
    "pass": "1 when the run passed and every planned test passed, else 0",
    "fraction": "the share of the planned tests that passed (0 for a syntax error, a crash or a limit)",
    "lecture": "the lecture's calculate_reward: -1 syntax error, -0.5 runtime error (an exit at load, a "
               "timeout, a memory or output limit too), else the share of the planned tests passed",
}
SOLUTION_CHECK = "assert callable(globals().get('solution')), 'no function named solution'"


def shaped_reward(kind: str, status: str, passed: int, total: int) -> float:
    """The reward ``kind`` (``pass``, ``fraction``, ``lecture``; :data:`REWARD_DOC`) of a run whose sandbox
    ``status`` is one of :data:`REWARD_STATUSES` and whose program passed ``passed`` of the ``total``
    planned tests (see the module's table). A task with no planned test scores on the status alone
    (``passed`` → 1). ``sandbox_error`` raises RuntimeError (unscored); an unknown kind or status, or
    counts that are not ``0 <= passed <= total``, raise ValueError. Introduced in lesson 06."""
    if kind not in REWARDS:
        raise ValueError(f"unknown RL reward {kind!r}; use one of {REWARDS} ({REWARD_DOC})")
    if status == "sandbox_error":
        raise RuntimeError("the sandbox itself failed, so there is no reward for this sample (leave it unscored)")
    if status not in REWARD_STATUSES:
        raise ValueError(f"unknown status {status!r}; the sandbox returns {STATUSES} (and {NO_CODE!r}: no code)")
    if not (isinstance(passed, int) and isinstance(total, int) and 0 <= passed <= total):
        raise ValueError(f"passed={passed!r} of total={total!r} planned tests: need 0 <= passed <= total")
    if kind == "pass":
        return 1.0 if status == "passed" and passed == total else 0.0
    if status in SYNTAX_STATUSES:
        return SYNTAX_ERROR_REWARD if kind == "lecture" else 0.0
    if status in CRASH_STATUSES:
        return RUNTIME_ERROR_REWARD if kind == "lecture" else 0.0
    if total == 0:
        return 1.0 if status == "passed" else 0.0
    return passed / total


def reward_status(result: SandboxResult | None) -> str:
    """The status a reward reads from a run: the sandbox's, except that a program that ended while
    loading (an exit, a death: no test could run) is a ``runtime_error`` — the lecture's ``exec`` that
    raised — and no run at all (``None``: no code) is ``no_code``. Introduced in lesson 06."""
    if result is None:
        return NO_CODE
    if result.status == "failed" and result.exited_at_load:
        return "runtime_error"
    return result.status


def reward_of_result(kind: str, result: SandboxResult | None) -> float:
    """:func:`shaped_reward` of one sandbox result (``None``: the answer had no code) over its planned
    tests. Introduced in lesson 06."""
    if result is not None and result.status == "sandbox_error":
        raise RuntimeError(f"the sandbox itself failed, so there is no reward for this sample: {result.detail}")
    if result is None:
        return shaped_reward(kind, NO_CODE, 0, 0)
    total = result.tests_total
    return shaped_reward(kind, reward_status(result), min(result.tests_passed, total), total)


def reward_from_result(result: SandboxResult) -> float:
    """The lecture's reward of one sandbox result for assert-style tests (:func:`reward_of_result` with
    ``lecture``): -1 syntax error, -0.5 runtime error (also an exit at load, timeout, memory, output
    limit), else the pass rate over the planned tests (an early exit failed the tests it never
    answered). A ``sandbox_error`` is not the sample's fault and raises. Introduced in lesson 06."""
    return reward_of_result("lecture", result)


def io_reward_from_result(result: SandboxResult, n_cases: int) -> float:
    """The lecture's reward of a run of :func:`io_tests`: -1 syntax error; -0.5 runtime error, no
    ``solution``, or any call that raised; else the share of pairs that matched. Introduced in lesson 06."""
    if result.status == "sandbox_error":
        raise RuntimeError(f"the sandbox itself failed, so there is no reward for this sample: {result.detail}")
    status = reward_status(result)
    if status == "syntax_error":
        return shaped_reward("lecture", status, 0, n_cases)
    if status in CRASH_STATUSES or len(result.tests) != n_cases + 1:   # a run that ended early crashed
        return shaped_reward("lecture", "runtime_error", 0, n_cases)
    if result.tests[0] != "ok" or "error" in result.tests[1:]:        # no solution, or a call raised
        return shaped_reward("lecture", "runtime_error", 0, n_cases)
    return shaped_reward("lecture", "failed", result.tests[1:].count("ok"), n_cases)


def io_tests(test_cases: Sequence[tuple[Any, Any]]) -> list[str]:
    """Judge-side tests for the lecture's ``(input, expected)`` pairs: first a check that ``solution``
    exists, then ``assert solution(input) == expected`` per pair (the judge calls the program with the
    input and compares the plain value it returns; ``expected`` stays in the judge). Inputs and expected
    values must be Python literals (their ``repr`` reads back equal). Introduced in lesson 06."""
    tests = [SOLUTION_CHECK]
    for i, case in enumerate(test_cases):
        if not (isinstance(case, tuple) and len(case) == 2):
            raise ValueError(f"test case {i} is {case!r}; the lecture's test cases are (input, expected) pairs")
        for what, value in zip(("input", "expected"), case):
            try:
                ok = ast.literal_eval(repr(value)) == value
            except (ValueError, SyntaxError):
                ok = False
            if not ok:
                raise ValueError(f"test case {i}: the {what} {value!r} is not a Python literal; "
                                 "use numbers, strings, tuples, lists, dicts, sets, booleans or None")
        tests.append(f"assert solution({case[0]!r}) == {case[1]!r}")
    return tests


def _split(test_cases: Sequence[Any] | str) -> tuple[list[str], int | None]:
    """(sandbox tests, number of (input, expected) pairs or None for assert-style tests)."""
    cases = [test_cases] if isinstance(test_cases, str) else list(test_cases)
    if not cases:
        raise ValueError("calculate_reward needs at least one test case")
    if all(isinstance(c, str) for c in cases):
        return cases, None
    if any(isinstance(c, str) for c in cases):
        raise ValueError("mix of assert strings and (input, expected) pairs: use one form per call")
    return io_tests(cases), len(cases)


def calculate_reward(code: str, test_cases: Sequence[Any] | str, *, timeout_s: float | None = None,
                     memory_mb: int | None = None, backend: str | None = None) -> float:
    """The lecture's ``calculate_reward(code, test_cases)``, executed in the sandbox.

    ``test_cases`` are the lecture's ``(input, expected)`` pairs for a function ``solution`` (reward:
    -1 syntax error; -0.5 runtime error, missing ``solution`` or a call that raised; else the pass rate)
    or the course's assert strings run after the code (reward: -1, -0.5, else the share of asserts that
    held). ``timeout_s``/``memory_mb`` None: the sandbox's defaults (10 s, 128 MiB). Introduced in lesson 06."""
    tests, n_pairs = _split(test_cases)
    result = run_code(code, tests, timeout_s=timeout_s, memory_mb=memory_mb, backend=backend)
    return reward_from_result(result) if n_pairs is None else io_reward_from_result(result, n_pairs)


def calculate_rewards(codes: Iterable[str], test_cases: Sequence[Any], *, workers: int = 8,
                      progress: bool = True, **kw) -> list[float]:
    """Rewards of many samples in one sandbox batch (input order). ``test_cases`` is one list shared by
    every sample, or one list per sample (each in either form of :func:`calculate_reward`). A sample the
    sandbox could not run gets ``nan`` (and the others keep theirs). Introduced in lesson 06.
    Public: documented in docs/sandbox.md, for students to call."""
    codes = list(codes)
    per_sample = bool(test_cases) and isinstance(test_cases[0], (list,)) and not isinstance(test_cases[0], tuple)
    if per_sample and len(test_cases) != len(codes):
        raise ValueError(f"{len(codes)} samples but {len(test_cases)} lists of test cases")
    splits = [_split(test_cases[i] if per_sample else test_cases) for i in range(len(codes))]
    items = [{"code": c, "tests": splits[i][0]} for i, c in enumerate(codes)]
    rewards = []
    for (_tests, n_pairs), r in zip(splits, run_many(items, workers=workers, progress=progress, **kw)):
        if r.status == "sandbox_error":
            rewards.append(float("nan"))
        else:
            rewards.append(reward_from_result(r) if n_pairs is None else io_reward_from_result(r, n_pairs))
    return rewards
