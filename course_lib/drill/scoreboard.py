"""The drill's scoreboard: its metrics per model and the lecture's two tables (lecture §5.1–5.2).

The lecture's definitions, over all N eval samples and the categories of :mod:`course_lib.drill.evaluate`:

- **Pass@1** = Pass / N — the single greedy answer's code runs to the end without error. With one
  sample per problem this equals the unbiased pass@k estimator (Chen et al. 2021) at n = k = 1.
- **FCR** (format compliance rate) = (N − NoCode) / N — the answer has code that could be extracted.
- **SER** (syntax error rate) = SyntaxError / N.
- **RSR** (runtime success rate) = Pass / (N − NoCode − SyntaxError) — among answers whose code was
  extracted and parses, the share that runs without error.
- **Fail rate** (the lecture's 逻辑错误率) = Fail / N.
- **PPL** — perplexity on the eval set's reference answers as they are (the raw format: prose and a
  fence), teacher-forced, answer tokens only (:func:`course_lib.evaluation.generation.teacher_forced_ppl`).
  ``PPL (raw format)`` repeats it under an explicit name and ``PPL (pipeline format)`` scores the answers
  the pipeline writes for the same prompts (code in one fence, as pipeline SFT's rows are): each format
  favours the variant trained on it.

The course adds stricter measures as extra columns with their own names: **closed-fence rate** (share of
answers with a closed ```python / untagged fence), **SER among code** (SyntaxError / answers with code),
**test pass@1** (hidden tests pass, over samples that carry tests; HumanEval's protocol: the answer
starts with the function's signature, so the tests find the function they call) with its two eval
parts, **test pass@1 (free answer)** (the same tests on the free answer, which must also name the
function as the prompt asks), **names the function**, **HumanEval pass@1** (a subset in ci), and the
count of free answers that run but are wrong.

Introduced in lesson 07.
"""
from __future__ import annotations

from typing import Any, Mapping

from course_lib.drill.config import VARIANT_LABELS
from course_lib.drill.taskgen import HOLDOUT_HALVES

# The lecture's published counts (§5.2, Table 1: Qwen2.5-0.5B-Instruct, 1,000 eval samples).
LECTURE_COUNTS = {
    "before SFT": {"Pass": 581, "Fail": 96, "SyntaxError": 14, "NoCode": 278, "Timeout": 31},
    "SFT v1": {"Pass": 877, "Fail": 70, "SyntaxError": 5, "NoCode": 46, "Timeout": 2},
    "pipeline SFT": {"Pass": 991, "Fail": 2, "SyntaxError": 7, "NoCode": 0, "Timeout": 0},
}
# The lecture's printed rates (§5.2, Table 2) and PPL; the lecture prints no RSR.
LECTURE_RATES = {
    "before SFT": {"Pass@1": 0.581, "FCR": 0.722, "SER": 0.014, "Fail rate": 0.096, "PPL": 12.50},
    "SFT v1": {"Pass@1": 0.877, "FCR": 0.954, "SER": 0.005, "Fail rate": 0.070, "PPL": 1.80},
    "pipeline SFT": {"Pass@1": 0.991, "FCR": 1.000, "SER": 0.007, "Fail rate": 0.002, "PPL": 1.08},
}
_CATEGORY_COUNTS = ("Pass", "Fail", "SyntaxError", "NoCode", "Timeout", "Error")


def _ratio(a: int, b: int) -> float:
    return a / b if b else 0.0


def summary_from_counts(counts: Mapping[str, int]) -> dict[str, Any]:
    """A :func:`course_lib.drill.evaluate.summarize`-shaped dict from category counts alone (the
    lecture's Table 1 columns); every answer with code is taken as fenced. Introduced in lesson 07."""
    c = {k: int(counts.get(k, 0)) for k in _CATEGORY_COUNTS}
    n = sum(c.values())
    return {"total": n, "counts": c, "fenced": n - c["NoCode"], "with_code": n - c["NoCode"],
            "with_tests": 0, "correct": 0, "runs_but_wrong": 0, "correct_but_not_run": 0}


