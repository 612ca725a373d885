"""Plausible wrong answers to lesson 06's exercises (see course_lib/exercises/lesson06.py)."""
from __future__ import annotations

import math

import numpy as np


def reward_sandbox_error_scores_zero(result):
    if result.status == "sandbox_error":
        return 0.0
    if result.status == "syntax_error":
        return -1.0
    if result.status in ("runtime_error", "timeout", "memory_limit", "output_limit"):
        return -0.5
    return result.tests_passed / result.tests_total if result.tests_total else (1.0 if result.passed else 0.0)


def reward_only_runtime_error_crashes(result):
    if result.status == "sandbox_error":
        raise RuntimeError("sandbox failed")
    if result.status == "syntax_error":
        return -1.0
    if result.status == "runtime_error":
        return -0.5
    return result.tests_passed / result.tests_total if result.tests_total else (1.0 if result.passed else 0.0)


def reward_no_tests_is_zero_division(result):
    if result.status == "sandbox_error":
        raise RuntimeError("sandbox failed")
    if result.status == "syntax_error":
        return -1.0
    if result.status in ("runtime_error", "timeout", "memory_limit", "output_limit"):
        return -0.5
    return result.tests_passed / max(result.tests_total, 1)


def reward_errors_count_as_half(result):
    if result.status == "sandbox_error":
        raise RuntimeError("sandbox failed")
    if result.status == "syntax_error":
        return -1.0
    if result.status in ("runtime_error", "timeout", "memory_limit", "output_limit"):
        return -0.5
    if not result.tests:
        return 1.0 if result.passed else 0.0
    return sum(1.0 if t == "ok" else 0.5 if t == "error" else 0.0 for t in result.tests) / len(result.tests)


def reward_no_tests_is_one(result):              # a failed run without tests scores like a pass
    if result.status == "sandbox_error":
        raise RuntimeError("sandbox failed")
    if result.status == "syntax_error":
        return -1.0
    if result.status in ("runtime_error", "timeout", "memory_limit", "output_limit"):
        return -0.5
    return result.tests_passed / result.tests_total if result.tests_total else 1.0


def reward_limits_score_pass_rate(result):        # memory/output limits are not "crashes" here
    if result.status == "sandbox_error":
        raise RuntimeError("sandbox failed")
    if result.status == "syntax_error":
        return -1.0
    if result.status in ("runtime_error", "timeout"):
        return -0.5
    return result.tests_passed / result.tests_total if result.tests_total else (1.0 if result.passed else 0.0)


def pass_at_k_float_binomials(n, c, k):
    if n - c < k:
        return 1.0
    return 1.0 - float(math.comb(n - c, k)) / float(math.comb(n, k))


def pass_at_k_plug_in(n, c, k):
    return float(1.0 - (1.0 - c / n) ** k)


def pass_at_k_integer_division(n, c, k):        # k // i: every factor is 1 or 0
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1 - k // np.arange(n - c + 1, n + 1)))


def pass_at_k_product_over_correct(n, c, k):     # the product over the c correct samples' indices
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(1, c + 1)))


def pass_at_k_off_by_one_range(n, c, k):
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c, n)))


WRONG_ANSWERS = {
    "06-1": [reward_sandbox_error_scores_zero, reward_only_runtime_error_crashes, reward_no_tests_is_zero_division,
             reward_errors_count_as_half, reward_no_tests_is_one, reward_limits_score_pass_rate],
    "06-2": [pass_at_k_float_binomials, pass_at_k_plug_in, pass_at_k_off_by_one_range, pass_at_k_integer_division,
             pass_at_k_product_over_correct],
}


# --- correct answers a check must accept ------------------------------------------------------------

def reward_raises_value_error(result):           # "抛出异常": any exception will do
    if result.status == "sandbox_error":
        raise ValueError(f"no reward for a sandbox failure: {result.detail}")
    if result.status == "syntax_error":
        return -1.0
    if result.status in ("runtime_error", "timeout", "memory_limit", "output_limit"):
        return -0.5
    return result.tests_passed / result.tests_total if result.tests_total else (1.0 if result.passed else 0.0)


def reward_raises_plain_exception(result):
    if result.status == "sandbox_error":
        raise Exception("sandbox failed")
    return reward_raises_value_error(result)


def pass_at_k_decreasing_i(n, c, k):             # the same product, i from n down: one ulp apart
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n, n - c, -1)))


def pass_at_k_python_loop(n, c, k):              # a plain loop, no numpy
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def pass_at_k_exact_integer_binomials(n, c, k):  # exact, then one rounding: within an ulp of the product
    if n - c < k:
        return 1.0
    return 1 - math.comb(n - c, k) / math.comb(n, k)


RIGHT_ANSWERS = {
    "06-1": [reward_raises_value_error, reward_raises_plain_exception],
    "06-2": [pass_at_k_decreasing_i, pass_at_k_python_loop, pass_at_k_exact_integer_binomials],
}
