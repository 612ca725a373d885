"""The drill's metrics and the lesson's two tables.

The lesson text is not in this repository and its metric definitions could not be found in public
sources, so the course defines them here, explicitly (docs/drill.md repeats this):

- **Pass@1** — share of all eval samples whose single greedy answer is in category *Pass* (its extracted
  code runs to the end without error). With one sample per problem this equals the unbiased pass@k
  estimator (Chen et al. 2021) at n = k = 1.
- **FCR** (format compliance rate) — share of all eval answers that contain at least one closed
  Markdown fence tagged Python or untagged (the answer format SFT teaches).
- **SER** (syntax error rate) — share of the answers *with extracted code* whose code does not parse
  (category *SyntaxError* / answers with code).
- **RSR** (run success rate) — share of the answers whose code *parses* that also run without error
  (*Pass* / (with code − SyntaxError)).
- **PPL** — perplexity of the model on the eval set's reference answers, teacher-forced, counting only
  the answer tokens (see :func:`course_lib.drill.inference.teacher_forced_ppl`).

Beyond the lesson: **test pass@1** (hidden tests pass, over samples that carry tests) and **HumanEval
pass@1** (a subset in ci), and the count of answers that run but are wrong.

Introduced in lesson 07.
"""
from __future__ import annotations

from typing import Any, Mapping

# The lesson's published numbers (its full run on a GPU), shown beside the ci rehearsal.
LESSON_NUMBERS = {
    "Pass@1 base (Qwen2.5-0.5B-Instruct)": 0.581,
    "Pass@1 raw SFT": 0.877,
    "Pass@1 pipeline SFT": 0.991,
    "one-click run passes": "950/1000",
    "pipeline kept": "4987/5000",
}

VARIANT_LABELS = {"base": "base model", "raw_sft": "raw SFT", "pipeline_sft": "pipeline SFT"}


def _ratio(a: int, b: int) -> float:
    return a / b if b else 0.0


def drill_metrics(summary: Mapping[str, Any], ppl: Mapping[str, Any] | None = None,
                  humaneval: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Pass@1, FCR, SER, RSR (+ PPL, test pass@1, HumanEval pass@1) and the counts behind them.

    ``summary`` is :func:`course_lib.drill.evaluate.summarize`'s result. Introduced in lesson 07.
    """
    c, n = summary["counts"], summary["total"]
    parsed = summary["with_code"] - c["SyntaxError"]
    out = {
        "Pass@1": _ratio(c["Pass"], n),
        "FCR": _ratio(summary["fenced"], n),
        "SER": _ratio(c["SyntaxError"], summary["with_code"]),
        "RSR": _ratio(c["Pass"], parsed),
        "PPL": float(ppl["ppl"]) if ppl else float("nan"),
        "test pass@1": _ratio(summary["correct"], summary["with_tests"]),
        "samples": n, "Pass": c["Pass"], "Fail": c["Fail"], "SyntaxError": c["SyntaxError"],
        "NoCode": c["NoCode"], "Timeout": c["Timeout"], "Error": c["Error"],
        "fenced": summary["fenced"], "with code": summary["with_code"],
        "with tests": summary["with_tests"], "correct": summary["correct"],
        "runs but wrong": summary["runs_but_wrong"],
    }
    if humaneval:
        out["HumanEval pass@1"] = float(humaneval["pass@1"])
        out["HumanEval passed"] = f"{humaneval['passed']}/{humaneval['problems']}"
    return out


RATE_COLUMNS = ["Pass@1", "FCR", "SER", "RSR", "PPL", "test pass@1", "HumanEval pass@1"]
COUNT_COLUMNS = ["samples", "Pass", "Fail", "SyntaxError", "NoCode", "Timeout", "Error", "correct",
                 "runs but wrong", "HumanEval passed"]


def metrics_table(by_variant: Mapping[str, Mapping[str, Any]], variants: list[str]):
    """A pandas table, one row per variant (in ``variants`` order, skipping absent ones)."""
    import pandas as pd

    rows = {VARIANT_LABELS.get(v, v): by_variant[v] for v in variants if v in by_variant}
    df = pd.DataFrame.from_dict(rows, orient="index")
    cols = [c for c in RATE_COLUMNS + COUNT_COLUMNS if c in df.columns]
    return df[cols]


def table1(by_variant: Mapping[str, Mapping[str, Any]]):
    """The lesson's Table 1: before vs after SFT (base model vs the fine-tuned model)."""
    sft = "pipeline_sft" if "pipeline_sft" in by_variant else "raw_sft"
    return metrics_table(by_variant, ["base", sft])


def table2(by_variant: Mapping[str, Mapping[str, Any]]):
    """The lesson's Table 2: SFT on the raw data vs SFT on the pipeline's data."""
    return metrics_table(by_variant, ["raw_sft", "pipeline_sft"])


def plot_metrics(by_variant: Mapping[str, Mapping[str, Any]], path=None,
                 metrics=("Pass@1", "FCR", "SER", "RSR", "test pass@1")):
    """Grouped bars of the rate metrics per variant; saves a PNG when ``path`` is given."""
    import matplotlib

    if path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    import numpy as np

    variants = [v for v in ("base", "raw_sft", "pipeline_sft") if v in by_variant]
    x = np.arange(len(metrics))
    width = 0.8 / max(len(variants), 1)
    fig, ax = plt.subplots(figsize=(8, 3.6))
    for j, v in enumerate(variants):
        vals = [float(by_variant[v].get(m, 0.0) or 0.0) for m in metrics]
        bars = ax.bar(x + j * width, vals, width, label=VARIANT_LABELS.get(v, v))
        ax.bar_label(bars, labels=[f"{val:.2f}" for val in vals], fontsize=7)
    ax.set_xticks(x + width * (len(variants) - 1) / 2, metrics)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("rate")
    ax.set_title("tiny-codes drill: metrics per model")
    ax.legend()
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def runs_vs_correct(rows) -> Any:
    """Cross-table of the lesson's category against hidden-test correctness (samples with tests)."""
    import pandas as pd

    df = pd.DataFrame([r for r in rows if r.get("has_tests")])
    if df.empty:
        return df
    df["correct"] = df["correct"].map({True: "tests pass", False: "tests fail"})
    return pd.crosstab(df["category"], df["correct"])