def drill_metrics(summary: Mapping[str, Any], ppl: Mapping[str, Any] | None = None,
                  humaneval: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The lecture's Pass@1, FCR, SER, RSR, Fail rate (+ PPL and the course's extra columns) and counts.

    ``summary`` is :func:`course_lib.drill.evaluate.summarize`'s result. Introduced in lesson 07.
    """
    c, n = summary["counts"], summary["total"]
    with_code = summary["with_code"]
    out = {
        "Pass@1": _ratio(c["Pass"], n),
        "FCR": _ratio(n - c["NoCode"], n),
        "SER": _ratio(c["SyntaxError"], n),
        "RSR": _ratio(c["Pass"], n - c["NoCode"] - c["SyntaxError"]),
        "Fail rate": _ratio(c["Fail"], n),
        "PPL": float(ppl["ppl"]) if ppl else float("nan"),
        **{f"PPL ({name} format)": float(v["ppl"]) for name, v in ((ppl or {}).get("formats") or {}).items()},
        # the course's stricter measures
        "closed-fence rate": _ratio(summary["fenced"], n),
        "SER among code": _ratio(c["SyntaxError"], with_code),
        "test pass@1": _ratio(summary["correct"], summary["with_tests"]),
        "test pass@1 (free answer)": _ratio(summary.get("correct_free", 0), summary["with_tests"]),
        "samples": n, "Pass": c["Pass"], "Fail": c["Fail"], "SyntaxError": c["SyntaxError"],
        "NoCode": c["NoCode"], "Timeout": c["Timeout"], "Error": c["Error"],
        "fenced": summary["fenced"], "with code": with_code,
        "with tests": summary["with_tests"], "correct": summary["correct"],
        "runs but wrong": summary["runs_but_wrong"],
    }
    if "defines_entry_point" in summary:
        # answers that define the function the prompt names, over answers with hidden tests: a model
        # that does not copy the name from the prompt fails every hidden test, whatever its code does
        out["names the function"] = _ratio(summary["defines_entry_point"], summary["with_tests"])
    for part in ("new instances", "held-out combinations", *(f"held-out: {h}" for h in HOLDOUT_HALVES)):
        key = f"with_tests ({part})"
        if key in summary:
            out[f"test pass@1 ({part})"] = _ratio(summary[f"correct ({part})"], summary[key])
            out[f"with tests ({part})"] = summary[key]
    if humaneval:
        out["HumanEval pass@1"] = float(humaneval["pass@1"])
        out["HumanEval passed"] = f"{humaneval['passed']}/{humaneval['problems']}"
    return out


_RATE_COLUMNS = ["Pass@1", "FCR", "SER", "RSR", "Fail rate", "PPL", "PPL (raw format)", "PPL (pipeline format)",
                 "closed-fence rate", "SER among code",
                 "test pass@1", "test pass@1 (new instances)", "test pass@1 (held-out combinations)",
                 *(f"test pass@1 (held-out: {h})" for h in HOLDOUT_HALVES),
                 "test pass@1 (free answer)", "names the function", "HumanEval pass@1"]
_COUNT_COLUMNS = ["samples", "Pass", "Fail", "SyntaxError", "NoCode", "Timeout", "Error", "correct",
                 "runs but wrong", "HumanEval passed"]
# The lecture's tables: rows are measures, columns are models.
TABLE1_ROWS = {"通过 (Pass)": "Pass", "失败 (Fail)": "Fail", "语法错误 (SyntaxError)": "SyntaxError",
               "未提取代码 (NoCode)": "NoCode", "超时 (Timeout)": "Timeout", "总计处理样本数": "samples"}
_TABLE2_ROWS = {"PPL": "PPL", "通过率 Pass@1": "Pass@1", "格式遵循率 FCR": "FCR", "语法错误率 SER": "SER",
               "逻辑错误率 Fail": "Fail rate", "运行时成功率 RSR": "RSR"}


def metrics_table(by_variant: Mapping[str, Mapping[str, Any]], variants: list[str]):
    """A pandas table, one row per variant (in ``variants`` order, skipping absent ones)."""
    import pandas as pd

    rows = {VARIANT_LABELS.get(v, v): by_variant[v] for v in variants if v in by_variant}
    df = pd.DataFrame.from_dict(rows, orient="index")
    cols = [c for c in _RATE_COLUMNS + _COUNT_COLUMNS if c in df.columns]
    return df[cols]


def _lecture_table(by_variant: Mapping[str, Mapping[str, Any]], rows: Mapping[str, str]):
    import pandas as pd

    cols = {VARIANT_LABELS[v]: by_variant[v] for v in VARIANT_LABELS if v in by_variant}
    return pd.DataFrame({label: [m.get(key) for key in rows.values()] for label, m in cols.items()},
                        index=list(rows))


def table1(by_variant: Mapping[str, Mapping[str, Any]]):
    """The lecture's Table 1: counts per category (incl. Timeout) and the total, one column per model."""
    return _lecture_table(by_variant, {**TABLE1_ROWS, "错误 (Error, sandbox)": "Error"}
                          if any(m.get("Error") for m in by_variant.values()) else TABLE1_ROWS)


