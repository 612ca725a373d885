"""The lesson's calculate_reward through the sandbox: -1 syntax error, -0.5 runtime error, else pass rate."""
from __future__ import annotations

import pytest

from course_lib.evaluation.rewards import calculate_reward, calculate_rewards, reward_from_result
from course_lib.evaluation.sandbox import SandboxResult
from tests._sandbox_support import ensure_backend

TESTS = ["assert add(1, 2) == 3", "assert add(0, 0) == 0", "assert add(-1, 1) == 0", "assert add(2, 2) == 4"]


@pytest.fixture(scope="module")
def bwrap():
    ensure_backend("bwrap")
    return "bwrap"


@pytest.mark.parametrize("result, reward", [
    (SandboxResult("syntax_error"), -1.0),
    (SandboxResult("runtime_error"), -0.5),
    (SandboxResult("timeout"), -0.5),
    (SandboxResult("memory_limit"), -0.5),
    (SandboxResult("output_limit"), -0.5),
    (SandboxResult("passed", tests=["ok", "ok"]), 1.0),
    (SandboxResult("failed", tests=["ok", "assert", "error", "ok"]), 0.5),
    (SandboxResult("failed", detail="exited before the end-of-run marker"), 0.0),
    (SandboxResult("passed"), 1.0),
])
def test_reward_from_result(result, reward):
    assert reward_from_result(result) == reward


def test_sandbox_error_is_not_a_reward():
    with pytest.raises(RuntimeError, match="sandbox itself failed"):
        reward_from_result(SandboxResult("sandbox_error", detail="bwrap: oops"))


def test_calculate_reward_in_the_sandbox(bwrap):
    assert calculate_reward("def add(a, b):\n    return a + b\n", TESTS, backend=bwrap) == 1.0
    assert calculate_reward("def add(a, b):\n    return a * b\n", TESTS, backend=bwrap) == 0.5
    assert calculate_reward("def add(a, b)\n    return a + b\n", TESTS, backend=bwrap) == -1.0
    assert calculate_reward("def add(a, b):\n    return a + b\nraise ValueError\n", TESTS, backend=bwrap) == -0.5
    assert calculate_reward("import os\nos._exit(0)\n", TESTS, backend=bwrap) == -0.5   # an exit at load: a crash
    with pytest.raises(ValueError):
        calculate_reward("x = 1", [], backend=bwrap)


def test_calculate_rewards_batch(bwrap):
    codes = ["def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n", "def add(a, b):\n  return a +\n"]
    assert calculate_rewards(codes, TESTS, backend=bwrap, progress=False) == [1.0, 0.25, -1.0]
    per_sample = [TESTS[:1], TESTS[:2], TESTS[:1]]
    assert calculate_rewards(codes, per_sample, backend=bwrap, progress=False) == [1.0, 0.5, -1.0]
    with pytest.raises(ValueError):
        calculate_rewards(codes, per_sample[:2], backend=bwrap, progress=False)


PAIRS = [(0, 0), (1, 1), (10, 55)]
FIB = "def solution(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n"


@pytest.mark.parametrize("code, reward", [
    (FIB, 1.0),
    ("def solution(n):\n    return n\n", 2 / 3),                 # 0 and 1 right, 10 wrong
    ("def solution(n)\n    return n\n", -1.0),                    # syntax error
    ("def fib(n):\n    return n\n", -0.5),                        # no function named solution
    ("def solution(n):\n    return 1 // (n - 1)\n", -0.5),        # a call raises (n = 1)
    ("raise RuntimeError('boom')\ndef solution(n):\n    return n\n", -0.5),
    ("import os\nos._exit(0)\n", -0.5),                           # exits before the tests: solution never seen
])
def test_the_lecture_contract_with_input_expected_pairs(bwrap, code, reward):
    assert calculate_reward(code, PAIRS, backend=bwrap) == pytest.approx(reward)


def test_pairs_must_be_literals_and_one_form_per_call():
    with pytest.raises(ValueError, match="not a Python literal"):
        calculate_reward(FIB, [(object(), 1)], backend="unsafe")
    with pytest.raises(ValueError, match="one form"):
        calculate_reward(FIB, [(1, 1), "assert True"], backend="unsafe")


def test_a_batch_keeps_every_reward_when_one_sample_is_bad_text(bwrap):
    codes = [FIB, "s = '\ud800'", "def solution(n):\n    return 0\n"]
    rewards = calculate_rewards(codes, PAIRS, backend=bwrap, progress=False)
    assert rewards == [1.0, -1.0, pytest.approx(1 / 3)]
