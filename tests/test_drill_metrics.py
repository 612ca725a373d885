"""The drill's metrics (Pass@1, FCR, SER, RSR, PPL) and the lesson's tables."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from course_lib.drill import metrics

sys.path.insert(0, str(Path(__file__).parent))


def _summary(**counts):
    c = {k: 0 for k in ("Pass", "Fail", "SyntaxError", "NoCode", "Timeout", "Error")} | counts
    total = sum(c.values())
    return {"total": total, "counts": c, "fenced": total - c["NoCode"] - 1,
            "with_code": total - c["NoCode"], "with_tests": 10, "correct": 4, "runs_but_wrong": 3,
            "correct_but_not_run": 0}


def test_metric_definitions():
    s = _summary(Pass=6, Fail=1, SyntaxError=2, NoCode=1)          # 10 samples, 9 with code, 7 parse
    m = metrics.drill_metrics(s, {"ppl": 3.5}, {"pass@1": 0.25, "passed": 1, "problems": 4})
    assert m["Pass@1"] == pytest.approx(0.6)
    assert m["FCR"] == pytest.approx(0.8)
    assert m["SER"] == pytest.approx(2 / 9)
    assert m["RSR"] == pytest.approx(6 / 7)
    assert m["PPL"] == 3.5 and m["test pass@1"] == pytest.approx(0.4)
    assert m["HumanEval passed"] == "1/4" and m["runs but wrong"] == 3


def test_empty_model_output_gives_zero_rates_not_errors():
    s = _summary(NoCode=5)
    s["fenced"] = 0
    m = metrics.drill_metrics(s)
    assert (m["Pass@1"], m["FCR"], m["SER"], m["RSR"]) == (0.0, 0.0, 0.0, 0.0)
    assert math.isnan(m["PPL"])


def test_tables_have_the_lessons_layout(tmp_path):
    base = metrics.drill_metrics(_summary(Pass=1, NoCode=9), {"ppl": 40.0})
    raw = metrics.drill_metrics(_summary(Pass=6, Fail=2, NoCode=2), {"ppl": 3.0})
    pipe = metrics.drill_metrics(_summary(Pass=8, Fail=1, NoCode=1), {"ppl": 2.5})
    by = {"base": base, "raw_sft": raw, "pipeline_sft": pipe}
    t1, t2 = metrics.table1(by), metrics.table2(by)
    assert list(t1.index) == ["base model", "pipeline SFT"]
    assert list(t2.index) == ["raw SFT", "pipeline SFT"]
    assert {"Pass@1", "PPL", "FCR", "SER", "RSR", "Pass", "NoCode"} <= set(t1.columns)
    fig = metrics.plot_metrics(by, tmp_path / "m.png")
    assert (tmp_path / "m.png").stat().st_size > 1000
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_runs_vs_correct_crosstab():
    rows = [{"has_tests": True, "category": "Pass", "correct": True},
            {"has_tests": True, "category": "Pass", "correct": False},
            {"has_tests": True, "category": "Fail", "correct": False},
            {"has_tests": False, "category": "Pass", "correct": None}]
    ct = metrics.runs_vs_correct(rows)
    assert ct.loc["Pass", "tests fail"] == 1 and ct.loc["Pass", "tests pass"] == 1
    assert ct.values.sum() == 3


def test_teacher_forced_ppl_counts_only_answer_tokens(tmp_path):
    import _drill_standins as standins
    from course_lib.drill.inference import teacher_forced_ppl

    model = standins.make_tiny_model(tmp_path / "m", ["def f(x):\n    return x\n"] * 20)
    one = teacher_forced_ppl(model, [("write f", "```python\ndef f(x):\n    return x\n```")])
    longer_prompt = teacher_forced_ppl(model, [("write f " * 20, "```python\ndef f(x):\n    return x\n```")])
    assert one["tokens"] == longer_prompt["tokens"] > 0       # the prompt is not scored
    assert 1.0 < one["ppl"] < 10_000
