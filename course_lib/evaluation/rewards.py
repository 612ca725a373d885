"""Rewards from execution feedback (lesson 06): the lesson's ``calculate_reward``, run in the sandbox.

The lesson's rule: a syntax error scores -1, a runtime error -0.5, anything else the fraction of test
cases that pass. Here the program and its tests run in :mod:`course_lib.sandbox`, never with ``exec()``
in the trainer's process, and a pass counts only when the harness's end-of-run marker was printed.

Introduced in lesson 06.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from course_lib.sandbox import SandboxResult, run_code, run_many

SYNTAX_ERROR_REWARD = -1.0
RUNTIME_ERROR_REWARD = -0.5
# A sample that ran out of time, memory or output is treated like a runtime error: it crashed.
CRASH_STATUSES = ("runtime_error", "timeout", "memory_limit", "output_limit")


def reward_from_result(result: SandboxResult) -> float:
    """The reward of one sandbox result: -1 syntax error, -0.5 runtime error (also timeout, memory,
    output limit), else the pass rate of its tests (an early exit passed none). A ``sandbox_error`` is
    not the sample's fault and raises. Introduced in lesson 06."""
    if result.status == "sandbox_error":
        raise RuntimeError(f"the sandbox itself failed, so there is no reward for this sample: {result.detail}")
    if result.status == "syntax_error":
        return SYNTAX_ERROR_REWARD
    if result.status in CRASH_STATUSES:
        return RUNTIME_ERROR_REWARD
    if result.tests_total == 0:
        return 1.0 if result.passed else 0.0
    return result.tests_passed / result.tests_total


def calculate_reward(code: str, test_cases: Sequence[str], *, timeout_s: float = 10.0,
                     memory_mb: int = 128, backend: str | None = None) -> float:
    """The lesson's ``calculate_reward(code, test_cases)``, executed in the sandbox: each test case is
    a Python snippet (e.g. ``"assert add(1, 2) == 3"``) run after the code. Introduced in lesson 06."""
    tests = [test_cases] if isinstance(test_cases, str) else list(test_cases)
    if not tests:
        raise ValueError("calculate_reward needs at least one test case")
    return reward_from_result(run_code(code, tests, timeout_s=timeout_s, memory_mb=memory_mb, backend=backend))


def calculate_rewards(codes: Iterable[str], test_cases: Sequence[str] | Sequence[Sequence[str]], *,
                      workers: int = 8, progress: bool = True, **kw) -> list[float]:
    """Rewards of many samples in one sandbox batch (input order). ``test_cases`` is one list shared by
    every sample, or one list per sample. Introduced in lesson 06."""
    codes = list(codes)
    per_sample = bool(test_cases) and not isinstance(test_cases[0], str)
    if per_sample and len(test_cases) != len(codes):
        raise ValueError(f"{len(codes)} samples but {len(test_cases)} lists of test cases")
    items = [{"code": c, "tests": list(test_cases[i] if per_sample else test_cases)} for i, c in enumerate(codes)]
    return [reward_from_result(r) for r in run_many(items, workers=workers, progress=progress, **kw)]
