"""The exercise checker: run a student's function against the reference and explain the first difference.

In a student notebook an unfinished exercise (``raise NotImplementedError``) prints "还没做 (not done yet)"
and the notebook goes on with the reference implementation, so "Run All" always works. A wrong answer
prints the first failing case (input, expected, got). Messages are in the course's language (Chinese with
English technical terms); when checks are strict (the solutions
regression sets ``COURSE_CHECKS=strict``) it raises :class:`ExerciseCheckError` instead.

Floats are compared to a few units in the last place (:func:`values_equal`), so a correct answer that
rounds differently (a product taken in another order) passes, and a different formula does not.
The registry of exercises is this package (``course_lib.exercises``); notebooks call
``exercises.check("NN-k", fn)``.

Introduced in lesson 00.
"""
from __future__ import annotations

import copy
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

ULPS = 4
"""Default float tolerance of :func:`values_equal`, in units in the last place."""


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


def _float_eps(x: Any) -> float:
    """Machine epsilon of ``x``'s float type (numpy float32 is coarser than a Python float)."""
    dtype = getattr(x, "dtype", None)
    if dtype is not None and getattr(dtype, "kind", "") in "fc":
        import numpy as np

        return float(np.finfo(dtype).eps)
    return sys.float_info.epsilon


def floats_close(a: float, b: float, *, ulps: int = ULPS, eps: float | None = None) -> bool:
    """``a`` and ``b`` differ by at most ``ulps`` units in the last place of the larger one, counted no
    finer than at 1.0 — so a quantity computed as ``1 - x`` (pass@k, an S-curve) is compared on the
    scale it was computed at. NaN equals NaN; infinities must match exactly. Introduced in lesson 00."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    eps = sys.float_info.epsilon if eps is None else eps
    return abs(a - b) <= ulps * eps * max(abs(a), abs(b), 1.0)


def values_equal(a: Any, b: Any, *, ulps: int = ULPS, rel: float | None = None,
                 abs_: float | None = None) -> bool:
    """Equality that tolerates float rounding (``ulps`` units in the last place, see
    :func:`floats_close`) and understands numpy arrays and torch tensors. ``rel``/``abs_`` replace the
    ulps rule with :func:`math.isclose`-style tolerances (for values that are themselves estimates).
    Introduced in lesson 00."""
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
            if a_arr.dtype.kind not in "biufc" or b_arr.dtype.kind not in "biufc":
                return False
            if rel is not None or abs_ is not None:
                return bool(np.allclose(a_arr, b_arr, rtol=rel or 0.0, atol=abs_ or 0.0, equal_nan=True))
            eps = max(_float_eps(a_arr), _float_eps(b_arr))
            x, y = a_arr.astype(np.float64), b_arr.astype(np.float64)
            both_nan = np.isnan(x) & np.isnan(y)
            scale = np.maximum(np.maximum(np.abs(x), np.abs(y)), 1.0)
            with np.errstate(invalid="ignore"):
                close = (x == y) | (np.abs(x - y) <= ulps * eps * scale)
            return bool(np.all(close | both_nan))
        return bool(np.array_equal(a_arr, b_arr))
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) \
                and not isinstance(a, bool) and not isinstance(b, bool):
            if rel is not None or abs_ is not None:
                if math.isnan(a) and math.isnan(b):
                    return True
                return math.isclose(a, b, rel_tol=rel or 0.0, abs_tol=abs_ or 0.0)
            return floats_close(float(a), float(b), ulps=ulps)
        return False
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(values_equal(x, y, ulps=ulps, rel=rel, abs_=abs_) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(values_equal(a[k], b[k], ulps=ulps, rel=rel, abs_=abs_) for k in a)
    return a == b


def numbers_close(got: Any, expected: Any, tol: float) -> bool:
    """``got`` (a number or a list of numbers, as a student may return numpy values) within ``tol``
    (relative and absolute) of ``expected``; anything that is not a number is simply not close."""
    try:
        got = [float(x) for x in got] if isinstance(expected, list) else float(got)
    except (TypeError, ValueError):
        return False
    return values_equal(got, expected, rel=tol, abs_=tol)


CONTINUES = "notebook 先用参考实现 (reference implementation) 继续往下运行。"
"""The sentence every non-passing check ends with: "Run All" goes on."""


def _case_of(i: int, n: int) -> str:
    """ "第 2 个 case（共 5 个）": which case failed, in the course's language."""
    return f"第 {i} 个 case（共 {n} 个）"


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
            msg = (f"○ {name}: 还没做 (not done yet) — 在 `# YOUR CODE HERE` 处写你的代码。"
                   f"{CONTINUES}")
            if strict:
                raise ExerciseCheckError(f"{name}: 参考答案 (solution) 抛出了 NotImplementedError")
            print(msg)
            return reference
        except Exception as exc:  # the student's code crashed: show where
            _fail(f"✗ {name}: {_case_of(i, len(cases))}抛出了 {type(exc).__name__}: {exc}\n"
                  f"    input:    {case.describe()}\n"
                  f"    expected: {_short(expected)}\n"
                  f"  {CONTINUES}", strict)
            return reference
        if not compare(got, expected):
            _fail(f"✗ {name}: {_case_of(i, len(cases))}与参考实现 (reference) 不同\n"
                  f"    input:    {case.describe()}\n"
                  f"    expected: {_short(expected)}\n"
                  f"    got:      {_short(got)}\n"
                  f"  {CONTINUES}", strict)
            return reference
    print(f"✓ {name}: 全部 {len(cases)} 个 case 都与参考实现 (reference) 一致。")
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
    _fail(f"✗ {name}: expected {_short(expected)}, got {_short(got)}" + (f"\n  提示 (hint): {hint}" if hint else ""),
          strict)
    return False
