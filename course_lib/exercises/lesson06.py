"""Lesson 06's exercises: the reward of a sandbox result (06-1) and the stable pass@k (06-2).

06-1 checks a *raising* rule too (a ``sandbox_error`` must raise, not score), so the function is checked
through :func:`as_outcome`, which turns an exception into a value (:class:`Raised`) equal to any other
exception — the text asks that it raise ("抛出异常"), not which exception; the registry applies it
(``Exercise.adapt``), so the notebook calls ``exercises.check("06-1", my_reward)``. 06-2 compares floats to a few units in the last
place (:func:`course_lib.exercises.checks.values_equal`): the product taken in decreasing ``i``, or exact
integer binomials, round differently in the last bit and are still right; float binomials overflow
(n=2000, k=1000) and the plug-in estimate is a different number.

Introduced in lesson 06.
"""
from __future__ import annotations

from typing import Any, Callable

from course_lib.evaluation.metrics import pass_at_k
from course_lib.evaluation.rewards import reward_from_result
from course_lib.evaluation.sandbox import SandboxResult
from course_lib.exercises import Exercise
from course_lib.exercises.checks import values_equal


class Raised:
    """An exception as a checkable value: equal to any other :class:`Raised`, whatever its type (an
    exercise that says "raise" accepts any exception); shown as ``raises <ExceptionName>``.
    Introduced in lesson 06."""

    def __init__(self, exc_type: str):
        self.exc_type = exc_type

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Raised)

    def __hash__(self) -> int:
        return hash(Raised)

    def __repr__(self) -> str:
        return f"raises {self.exc_type}"


def as_outcome(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``fn`` with an exception turned into the value :class:`Raised` (so a check can require that a
    case raises, any exception). Introduced in lesson 06."""
    def outcome(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except NotImplementedError:
            raise
        except Exception as exc:  # noqa: BLE001 - the exception *is* the outcome
            return Raised(type(exc).__name__)

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


def _float_close(got: Any, expected: Any) -> bool:
    """A Python or numpy float within a few ulps of the reference (see ``values_equal``)."""
    return isinstance(got, float) and values_equal(got, expected)


EXERCISES = [
    Exercise(id="06-1", name="my_reward", reference=as_outcome(reward_from_result), cases=REWARD_CASES,
             adapt=as_outcome,
             description="reward of a SandboxResult: -1 syntax error, -0.5 crash (runtime error, timeout, "
                         "memory, output), else the pass rate; sandbox_error raises (any exception)"),
    Exercise(id="06-2", name="my_pass_at_k", reference=pass_at_k, cases=PASS_AT_K_CASES, compare=_float_close,
             description="unbiased pass@k with the stable product formula, no binomials"),
]
