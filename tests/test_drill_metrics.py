"""The drill's metrics (Pass@1, FCR, SER, RSR, PPL) and the lesson's tables."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from course_lib.drill import scoreboard

sys.path.insert(0, str(Path(__file__).parent))


def _summary(**counts):
    c = {k: 0 for k in ("Pass", "Fail", "SyntaxError", "NoCode", "Timeout", "Error")} | counts
    total = sum(c.values())
    return {"total": total, "counts": c, "fenced": total - c["NoCode"] - 1,
            "with_code": total - c["NoCode"], "with_tests": 10, "correct": 4, "runs_but_wrong": 3,
            "correct_but_not_run": 0}


def test_metric_definitions_are_the_lectures():
    s = _summary(Pass=6, Fail=1, SyntaxError=2, NoCode=1)          # 10 samples, 9 with code, 7 parse
    m = scoreboard.drill_metrics(s, {"ppl": 3.5}, {"pass@1": 0.25, "passed": 1, "problems": 4})
    assert m["Pass@1"] == pytest.approx(0.6)
    assert m["FCR"] == pytest.approx(0.9)                           # (N - NoCode) / N
    assert m["SER"] == pytest.approx(0.2)                           # SyntaxError / N
    assert m["RSR"] == pytest.approx(6 / 7)                         # Pass / (N - NoCode - SyntaxError)
    assert m["Fail rate"] == pytest.approx(0.1)
    # the course's stricter measures keep their own names
    assert m["closed-fence rate"] == pytest.approx(0.8) and m["SER among code"] == pytest.approx(2 / 9)
    assert m["PPL"] == 3.5 and m["test pass@1"] == pytest.approx(0.4)
    assert m["HumanEval passed"] == "1/4" and m["runs but wrong"] == 3


@pytest.mark.parametrize("column", list(scoreboard.LECTURE_COUNTS))
def test_lecture_counts_give_the_lectures_printed_percentages(column):
    m = scoreboard.drill_metrics(scoreboard.summary_from_counts(scoreboard.LECTURE_COUNTS[column]))
    assert m["samples"] == 1000
    for key in ("Pass@1", "FCR", "SER", "Fail rate"):
        assert round(m[key], 3) == scoreboard.LECTURE_RATES[column][key], key
    c = scoreboard.LECTURE_COUNTS[column]
    assert m["RSR"] == pytest.approx(c["Pass"] / (1000 - c["NoCode"] - c["SyntaxError"]))


def test_lecture_rsr_values():
    rsr = {k: scoreboard.drill_metrics(scoreboard.summary_from_counts(c))["RSR"]
           for k, c in scoreboard.LECTURE_COUNTS.items()}
    assert [round(v * 100, 1) for v in rsr.values()] == [82.1, 92.4, 99.8]


def test_empty_model_output_gives_zero_rates_not_errors():
    s = _summary(NoCode=5)
    s["fenced"] = 0
    m = scoreboard.drill_metrics(s)
    assert (m["Pass@1"], m["FCR"], m["SER"], m["RSR"], m["Fail rate"]) == (0.0, 0.0, 0.0, 0.0, 0.0)
    assert math.isnan(m["PPL"])


def test_tables_have_the_lectures_rows(tmp_path):
    base = scoreboard.drill_metrics(_summary(Pass=1, NoCode=9), {"ppl": 40.0})
    raw = scoreboard.drill_metrics(_summary(Pass=6, Fail=2, NoCode=2), {"ppl": 3.0})
    pipe = scoreboard.drill_metrics(_summary(Pass=8, Fail=1, NoCode=1), {"ppl": 2.5})
    by = {"base": base, "raw_sft": raw, "pipeline_sft": pipe}
    t1, t2 = scoreboard.table1(by), scoreboard.table2(by)
    assert list(t1.columns) == list(t2.columns) == ["base model", "raw SFT", "pipeline SFT"]
    assert list(t1.index) == list(scoreboard.TABLE1_ROWS)
    assert t1.loc["超时 (Timeout)", "base model"] == 0 and t1.loc["总计处理样本数", "raw SFT"] == 10
    assert {"PPL", "通过率 Pass@1", "格式遵循率 FCR", "语法错误率 SER", "逻辑错误率 Fail"} <= set(t2.index)
    assert t2.loc["逻辑错误率 Fail", "raw SFT"] == pytest.approx(0.2)
    fig = scoreboard.plot_metrics(by, tmp_path / "m.png")
    assert (tmp_path / "m.png").stat().st_size > 1000
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_library_does_not_switch_the_matplotlib_backend(tmp_path):
    import matplotlib

    before = matplotlib.get_backend()
    by = {"base": scoreboard.drill_metrics(_summary(Pass=1, NoCode=1))}
    scoreboard.plot_metrics(by, tmp_path / "m.png")
    assert matplotlib.get_backend() == before
    src = "".join((Path(scoreboard.__file__).parent / f).read_text() for f in ("scoreboard.py", "orchestrate.py"))
    assert "matplotlib.use(" not in src


def test_runs_vs_correct_crosstab():
    rows = [{"has_tests": True, "category": "Pass", "correct": True},
            {"has_tests": True, "category": "Pass", "correct": False},
            {"has_tests": True, "category": "Fail", "correct": False},
            {"has_tests": False, "category": "Pass", "correct": None}]
    ct = scoreboard.runs_vs_correct(rows)
    assert ct.loc["Pass", "tests fail"] == 1 and ct.loc["Pass", "tests pass"] == 1
    assert ct.values.sum() == 3


def test_teacher_forced_ppl_counts_only_answer_tokens(tmp_path):
    import _drill_standins as standins

    from course_lib.evaluation.generation import teacher_forced_ppl

    model = standins.make_tiny_model(tmp_path / "m", ["def f(x):\n    return x\n"] * 20)
    one = teacher_forced_ppl(model, [("write f", "```python\ndef f(x):\n    return x\n```")])
    longer_prompt = teacher_forced_ppl(model, [("write f " * 20, "```python\ndef f(x):\n    return x\n```")])
    assert one["tokens"] == longer_prompt["tokens"] > 0       # the prompt is not scored
    assert 1.0 < one["ppl"] < 10_000


def test_names_the_function_tells_a_wrong_name_from_wrong_code():
    from course_lib.drill.evaluate import defines_function, summarize

    code = "def other_sum(xs):\n    return sum(xs)\n"
    assert defines_function(code, "other_sum") and not defines_function(code, "tally_sum_all")
    assert defines_function(None, "f") is False and defines_function(code, None) is None
    rows = [{"category": "Pass", "has_fence": True, "has_code": True, "has_tests": True, "correct": False,
             "defines_entry_point": ok, "eval_part": ""} for ok in (True, False, False, False)]
    out = scoreboard.drill_metrics(summarize(rows))
    assert out["names the function"] == 0.25 and out["test pass@1"] == 0.0


@pytest.mark.parametrize("answer, lead", [
    ("Here it is:\n\n```python\nimport math\ndef other(xs):\n    return 0\n```\n", "Here it is:\n\n```python\nimport math\n"),
    ("```python\ndef other(xs):\n    return 0\n```", "```python\n"),
    ("```\ndef other(xs):\n    pass\n```", "```\n"),                          # untagged fence
    ("```javascript\ndef x\n```\n```py\ndef y():\n    pass\n```", "```javascript\ndef x\n```\n```py\n"),
    ("Just prose, no code.", None),
    ("```python\n    def nested():\n        pass\n```", None),                  # only an indented def
    ("", None),
])
def test_answer_lead_in_stops_before_the_first_def_line_of_a_python_fence(answer, lead):
    from course_lib.evaluation.extract import answer_lead_in

    assert answer_lead_in(answer) == lead


def test_signature_prefix_keeps_the_models_lead_in_and_gives_the_def_line():
    from course_lib.drill.inference import DEFAULT_LEAD_IN, signature_prefix

    row = {"signature": "def tally_sum_all(scores):", "tests": "assert tally_sum_all([1]) == 1\n"}
    raw_style = "It returns the sum:\n\n```python\ndef calc(items):\n    return 0\n```\nDone."
    assert signature_prefix(row, raw_style) == "It returns the sum:\n\n```python\ndef tally_sum_all(scores):\n"
    assert signature_prefix(row, "no code at all") == DEFAULT_LEAD_IN + "def tally_sum_all(scores):\n"
    assert signature_prefix(row) == DEFAULT_LEAD_IN + "def tally_sum_all(scores):\n"
    assert signature_prefix({"signature": "def f(x):"}, raw_style) is None          # no hidden tests
    assert signature_prefix({"tests": "assert True\n"}, raw_style) is None            # no signature (hub row)


def _per_prompt(outcomes, part="new instances", half=""):
    return [{"id": i, "part": part, "half": half, "passed": bool(o), "status": "passed" if o else "failed",
             "passed_free": False, "category": "Pass", "fenced": True} for i, o in enumerate(outcomes)]


def test_paired_comparison_gives_the_interval_and_a_verdict_only_when_it_excludes_zero():
    """Pipeline SFT passes 100 more of 300 prompts than raw SFT (and 0 fewer): ahead, with an interval above
    0; 5 more and 4 fewer of 300: no measurable difference. Over two seeds the per-seed differences are kept."""
    raw = _per_prompt([0] * 100 + [1] * 50 + [0] * 150)
    pipe = _per_prompt([1] * 100 + [1] * 50 + [0] * 150)
    c = scoreboard.paired_comparison(pipe, raw, "test pass@1 (new instances)", "pipeline SFT", "raw SFT")
    assert round(c["diff"], 3) == 0.333 and c["low"] > 0.25 and c["high"] < 0.42
    assert c["verdict"].startswith("pipeline SFT ahead of raw SFT: pipeline SFT − raw SFT +0.333 (95 % paired CI")
    assert (c["a_only"], c["b_only"], c["prompts"]) == (100, 0, 300)
    near = scoreboard.paired_comparison(_per_prompt([1] * 5 + [0] * 4 + [1] * 50 + [0] * 241),
                                        _per_prompt([0] * 5 + [1] * 4 + [1] * 50 + [0] * 241),
                                        "test pass@1", "RL", "SFT")
    assert near["low"] < 0 < near["high"] and near["verdict"].startswith("no measurable difference between RL and SFT")
    two = scoreboard.paired_comparison([pipe, pipe], [raw, pipe], "test pass@1", "A", "B")
    assert [round(d, 3) for d in two["per_seed"]] == [0.333, 0.0] and two["seeds"] == 2
    assert scoreboard.relation_to_interval(0.30, c) == "inside the benchmark's 95 % interval"
    assert scoreboard.relation_to_interval(0.10, c) == "below the benchmark's 95 % interval"
    assert scoreboard.relation_to_interval(0.50, c) == "above the benchmark's 95 % interval"


def test_comparisons_cover_the_parts_and_halves_and_name_mismatched_prompts():
    from course_lib.drill import taskgen

    half0, half1 = taskgen.HOLDOUT_HALVES
    a = _per_prompt([1, 1, 0]) + [{**r, "id": 10 + r["id"]} for r in _per_prompt([1, 0], "held-out combinations", half0)] \
        + [{**r, "id": 20 + r["id"]} for r in _per_prompt([1, 1], "held-out combinations", half1)]
    b = [{**r, "passed": False} for r in a]
    comps = scoreboard.compare_variants({"pipeline_sft": a, "raw_sft": b}, "pipeline_sft", "raw_sft")
    assert set(comps) == {"test pass@1", "test pass@1 (new instances)", "test pass@1 (held-out combinations)",
                          f"test pass@1 (held-out: {half0})", f"test pass@1 (held-out: {half1})"}
    assert comps[f"test pass@1 (held-out: {half1})"]["prompts"] == 2 and comps["test pass@1"]["prompts"] == 7
    assert round(comps["test pass@1 (held-out combinations)"]["diff"], 2) == 0.75
    assert len(scoreboard.comparison_table(comps)) == 5
    with pytest.raises(ValueError, match="different prompts"):
        scoreboard.paired_comparison(a, b[:-1], "test pass@1", "A", "B")
    with pytest.raises(ValueError, match="no per-prompt outcome"):
        scoreboard.paired_outcomes(a, b, "PPL")


def test_per_prompt_outcomes_round_trip_and_a_broken_line_is_named(tmp_path):
    from course_lib.drill import evaluate, taskgen

    half = taskgen.HOLDOUT_HALVES[1]
    rows = [{"id": 7, "task": "list/sum/odd", "eval_part": "held-out combinations", "holdout_half": half,
             "category": "Pass", "has_fence": True, "correct": True, "test_status": "passed", "correct_free": False,
             "test_status_free": "failed", "has_tests": True},
            {"id": 8, "task": "", "eval_part": "", "holdout_half": "", "category": "NoCode", "has_fence": False,
             "correct": None, "test_status": "", "correct_free": None, "test_status_free": "", "has_tests": False}]
    recs = evaluate.per_prompt_outcomes(rows)
    assert recs[0] == {"id": 7, "part": "held-out combinations", "half": half, "task": "list/sum/odd", "passed": True,
                       "status": "passed", "passed_free": False, "status_free": "failed", "category": "Pass",
                       "fenced": True}
    assert recs[1]["passed"] is None and recs[1]["fenced"] is False
    path = evaluate.write_per_prompt(recs, tmp_path / "per_prompt.jsonl")
    assert evaluate.read_per_prompt(path) == recs
    path.write_text(path.read_text() + "{not json\n")
    with pytest.raises(ValueError, match="line 3: not a per-prompt record"):
        evaluate.read_per_prompt(path)
    # the summary counts each half of the held-out part, and the metrics give its test pass@1
    summary = evaluate.summarize([{**r, "has_code": r["category"] != "NoCode"} for r in rows])
    assert summary[f"with_tests (held-out: {half})"] == 1 and summary[f"correct (held-out: {half})"] == 1
    m = scoreboard.drill_metrics(summary)
    assert m[f"test pass@1 (held-out: {half})"] == 1.0 and m[f"with tests (held-out: {half})"] == 1


def test_a_held_out_record_without_its_half_gets_it_from_its_task():
    from course_lib.drill import evaluate, taskgen

    rec = {"eval_part": "held-out combinations", "task": "list/sum/odd"}
    assert evaluate._half_of(rec) == taskgen.HOLDOUT_HALVES[0] == taskgen.holdout_half("list", "sum", "odd")
    assert evaluate._half_of({"eval_part": "held-out combinations", "task": "string/keep/vowels"}) == taskgen.HOLDOUT_HALVES[1]
    assert evaluate._half_of({"eval_part": "new instances", "task": "list/sum/all"}) == ""


def test_greedy_test_pass1_returns_each_prompts_outcome_and_the_halves(monkeypatch):
    """lesson 10's evaluation hook gives pass@1 per part and per held-out half and the per-prompt records
    bench_rl.py keeps for its paired intervals (the engine and the judge replaced by stand-ins here)."""
    from course_lib.drill import evaluate, inference, taskgen
    from course_lib.rl import passk

    half0, half1 = taskgen.HOLDOUT_HALVES
    rows = [{"idx": 1, "prompt": "p1", "eval_part": "new instances", "tests": "assert f(1) == 1\n",
             "signature": "def f(x):"},
            {"idx": 2, "prompt": "p2", "eval_part": "held-out combinations", "holdout_half": half0,
             "tests": "assert g(1) == 1\n", "signature": "def g(x):"},
            {"idx": 3, "prompt": "p3", "eval_part": "held-out combinations", "holdout_half": half1,
             "tests": "assert h(1) == 1\n", "signature": "def h(x):"}]

    def fake_run_model(model_dir, prompts, *, profile, follow_up, log, **kw):
        first = [{"response": "```python\ndef f(x):\n    return x\n```"} for _ in prompts]
        _, prefixes = follow_up(first)
        return {"answers": first, "follow_up": [{"response": p + "    return x\n```"} for p in prefixes],
                "engine": {"engine": "stand-in"}}

    def fake_judge(records, **kw):
        return [{"id": r["idx"], "task": "", "eval_part": r["eval_part"], "holdout_half": r["holdout_half"],
                 "category": "Pass", "has_fence": True, "has_tests": True, "correct": r["idx"] != 3,
                 "test_status": "passed" if r["idx"] != 3 else "failed", "correct_free": False,
                 "test_status_free": "failed"} for r in records]
    monkeypatch.setattr(inference, "run_model", fake_run_model)
    monkeypatch.setattr(evaluate, "evaluate_answers", fake_judge)
    out = passk.greedy_test_pass1("no-model", rows, profile="ci")
    assert (out["new instances"], out["held-out combinations"]) == (1.0, 0.5)
    assert (out[f"held-out: {half0}"], out[f"held-out: {half1}"]) == (1.0, 0.0)
    assert [(p["id"], p["part"], p["half"], p["passed"]) for p in out["per_prompt"]] == [
        (1, "new instances", "", True), (2, "held-out combinations", half0, True), (3, "held-out combinations", half1, False)]


def test_a_benchmarks_per_prompt_files_round_trip(tmp_path):
    """What a benchmark copies out of a drill folder (save_benchmark_per_prompt) is what it reads back
    (benchmark_per_prompt); a variant without step 5's file is left out, and a missing copy is named."""
    from course_lib.drill import scoreboard
    from course_lib.drill.evaluate import PER_PROMPT_FILE
    from course_lib.drill.outputs import DrillPaths, write_per_prompt

    paths = DrillPaths.under(tmp_path / "drill")
    recs = [{"id": 1, "part": "new instances", "half": "", "passed": True},
            {"id": 2, "part": "held-out combinations", "half": "pair never trained", "passed": False}]
    write_per_prompt(recs, paths.output_for("pipeline_sft") / PER_PROMPT_FILE)

    class Cfg:
        pass

    cfg = Cfg()
    cfg.paths = paths
    results_dir = tmp_path / "results"
    where = scoreboard.save_benchmark_per_prompt(cfg, ["base", "pipeline_sft"], results_dir / "bench" / "seed0",
                                                 results_dir)
    assert where == {"pipeline_sft": "bench/seed0/pipeline_sft.jsonl"}
    assert scoreboard.benchmark_per_prompt([{"seed": 0, "per_prompt": where}], "pipeline_sft", results_dir) == [recs]
    (results_dir / where["pipeline_sft"]).unlink()
    with pytest.raises(FileNotFoundError, match="pipeline_sft, seed 0"):
        scoreboard.benchmark_per_prompt([{"seed": 0, "per_prompt": where}], "pipeline_sft", results_dir)
