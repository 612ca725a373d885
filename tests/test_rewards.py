"""The lesson's calculate_reward through the sandbox: -1 syntax error, -0.5 runtime error, else pass rate."""
from __future__ import annotations

import pytest

from tests._sandbox_support import ensure_backend
from course_lib.rewards import calculate_reward, calculate_rewards, reward_from_result
from course_lib.sandbox import SandboxResult

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
    assert calculate_reward("import os\nos._exit(0)\n", TESTS, backend=bwrap) == 0.0
    with pytest.raises(ValueError):
        calculate_reward("x = 1", [], backend=bwrap)


def test_calculate_rewards_batch(bwrap):
    codes = ["def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n", "def add(a, b):\n  return a +\n"]
    assert calculate_rewards(codes, TESTS, backend=bwrap, progress=False) == [1.0, 0.25, -1.0]
    per_sample = [TESTS[:1], TESTS[:2], TESTS[:1]]
    assert calculate_rewards(codes, per_sample, backend=bwrap, progress=False) == [1.0, 0.5, -1.0]
    with pytest.raises(ValueError):
        calculate_rewards(codes, per_sample[:2], backend=bwrap, progress=False)