def table2(by_variant: Mapping[str, Mapping[str, Any]]):
    """The lecture's Table 2: PPL, Pass@1, FCR, SER, Fail rate (+ RSR), one column per model."""
    return _lecture_table(by_variant, _TABLE2_ROWS)


def plot_metrics(by_variant: Mapping[str, Mapping[str, Any]], path=None,
                 metrics=("Pass@1", "FCR", "SER", "RSR", "Fail rate", "test pass@1")):
    """Grouped bars of the rate metrics per variant; saves a PNG when ``path`` is given."""
    import matplotlib.pyplot as plt
    import numpy as np

    variants = [v for v in VARIANT_LABELS if v in by_variant]
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
    """Cross-table of the lesson's category against hidden-test correctness of the same (free) answer
    (samples with tests). Introduced in lesson 07."""
    import pandas as pd

    df = pd.DataFrame([r for r in rows if r.get("has_tests")])
    if df.empty:
        return df
    key = "correct_free" if "correct_free" in df else "correct"
    df["hidden tests"] = df[key].map({True: "tests pass", False: "tests fail"})
    return pd.crosstab(df["category"], df["hidden tests"])


# --- paired comparisons from per-prompt outcomes (step 5's per_prompt.jsonl) ---------------------------

# metric -> what one prompt contributes (1/0; None: the prompt does not count for this metric)
_OUTCOME = {
    "test pass@1": lambda r: None if r.get("passed") is None else int(bool(r["passed"])),
    "test pass@1 (free answer)": lambda r: None if r.get("passed_free") is None else int(bool(r["passed_free"])),
    "Pass@1": lambda r: int(r.get("category") == "Pass"),
    "FCR": lambda r: int(r.get("category") != "NoCode"),
    "closed-fence rate": lambda r: None if r.get("fenced") is None else int(bool(r["fenced"])),
}
SCOPES = ("new instances", "held-out combinations", *(f"held-out: {h}" for h in HOLDOUT_HALVES))
"""The eval scopes a test-pass@1 key may name in parentheses: the two parts and the two halves of the
held-out part (:data:`~course_lib.drill.taskgen.HOLDOUT_HALVES`)."""


def _metric_and_scope(metric: str) -> tuple[str, str | None]:
    for scope in SCOPES:
        if metric == f"test pass@1 ({scope})":
            return "test pass@1", scope
    if metric not in _OUTCOME:
        known = [*_OUTCOME, *(f"test pass@1 ({s})" for s in SCOPES)]
        raise ValueError(f"no per-prompt outcome for {metric!r}; known: {', '.join(known)}")
    return metric, None


