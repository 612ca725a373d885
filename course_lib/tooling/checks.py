"""Exercise checks: run a student's function against the reference and explain the first difference.

In a student notebook an unfinished exercise (``raise NotImplementedError``) prints "not done yet" and
the notebook goes on with the reference implementation, so "Run All" always works. A wrong answer
prints the first failing case (input, expected, got); when checks are strict (the solutions
regression sets ``COURSE_CHECKS=strict``) it raises :class:`ExerciseCheckError` instead.

Introduced in lesson 00.
"""
from __future__ import annotations

import copy
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

RECORD_MIME = "application/vnd.course.record+json"


class ExerciseCheckError(AssertionError):
    """Raised by a strict check when the student's answer differs from the reference."""


@dataclass
class Case:
    """One input of an exercise: positional and keyword arguments."""

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)

    def describe(self, limit: int = 300) -> str:
        parts = [_short(a, limit) for a in self.args]
        parts += [f"{k}={_short(v, limit)}" for k, v in self.kwargs.items()]
        return "(" + ", ".join(parts) + ")"


def strict_checks() -> bool:
    """True when checks must fail loudly (``COURSE_CHECKS=strict``, set by the solutions regression)."""
    return os.environ.get("COURSE_CHECKS", "").lower() == "strict"


def _as_case(c: Any) -> Case:
    if isinstance(c, Case):
        return c
    if isinstance(c, dict):
        return Case((), dict(c))
    if isinstance(c, tuple):
        return Case(c, {})
    return Case((c,), {})


def _short(x: Any, limit: int = 300) -> str:
    try:
        text = repr(x)
    except Exception:  # pragma: no cover - repr of exotic objects
        text = f"<{type(x).__name__}>"
    return text if len(text) <= limit else text[: limit - 20] + f"... ({len(text)} chars)"


def values_equal(a: Any, b: Any, *, rel: float = 1e-6, abs_: float = 1e-9) -> bool:
    """Equality that tolerates float rounding and understands numpy arrays and torch tensors."""
    if hasattr(a, "detach") and hasattr(a, "cpu"):
        a = a.detach().cpu().numpy()
    if hasattr(b, "detach") and hasattr(b, "cpu"):
        b = b.detach().cpu().numpy()
    if type(a).__module__ == "numpy" or type(b).__module__ == "numpy":
        import numpy as np

        a_arr, b_arr = np.asarray(a), np.asarray(b)
        if a_arr.shape != b_arr.shape:
            return False
        if a_arr.dtype.kind in "fc" or b_arr.dtype.kind in "fc":
            return bool(np.allclose(a_arr, b_arr, rtol=rel, atol=abs_, equal_nan=True))
        return bool(np.array_equal(a_arr, b_arr))
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            if math.isnan(a) and math.isnan(b):
                return True
            return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)
        return False
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(values_equal(x, y, rel=rel, abs_=abs_) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(values_equal(a[k], b[k], rel=rel, abs_=abs_) for k in a)
    return a == b


def _fail(message: str, strict: bool) -> None:
    if strict:
        raise ExerciseCheckError(message)
    print(message)


def check_function(
    student: Callable,
    reference: Callable,
    cases: Iterable[Any],
    *,
    name: str | None = None,
    compare: Callable[[Any, Any], bool] | None = None,
    strict: bool | None = None,
) -> Callable:
    """Compare ``student`` with ``reference`` on ``cases`` and return the function to use next.

    ``cases`` holds tuples (positional args), dicts (keyword args), :class:`Case` objects or single
    values. Returns ``student`` when every case agrees, else ``reference`` (so later cells keep
    working). Unfinished exercises print "not done yet"; the first wrong case prints input, expected
    and got, and raises :class:`ExerciseCheckError` when ``strict`` (default: ``COURSE_CHECKS=strict``).

    Introduced in lesson 00.
    """
    name = name or getattr(student, "__name__", "exercise")
    compare = compare or values_equal
    strict = strict_checks() if strict is None else strict
    cases = [_as_case(c) for c in cases]
    if not cases:
        raise ValueError(f"check_function({name!r}) needs at least one case")
    for i, case in enumerate(cases, 1):
        expected = reference(*copy.deepcopy(case.args), **copy.deepcopy(case.kwargs))
        try:
            got = student(*copy.deepcopy(case.args), **copy.deepcopy(case.kwargs))
        except NotImplementedError:
            msg = (f"○ {name}: not done yet — write your code where it says `# YOUR CODE HERE`. "
                   f"The notebook continues with the reference implementation.")
            if strict:
                raise ExerciseCheckError(f"{name}: the solution raised NotImplementedError")
            print(msg)
            return reference
        except Exception as exc:  # the student's code crashed: show where
            _fail(f"✗ {name}: case {i} of {len(cases)} raised {type(exc).__name__}: {exc}\n"
                  f"    input:    {case.describe()}\n"
                  f"    expected: {_short(expected)}\n"
                  f"  The notebook continues with the reference implementation.", strict)
            return reference
        if not compare(got, expected):
            _fail(f"✗ {name}: case {i} of {len(cases)} differs from the reference\n"
                  f"    input:    {case.describe()}\n"
                  f"    expected: {_short(expected)}\n"
                  f"    got:      {_short(got)}\n"
                  f"  The notebook continues with the reference implementation.", strict)
            return reference
    print(f"✓ {name}: all {len(cases)} cases agree with the reference.")
    return student


def check_value(name: str, got: Any, expected: Any, *, hint: str = "",
                compare: Callable[[Any, Any], bool] | None = None,
                strict: bool | None = None) -> bool:
    """Check one computed value against the expected one; print what differs. Returns True on match.

    Introduced in lesson 00.
    """
    compare = compare or values_equal
    strict = strict_checks() if strict is None else strict
    if compare(got, expected):
        print(f"✓ {name}: {_short(got, 120)}")
        return True
    _fail(f"✗ {name}: expected {_short(expected)}, got {_short(got)}" + (f"\n  hint: {hint}" if hint else ""),
          strict)
    return False


def record(name: str, value: Any) -> Any:
    """Record a value in the notebook's output so tests can read it back from the executed notebook
    (``course_lib.tooling.nbtools.read_records``). Returns ``value``. Introduced in lesson 00."""
    try:
        payload = json.loads(json.dumps(value, default=float))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"record({name!r}, ...) needs a JSON-serialisable value: {exc}") from None
    try:
        from IPython import get_ipython
        from IPython.display import display

        if get_ipython() is not None:
            display({RECORD_MIME: {name: payload}, "text/plain": f"{name} = {_short(value, 200)}"},
                    raw=True)
    except ImportError:  # pragma: no cover - IPython is a dependency
        pass
    return value
