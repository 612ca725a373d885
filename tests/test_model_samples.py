"""course_lib.evaluation.model_samples and course_lib.drill.reference: a real model under the judge.

What this covers: the tasks (HumanEval with signature and docstring given, drill rows with the ``def`` line
given) and how an answer becomes a program; best-of-n with the sandbox as verifier on hand-made judged rows;
and, on the REAL converted SmolLM2-135M-Instruct (skips, saying why, where it cannot be prepared), a few
short answers sampled with transformers, cached under the model's fingerprint (the second call reads the
same answers back without generating), judged in the sandbox with a status per sample.
"""
from __future__ import annotations

import pytest

from course_lib.drill.reference import reference_rows
from course_lib.evaluation import humaneval, model_samples
from course_lib.training.sft_demo import load_task_rows


def test_humaneval_task_gives_signature_and_docstring():
    p = humaneval.load_humaneval()[2]
    (t,) = model_samples.humaneval_tasks([p])
    assert t.prefix == "```python\n" + p["prompt"]
    assert t.prompt == model_samples.HUMANEVAL_REQUEST and t.visible_tests      # the docstring examples
    # the canonical body after the given prefix makes a program that passes
    prog = model_samples.program_of(t, t.prefix + p["canonical_solution"] + "```")
    assert prog is not None and f"def {p['entry_point']}" in prog
    assert model_samples.program_of(t, "I cannot help with that.") is None


def test_drill_task_free_or_with_the_def_line():
    row = load_task_rows("eval", 1)[0]
    (t,) = model_samples.drill_tasks([row])
    assert t.prefix == ""                                    # a free answer
    (t,) = model_samples.drill_tasks([row], signature_given=True)
    assert t.prefix == "```python\n" + row["signature"] + "\n"
    assert len(t.visible_tests) == 1 and t.visible_tests[0] in t.hidden_tests


def test_best_of_n_uses_visible_tests_as_verifier():
    rows = [  # task a: sample 0 wrong, sample 1 passes visible and hidden; task b: nothing passes
        {"task_id": "a", "sample": 0, "passed": False, "visible_ok": False},
        {"task_id": "a", "sample": 1, "passed": True, "visible_ok": True},
        {"task_id": "b", "sample": 0, "passed": False, "visible_ok": True},
        {"task_id": "b", "sample": 1, "passed": False, "visible_ok": False},
    ]
    assert model_samples.best_of_n(rows, 1) == {"n": 1, "single": 0.0, "verified": 0.0, "oracle": 0.0}
    assert model_samples.best_of_n(rows, 2) == {"n": 2, "single": 0.0, "verified": 0.5, "oracle": 0.5}
    with pytest.raises(ValueError, match="needs 3 samples"):
        model_samples.best_of_n(rows, 3)


def test_greedy_needs_one_sample():
    with pytest.raises(ValueError, match="greedy"):
        model_samples.sample_answers("unused", ["x"], n=2, temperature=0.0)


def test_reference_rows_balance_the_eval_parts():
    rows = [{"tests": "assert 1", "signature": "def f(x):", "eval_part": part, "i": i}
            for i, part in enumerate(["new instances"] * 5 + ["held-out combinations"] * 5)] + [{"tests": None}]
    got = reference_rows(rows, 4)
    assert [r["eval_part"] for r in got] == ["new instances"] * 2 + ["held-out combinations"] * 2


@pytest.mark.slow
def test_real_model_samples_are_cached_and_judged():
    from course_lib.training import pretrained

    try:
        model = pretrained.get_pretrained_model("ci")
    except RuntimeError as exc:
        pytest.skip(f"the pretrained model cannot be prepared here: {exc}")
    tasks = model_samples.humaneval_tasks(humaneval.load_humaneval()[2:3]) + model_samples.drill_tasks(load_task_rows("eval", 1))
    kw = dict(answer_prefixes=[t.prefix for t in tasks], n=2, temperature=0.8, top_p=0.95, max_new_tokens=24,
              engine="transformers", seed=123, name="test-model-samples", progress=False, log=None)
    run = model_samples.sample_answers(model, [t.prompt for t in tasks], **kw)
    assert [len(a) for a in run.answers] == [2, 2]
    for t, samples in zip(tasks, run.answers):
        for a in samples:
            assert a["response"].startswith(t.prefix) and 0 < a["new_tokens"] <= 24   # "" for the free drill answer
    again = model_samples.sample_answers(model, [t.prompt for t in tasks], **kw)
    assert again.cached and again.answers == run.answers
    rows = model_samples.judge(tasks, run, workers=2)
    assert len(rows) == 4
    assert {r["status"] for r in rows} <= {"passed", "failed", "syntax_error", "runtime_error", "timeout", "no_code",
                                          "memory_limit", "output_limit"}
    run.path.unlink()      # the test's own cache entry
