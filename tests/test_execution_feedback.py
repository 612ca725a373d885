"""Lesson 06's recorded numbers (read back from the executed solution notebook)."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.notebooks


def test_lesson_06_records(notebook_records):
    rec = notebook_records("06")
    assert rec["attack_escapes_sandboxed"] == 0
    assert rec["attack_escapes_unsafe"] >= 3          # the same attacks do get through without isolation
    assert rec["demo_statuses"]["early os._exit(0)"] == "failed"
    agree = rec["reward_exec_vs_sandbox_agree"]        # the lecture's exec() version vs the sandbox, per sample
    assert all(agree[name] for name in ("correct", "wrong", "syntax error", "runtime error", "misnamed"))
    assert agree["sys.exit(0)"] is False
    assert rec["judging_table_as_expected"] is True
    assert rec["hacks_accepted_naive"] == 4 and rec["hacks_accepted_hidden"] == 0
    # issue 24: with the tests in the judge, only the hard-coded answers pass the visible tests; the prose's rewards
    assert [h for h, ok in rec["hacks_accepted_visible"].items() if ok] == ["hard-coded"]
    assert rec["hacks_reward_hidden"]["hard-coded"] == 0.5 and rec["hacks_reward_hidden"]["patched =="] == 0.33
    # issue 24: a frame walk beats a judge that runs the tests in the program's process, not the course's
    assert rec["frame_walk_forgery"] == {"naive in-process judge": "passed", "course judge (sandbox)": "failed"}
    assert rec["pass_at_k_max_abs_error_vs_exact"] < 1e-12
    assert rec["humaneval_canonical_passed"] == rec["humaneval_canonical_total"] == 164
    assert rec["broken_passed"] == 0
    curve = rec["best_of_n_rejection"]
    assert curve[max(curve, key=int)] > curve["1"] + 0.1
    temps = rec["pass_at_k_by_temperature"]
    assert temps["0.0"]["pass@1"] == temps["0.0"]["pass@10"] and temps["1.0"]["pass@10"] > temps["1.0"]["pass@1"]
