"""Lesson 06's exercises: the reward of a sandbox result (06-1) and the stable pass@k (06-2).

06-1 checks a *raising* rule too (a ``sandbox_error`` must raise, not score), so the function is checked
through :func:`as_outcome`, which turns "raised X" into the value ``"raises X"``:
``exercises.check("06-1", as_outcome(my_reward))``. 06-2 compares with the reference to the last bit:
the exercise asks for the product formula (``np.prod`` over ``1 - k / i``), and exact integer binomials
round differently (n=2000, c=13, k=100).

Introduced in lesson 06.
"""
from __future__ import annotations

from typing import Any, Callable

from course_lib.evaluation.metrics import pass_at_k
from course_lib.evaluation.rewards import reward_from_result
from course_lib.evaluation.sandbox import SandboxResult
from course_lib.exercises import Exercise


def as_outcome(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``fn`` with an exception turned into the value ``"raises <ExceptionName>"`` (so a check can
    require that a case raises). Introduced in lesson 06."""
    def outcome(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except NotImplementedError:
            raise
        except Exception as exc:  # noqa: BLE001 - the exception *is* the outcome
            return f"raises {type(exc).__name__}"

    outcome.__name__ = getattr(fn, "__name__", "my_reward")
    outcome.wrapped = fn  # type: ignore[attr-defined]
    return outcome


REWARD_CASES = [
    (SandboxResult("passed", tests=["ok", "ok", "ok", "ok"]),),
    (SandboxResult("failed", tests=["ok", "assert", "ok", "assert"]),),
    (SandboxResult("failed", tests=["ok", "assert", "error", "ok"]),),
    (SandboxResult("syntax_error"),),
    (SandboxResult("runtime_error", tests=[]),),
    (SandboxResult("runtime_error", tests=["error", "error"]),),
    (SandboxResult("timeout"),),
    (SandboxResult("memory_limit"),),
    (SandboxResult("output_limit"),),
    (SandboxResult("passed"),),
    (SandboxResult("failed"),),
    (SandboxResult("failed", tests=["assert", "assert", "assert"]),),
    (SandboxResult("sandbox_error", detail="bwrap: could not start"),),
]

PASS_AT_K_CASES = [(10, 0, 1), (10, 3, 1), (10, 3, 5), (10, 8, 5), (5, 5, 5), (5, 4, 3), (200, 13, 10),
                   (2000, 13, 100), (2000, 1, 1000), (2000, 13, 1000), (1, 1, 1), (1, 0, 1)]


def _same_float(got: Any, expected: Any) -> bool:
    return isinstance(got, float) and got == expected


EXERCISES = [
    Exercise(id="06-1", name="my_reward", reference=as_outcome(reward_from_result), cases=REWARD_CASES,
             description="reward of a SandboxResult: -1 syntax error, -0.5 crash (runtime error, timeout, "
                         "memory, output), else the pass rate; sandbox_error raises"),
    Exercise(id="06-2", name="my_pass_at_k", reference=pass_at_k, cases=PASS_AT_K_CASES, compare=_same_float,
             description="unbiased pass@k with the stable product formula, no binomials"),
]