def _in_scope(r: Mapping[str, Any], scope: str | None) -> bool:
    if scope is None:
        return True
    if scope.startswith("held-out: "):
        return r.get("half") == scope[len("held-out: "):]
    return r.get("part") == scope


def paired_outcomes(a: list[Mapping[str, Any]], b: list[Mapping[str, Any]], metric: str) -> tuple[list[int], list[int]]:
    """Two variants' per-prompt outcomes on ``metric`` (a key of :func:`drill_metrics`: ``"test pass@1
    (new instances)"``, ``"test pass@1 (held-out: pair never trained)"``, ``"FCR"`` ...), paired by prompt
    id: ``a`` and ``b`` are per-prompt records (:func:`course_lib.drill.evaluate.per_prompt_outcomes`) of the
    same eval rows. Prompts that do not count for the metric (no tests, another part) are left out of both.
    Raises ``ValueError`` naming the ids when the two sets of prompts differ. Introduced in lesson 07."""
    base, scope = _metric_and_scope(metric)
    get = _OUTCOME[base]
    ka = {r["id"]: r for r in a if _in_scope(r, scope) and get(r) is not None}
    kb = {r["id"]: r for r in b if _in_scope(r, scope) and get(r) is not None}
    if set(ka) != set(kb):
        only = sorted(set(ka) ^ set(kb), key=str)
        raise ValueError(f"{metric}: the two variants were evaluated on different prompts ({len(only)} ids in only "
                         f"one of them, e.g. {only[:5]}); rerun step 5 on the same eval_python.json")
    ids = sorted(ka, key=str)
    return [get(ka[i]) for i in ids], [get(kb[i]) for i in ids]


def paired_comparison(a: list | list[list], b: list | list[list], metric: str, a_label: str, b_label: str, *,
                      seed: int = 0) -> dict[str, Any]:
    """``a − b`` on ``metric`` with its paired 95 % interval (:func:`course_lib.evaluation.paired.paired_pass_difference`)
    and verdict (:func:`~course_lib.evaluation.paired.difference_verdict`). ``a`` and ``b``: one run's per-prompt
    records of each variant, or a list of them, one per seed (paired seed by seed; bootstrap over seeds and
    prompts). Returns the interval's keys plus ``metric``, ``verdict`` ("<A> ahead of <B>: …" only when the
    interval excludes 0, else "no measurable difference …"), ``per_seed`` (each seed's difference).
    Introduced in lesson 07."""
    from course_lib.evaluation.paired import difference_verdict, paired_pass_difference

    runs_a = a if a and isinstance(a[0], list) else [a]
    runs_b = b if b and isinstance(b[0], list) else [b]
    if len(runs_a) != len(runs_b):
        raise ValueError(f"{metric}: {len(runs_a)} runs of {a_label} but {len(runs_b)} of {b_label}")
    pairs = [paired_outcomes(x, y, metric) for x, y in zip(runs_a, runs_b)]
    empty = [i for i, (x, _) in enumerate(pairs) if not x]
    if empty:
        raise ValueError(f"{metric}: run(s) {empty} have no prompt that counts for it (no hidden tests?)")
    res = paired_pass_difference([x for x, _ in pairs], [y for _, y in pairs], seed=seed)
    return {**res, "metric": metric, "per_seed": [sum(x) / len(x) - sum(y) / len(y) for x, y in pairs],
            "verdict": difference_verdict(res, a_label, b_label)}


