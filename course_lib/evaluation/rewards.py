"""Rewards from execution feedback (lesson 06): the lecture's ``calculate_reward``, run in the sandbox.

The lecture's rule: a syntax error scores -1, a runtime error -0.5, anything else the fraction of test
cases that pass. :func:`calculate_reward` takes the test cases in either of two forms:

* the lecture's form: ``(input, expected)`` pairs for a function named ``solution`` — the reward is -0.5
  when ``solution`` is missing or any call raises, else the share of pairs with
  ``solution(input) == expected`` (:func:`io_tests` turns the pairs into sandbox tests);
* the course's form: assert statements as strings (``"assert add(1, 2) == 3"``), one outcome each.

Either way the program runs in :mod:`course_lib.evaluation.sandbox`, never with ``exec()`` in the trainer's
process, and the tests run in the judge (the calling process): ``solution(input) == expected`` is
evaluated here on the plain value the program returned, so the expected values never enter the
program's process and an object with its own ``__eq__`` cannot make a comparison true.

Introduced in lesson 06.
"""
from __future__ import annotations

import ast
from typing import Any, Iterable, Sequence

from course_lib.evaluation.sandbox import SandboxResult, run_code, run_many

SYNTAX_ERROR_REWARD = -1.0
RUNTIME_ERROR_REWARD = -0.5
# A sample that ran out of time, memory or output is treated like a runtime error: it crashed.
CRASH_STATUSES = ("runtime_error", "timeout", "memory_limit", "output_limit")
SOLUTION_CHECK = "assert callable(globals().get('solution')), 'no function named solution'"


def reward_from_result(result: SandboxResult) -> float:
    """The reward of one sandbox result for assert-style tests: -1 syntax error, -0.5 runtime error
    (also timeout, memory, output limit), else the pass rate of its tests (an early exit passed none).
    A ``sandbox_error`` is not the sample's fault and raises. Introduced in lesson 06."""
    if result.status == "sandbox_error":
        raise RuntimeError(f"the sandbox itself failed, so there is no reward for this sample: {result.detail}")
    if result.status == "syntax_error":
        return SYNTAX_ERROR_REWARD
    if result.status in CRASH_STATUSES:
        return RUNTIME_ERROR_REWARD
    if result.tests_total == 0:
        return 1.0 if result.passed else 0.0
    return result.tests_passed / result.tests_total


def io_reward_from_result(result: SandboxResult, n_cases: int) -> float:
    """The lecture's reward of a run of :func:`io_tests`: -1 syntax error; -0.5 runtime error, no
    ``solution``, or any call that raised; else the share of pairs that matched. Introduced in lesson 06."""
    if result.status == "sandbox_error":
        raise RuntimeError(f"the sandbox itself failed, so there is no reward for this sample: {result.detail}")
    if result.status == "syntax_error":
        return SYNTAX_ERROR_REWARD
    if result.status in CRASH_STATUSES or result.tests_total != n_cases + 1:
        return RUNTIME_ERROR_REWARD
    if result.tests[0] != "ok" or "error" in result.tests[1:]:
        return RUNTIME_ERROR_REWARD
    return result.tests[1:].count("ok") / n_cases


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
    sandbox could not run gets ``nan`` (and the others keep theirs). Introduced in lesson 06."""
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
