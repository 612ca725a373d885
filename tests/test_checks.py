"""Exercise checks: a wrong answer is caught, strict raises, unfinished work returns the reference."""
from __future__ import annotations

import math

import numpy as np
import pytest

from course_lib import check_function, check_value, record
from course_lib.exercises.checks import Case, ExerciseCheckError, floats_close, values_equal


def reference(xs, k=1):
    return [x * k for x in xs]


def correct(xs, k=1):
    return [k * x for x in xs]


def wrong(xs, k=1):
    return [x * k for x in xs][:-1]


def unfinished(xs, k=1):
    # YOUR CODE HERE
    raise NotImplementedError


CASES = [([1, 2, 3],), {"xs": [4], "k": 3}, Case(([1, 2],), {"k": 2})]


def test_correct_answer_returns_the_student_function(capsys):
    fn = check_function(correct, reference, CASES, name="scale", strict=False)
    assert fn is correct
    assert "✓ scale: 全部 3 个 case 都与参考实现 (reference) 一致" in capsys.readouterr().out


def test_wrong_answer_is_caught_and_explained(capsys):
    fn = check_function(wrong, reference, CASES, name="scale", strict=False)
    assert fn is reference  # the notebook goes on with the reference
    out = capsys.readouterr().out
    assert "✗ scale: 第 1 个 case（共 3 个）与参考实现 (reference) 不同" in out
    assert "input:    ([1, 2, 3])" in out
    assert "expected: [1, 2, 3]" in out
    assert "got:      [1, 2]" in out


def test_strict_check_raises_on_a_wrong_answer():
    with pytest.raises(ExerciseCheckError, match="第 1 个 case（共 3 个）与参考实现"):
        check_function(wrong, reference, CASES, name="scale", strict=True)


def test_strict_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("COURSE_CHECKS", "strict")
    with pytest.raises(ExerciseCheckError):
        check_function(wrong, reference, CASES)
    monkeypatch.delenv("COURSE_CHECKS")
    assert check_function(wrong, reference, CASES) is reference


def test_not_done_yet_returns_the_reference(capsys):
    fn = check_function(unfinished, reference, CASES, name="scale", strict=False)
    assert fn is reference
    out = capsys.readouterr().out
    assert "○ scale: 还没做 (not done yet)" in out and "YOUR CODE HERE" in out


def test_not_done_yet_fails_in_the_solutions_regression():
    with pytest.raises(ExerciseCheckError, match="NotImplementedError"):
        check_function(unfinished, reference, CASES, name="scale", strict=True)


def test_a_crashing_answer_is_reported(capsys):
    def crash(xs, k=1):
        return xs[10]

    assert check_function(crash, reference, CASES, strict=False) is reference
    assert "抛出了 IndexError" in capsys.readouterr().out
    with pytest.raises(ExerciseCheckError, match="IndexError"):
        check_function(crash, reference, CASES, strict=True)


def test_student_cannot_change_the_reference_inputs():
    def mutating(xs, k=1):
        xs.append(99)
        return reference(xs[:-1], k)

    assert check_function(mutating, reference, [([1, 2],)], strict=True) is mutating


def test_check_needs_cases():
    with pytest.raises(ValueError, match="at least one case"):
        check_function(correct, reference, [])


def test_values_equal_tolerates_rounding_but_not_differences():
    import torch

    assert values_equal(0.1 + 0.2, 0.3)
    assert not values_equal(0.3, 0.31)
    two_ulps = 2.0 + 2 * math.ulp(2.0)
    assert values_equal(np.array([1.0, 2.0]), np.array([1.0, two_ulps]))
    assert not values_equal(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-12]))   # far more than a few ulps
    assert not values_equal(np.array([1, 2]), np.array([1, 2, 3]))
    assert values_equal(torch.tensor([1.5]), np.array([1.5]))
    assert values_equal(np.float32(1 / 3), np.float32(1) / np.float32(3) + np.float32(1e-7))  # float32's ulps
    assert values_equal({"a": [1, (2.0, 3)]}, {"a": [1, (two_ulps, 3)]})
    assert not values_equal({"a": 1}, {"b": 1})
    assert not values_equal("1", 1)
    assert values_equal(float("nan"), float("nan")) and not values_equal(float("inf"), 1e308)
    assert values_equal(0.3, 0.31, rel=0.1) and not values_equal(0.3, 0.31, rel=1e-3)


def test_floats_close_counts_ulps_no_finer_than_at_one():
    # a product taken in a different order differs in its last bit: still the same answer
    forward = 1.0 - float(np.prod(1.0 - 100 / np.arange(1988, 2001)))
    backward = 1.0 - float(np.prod((1.0 - 100 / np.arange(1988, 2001))[::-1]))
    assert floats_close(forward, backward)
    # a probability computed as 1 - x is compared on the scale of 1, not of its own size
    assert floats_close(1e-17, 0.0) and not floats_close(1e-14, 0.0)
    assert floats_close(1e6, 1e6 + 2 * math.ulp(1e6)) and not floats_close(1e6, 1e6 + 1e-6)



def test_check_value(capsys):
    assert check_value("n", 3, 3, strict=True)
    assert not check_value("n", 2, 3, hint="count blank lines too", strict=False)
    assert "提示 (hint): count blank lines too" in capsys.readouterr().out
    with pytest.raises(ExerciseCheckError):
        check_value("n", 2, 3, strict=True)


def test_record_outside_a_notebook_returns_the_value():
    assert record("acc", 0.5) == 0.5
    assert record("arr", np.float32(0.25)) == np.float32(0.25)
    with pytest.raises(TypeError, match="JSON"):
        record("bad", object())