def compare_variants(per_prompt: Mapping[str, Any], a: str, b: str,
                     metrics: tuple[str, ...] = ("test pass@1", *(f"test pass@1 ({s})" for s in SCOPES)),
                     *, seed: int = 0) -> dict[str, dict[str, Any]]:
    """:func:`paired_comparison` of variants ``a`` and ``b`` on each of ``metrics`` (by default test pass@1 on
    the whole eval set, both parts and both held-out halves); ``per_prompt``: variant → its per-prompt records
    (one run) or a list of them (one per seed). Metrics without prompts (hub rows carry no tests) are left out.
    Introduced in lesson 07."""
    out = {}
    for m in metrics:
        try:
            out[m] = paired_comparison(per_prompt[a], per_prompt[b], m, VARIANT_LABELS.get(a, a), VARIANT_LABELS.get(b, b),
                                       seed=seed)
        except ValueError as exc:
            if "no prompt that counts" not in str(exc):
                raise
    return out


def comparison_table(comparisons: Mapping[str, Mapping[str, Any]]):
    """A pandas table of :func:`compare_variants`' result: one row per metric with the difference, the 95 %
    interval, McNemar's p, the prompts (and seeds) and the verdict. Introduced in lesson 07."""
    import pandas as pd

    return pd.DataFrame({m: {"A − B": round(c["diff"], 3), "95 % CI": f"[{c['low']:+.3f}, {c['high']:+.3f}]",
                             "McNemar p": float(f"{c['p_mcnemar']:.3g}"), "prompts": c["prompts"], "seeds": c["seeds"],
                             "verdict": c["verdict"].split(":")[0]} for m, c in comparisons.items()}).T


def relation_to_interval(diff: float, comparison: Mapping[str, Any]) -> str:
    """Where one run's difference lies against a benchmark's paired interval (:func:`paired_comparison`):
    "inside the benchmark's 95 % interval", "above it" or "below it". Introduced in lesson 07."""
    if diff > comparison["high"] + 1e-9:
        return "above the benchmark's 95 % interval"
    if diff < comparison["low"] - 1e-9:
        return "below the benchmark's 95 % interval"
    return "inside the benchmark's 95 % interval"


def benchmark_per_prompt(results: list[Mapping[str, Any]], variant: str, base_dir) -> list[list[dict]]:
    """Each seed's per-prompt records of ``variant`` from a benchmark's ``results`` (each with ``"seed"`` and
    ``"per_prompt": {variant: path}``, the path relative to ``base_dir``, the JSON's folder: as
    ``benchmarks/bench_drill_pipeline.py`` writes them). Raises ``ValueError`` naming the seed when a file is
    not recorded (a benchmark in the format before per-prompt outcomes: rerun it) or ``FileNotFoundError``
    naming the file. Introduced in lesson 07."""
    from pathlib import Path

    from course_lib.drill.outputs import read_per_prompt

    out = []
    for r in results:
        path = (r.get("per_prompt") or {}).get(variant)
        if path is None:
            raise ValueError(f"seed {r.get('seed')}: the benchmark recorded no per-prompt file of {variant} (a "
                             "benchmark in the format before per-prompt outcomes): rerun it")
        full = Path(base_dir) / path
        if not full.exists():
            raise FileNotFoundError(f"{full}: the benchmark's per-prompt file of {variant}, seed {r.get('seed')}, "
                                    "is missing; rerun the benchmark")
        out.append(read_per_prompt(full))
    return out


def save_benchmark_per_prompt(cfg, variants, dest, base_dir) -> dict[str, str]:
    """Copy each variant's per-prompt outcomes (step 5's ``per_prompt.jsonl`` in the drill folder of ``cfg``) to
    ``dest/<variant>.jsonl``. Returns ``{variant: path relative to base_dir}`` — what a benchmark records as
    ``results[i]["per_prompt"]`` and :func:`benchmark_per_prompt` reads back; a variant without the file is left
    out. Introduced in lesson 07."""
    import shutil
    from pathlib import Path

    from course_lib.drill.outputs import PER_PROMPT_FILE

    where = {}
    for v in variants:
        src = cfg.paths.output_for(v) / PER_PROMPT_FILE
        if src.exists():
            dst = Path(dest) / f"{v}.jsonl"
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
            where[v] = dst.relative_to(base_dir).as_posix()
    return where
