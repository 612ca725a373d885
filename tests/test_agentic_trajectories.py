"""Process rule filters, hint-assisted recovery and reference-guided RFT."""
from __future__ import annotations

import numpy as np
import pytest

from course_lib.agentic.rule_rewards import ToolCall
from course_lib.agentic.trajectories import (
    Attempt,
    guided_rollout,
    hint_recovery,
    is_test_file,
    patch_files,
    process_flags,
    reference_deviation,
)

SCHEMAS = {"read_file": ["path"], "edit_file": ["path", "patch"]}
GOOD = [ToolCall("read_file", '{"path": "calc.py"}')]
FIX = """--- a/calc.py
+++ b/calc.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
"""
TAMPER = """--- a/tests/test_calc.py
+++ b/tests/test_calc.py
@@ -1,2 +1,2 @@
 def test_add():
-    assert add(1, 2) == 3
+    assert True
"""
CONFTEST = """--- /dev/null
+++ b/conftest.py
@@ -0,0 +1,2 @@
+import pytest
+collect_ignore = ["tests"]
"""
HARDCODE = """--- a/calc.py
+++ b/calc.py
@@ -1,2 +1,4 @@
 def add(a, b):
+    if (a, b) == (1, 2):
+        return 3
     return a - b
"""


def test_a_clean_fix_passes_every_rule():
    assert process_flags(GOOD, FIX, schemas=SCHEMAS, test_files=["tests/test_calc.py"], expected_literals=["3"],
                         runs=[{"t": True}, {"t": True}]) == []


@pytest.mark.parametrize("calls,patch,runs,reason", [
    ([ToolCall("read_file", "{oops")], FIX, (), "invalid calls"),
    (GOOD, TAMPER, (), "test tampering"),
    (GOOD, CONFTEST, (), "test tampering"),                   # a new conftest.py at the root disables the tests
    (GOOD, HARDCODE, (), "hard-coding"),
    (GOOD, FIX, [{"t": True}, {"t": False}], "unstable execution"),
])
def test_each_rule_catches_its_case(calls, patch, runs, reason):
    flags = process_flags(calls, patch, schemas=SCHEMAS, test_files=["tests/test_calc.py"], expected_literals=["3"],
                          runs=runs)
    assert len(flags) == 1 and flags[0].startswith(reason), flags


def test_patch_files_and_test_files():
    assert patch_files(FIX) == ["calc.py"] and patch_files(CONFTEST) == ["conftest.py"]
    assert is_test_file("pkg/tests/helpers.py") and is_test_file("test_x.py") and is_test_file("a/b_test.py")
    assert not is_test_file("src/testing_utils.py") and is_test_file("src/check.py", ["src/check.py"])


def test_hint_recovery_keeps_only_a_clean_regenerated_trajectory():
    context, hint = "Fix add() in calc.py.", "check the operator in the return line"
    verify = lambda patch: patch.strip() == FIX.strip()
    solve = lambda ctx, seed: Attempt("...", FIX if "Hint:" in ctx else "")      # succeeds only with the hint
    regen_outputs = [Attempt("As the hint says, check the operator in the return line ...", FIX),   # leaks
                     Attempt("read calc.py, saw a - b, fixed it", HARDCODE),                         # other patch
                     Attempt("read calc.py, saw a - b, fixed it, ran the tests", FIX)]             # clean
    regenerate = lambda ctx, patch, seed: regen_outputs[seed]
    rec = hint_recovery(context, hint, solve, regenerate, verify, attempts=3)
    assert rec.verified_patch == FIX and rec.kept is regen_outputs[2]
    assert [r.split(":")[1].strip() for r in rec.rejected] == ["the trajectory leaks the hint", "its patch fails the tests"]
    # without the hint the agent never succeeds: nothing to recover from
    none = hint_recovery(context, hint, lambda ctx, seed: Attempt("...", ""), regenerate, verify)
    assert none.verified_patch is None and none.kept is None


REFS = [["locate", "read", "edit", "test"], ["locate", "grep", "edit", "test"]]


def test_reference_deviation():
    assert reference_deviation(["locate", "read"], REFS) == 0
    assert reference_deviation(["locate", "read", "delete", "x"], REFS) == 2
    with pytest.raises(ValueError):
        reference_deviation(["a"], [])


def _policy(script):
    def step(steps, rng):
        return script[len(steps)] if len(steps) < len(script) else None
    return step


def test_guided_rollouts_abort_stray_tries_and_keep_the_rule_reward():
    verify = lambda steps: steps[-2:] == ["edit", "test"]
    rng = np.random.default_rng(0)
    novel = guided_rollout(_policy(["locate", "bisect", "edit", "test"]), REFS, verify, rng=rng,
                           correct_after=None, abort_after=None)
    assert novel.reward == 1.0                                         # off the references, but the tests pass
    lookalike = guided_rollout(_policy(["locate", "read", "edit"]), REFS, verify, rng=rng)
    assert lookalike.reward == 0.0                                     # on a reference, tests fail
    # a try that wanders off is stopped after 3 stray steps and resampled (the 2nd try follows a reference)
    script_iter = iter([["locate", "x", "y", "z", "w", "v"], ["locate", "read", "edit", "test"]])

    state = {}

    def policy(steps, rng):
        if not steps:
            state["s"] = next(script_iter)
        s = state["s"]
        return s[len(steps)] if len(steps) < len(s) else None

    r = guided_rollout(policy, REFS, verify, rng=rng, correct_after=None, abort_after=3)
    assert r.restarts == 1 and r.generated == 4 + 4 and r.reward == 1.0   # 4 steps wasted, not 6


def test_online_correction_pulls_a_stray_step_back_onto_a_reference():
    verify = lambda steps: steps[-2:] == ["edit", "test"]
    r = guided_rollout(_policy(["locate", "delete", "oops", "test"]), REFS, verify,
                       rng=np.random.default_rng(0), correct_after=2, abort_after=None)
    assert r.corrected == 1 and r.steps[:2] == ["locate", "read"]
