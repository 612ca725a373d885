"""Ablations of raw vs pipeline SFT (issue 35): which factor makes the gap?

Pipeline SFT differs from raw SFT in several ways at once: the raw rows carry simulated defects (some answers hold
no correct Python), their answers are longer and messier (prose, several fences), and the ci rule teacher
rewrites every answer as gold code in one fence with one loop-variable name. Each ablation changes one of
these, on the same training rows and with the same SFT steps (``--ablations``, :data:`~course_lib.drill.config.ABLATIONS`;
off by default, so the lesson's run does not get slower):

- ``raw_clean`` — the raw rows without defects: each row's answer replaced by the generator's clean answer to
  the same prompt (:func:`clean_rows`; the ci sample only);
- ``raw_code`` — the raw answers reduced to their code: the Python the evaluation would extract, in one python
  fence (:func:`code_only_rows`: the lecture's formatting without the teacher); rows with no Python code are left
  out and counted;
- ``raw_filter`` — a cheap filter on the raw rows: keep an answer that has a closed Python fence whose code
  compiles and defines the function the prompt names (:func:`cheap_filter`; what it removed, counted by reason);
- ``pipeline_noisy`` — the pipeline with a teacher that can fail (:class:`~course_lib.training.rule_teacher.NoisyRuleTeacher`);
- ``pipeline_llm`` — the pipeline with the LLM teacher (SmolLM2-135M-Instruct): when it keeps no row the variant
  has nothing to train on and is left out, its report saying so with the count.

Step 2 writes each training set, ``<data-dir>/ablation_<variant>.json``, with a report beside it
(``ablation_<variant>_report.json``: rows in, kept, removed by reason and — measured with the hidden-test
records' defect labels, which no filter reads — by defect; for the pipeline variants the funnel and the
:func:`~course_lib.training.codegen.teacher_report` measurement). Steps 3-5 then train, answer and evaluate the
variants like the others. ``benchmarks/bench_drill_ablations.py`` runs them over seeds and
:func:`ablation_table` / :func:`plot_ablations` show how much of the raw → pipeline gap each explains, with the
course's paired intervals (:func:`course_lib.drill.scoreboard.paired_comparison`).

Introduced in lesson 07.
"""
from __future__ import annotations

import ast
import json
import re
from collections import Counter
from typing import Any, Callable, Mapping, Sequence

from course_lib.drill.config import ABLATIONS, DrillConfig, RunState
from course_lib.drill.outputs import atomic_write_text, log, read_json_output, sha_or_none, up_to_date, write_json_output
from course_lib.evaluation.extract import PYTHON_TAGS, extract_code, find_code_blocks

# a change of how a training set is built redoes it (the completion marker holds this)
DATA_VERSION = 1
PIPELINE_ABLATIONS = {"pipeline_noisy": "noisy-rules", "pipeline_llm": "smollm2"}   # variant -> step 2's teacher
_NAME_IN_PROMPT = re.compile(r"`([A-Za-z_]\w*)")


# --- the raw variants' training sets ------------------------------------------------------------------

def clean_rows(rows: Sequence[Mapping[str, Any]], **generator_kwargs: Any) -> tuple[list[dict], dict]:
    """``rows`` (the ci sample's training rows) with each answer replaced by the generator's clean answer to the
    same prompt (:func:`course_lib.drill.taskgen.generate_rows` without defects, ``generator_kwargs`` as the sample
    was written with: the defaults). A row the generator does not make with the same prompt raises, naming its
    ``idx``. Returns (rows, report). Introduced in lesson 07."""
    from course_lib.drill import taskgen

    gen_rows, _ = taskgen.generate_rows(**{**generator_kwargs, "defect_rates": {}, "format_defect_rates": {}})
    by_idx = {r["idx"]: r for r in gen_rows}
    out, changed = [], 0
    for r in rows:
        g = by_idx.get(r.get("idx"))
        if g is None or g["prompt"] != r["prompt"]:
            raise ValueError(f"training row idx {r.get('idx')!r}: the generator makes no row with this prompt — "
                             "raw_clean needs the course's ci sample as `python -m course_lib.drill.taskgen` writes it")
        changed += g["response"] != r["response"]
        out.append({**r, "response": g["response"]})
    return out, {"input": len(rows), "kept": len(out), "answers replaced": changed, "removed": {}}


def code_only_rows(rows: Sequence[Mapping[str, Any]]) -> tuple[list[dict], dict]:
    """``rows`` with each answer reduced to its Python code (:func:`course_lib.evaluation.extract_code`: the
    Python and untagged fences, joined) in one python fence — the lecture's formatting without the teacher.
    A row whose answer holds no Python code is left out. Returns (rows, report with ``removed`` by reason).
    Introduced in lesson 07."""
    out, removed = [], Counter()
    for r in rows:
        code = extract_code(str(r.get("response") or ""))
        if code is None:
            removed["no Python code to extract"] += 1
            continue
        out.append({**r, "response": "```python\n" + code.strip("\n") + "\n```"})
    return out, {"input": len(rows), "kept": len(out), "removed": dict(removed)}


def _named_function(prompt: str) -> str | None:
    m = _NAME_IN_PROMPT.search(prompt or "")
    return m.group(1) if m else None


def cheap_check(prompt: str, response: str) -> str | None:
    """Why the cheap filter removes an answer, or None when it keeps it: the answer must have a closed Python (or
    untagged) fence whose code compiles and defines the function the prompt names (the first backticked name of
    the prompt). Nothing is run. Introduced in lesson 07."""
    name = _named_function(prompt)
    if name is None:
        return "the prompt names no function"
    blocks = [b for b in find_code_blocks(response or "") if b.closed and b.code.strip()
              and (b.tag in PYTHON_TAGS or b.tag == "")]
    if not blocks:
        return "no closed Python fence"
    code = "\n\n".join(b.code.rstrip("\n") for b in blocks) + "\n"
    try:
        tree = ast.parse(code)
        compile(tree, "<answer>", "exec")
    except (SyntaxError, ValueError):
        return "does not compile"
    if not any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name for n in tree.body):
        return "does not define the named function"
    return None


def cheap_filter(rows: Sequence[Mapping[str, Any]]) -> tuple[list[dict], dict]:
    """The raw rows that pass :func:`cheap_check`, answers unchanged. Returns (kept rows, report with ``removed``
    counted by reason). Introduced in lesson 07."""
    out, removed = [], Counter()
    for r in rows:
        why = cheap_check(str(r.get("prompt") or ""), str(r.get("response") or ""))
        if why is None:
            out.append(dict(r))
        else:
            removed[why] += 1
    return out, {"input": len(rows), "kept": len(out), "removed": dict(removed)}


# --- step 2: every selected ablation's training set --------------------------------------------------

def _by_defect(rows: Sequence[Mapping[str, Any]], kept_ids: set, labels: Sequence[str]) -> dict:
    """Per defect label: rows in, rows kept (a measurement: no filter reads the labels)."""
    table: dict[str, list[int]] = {}
    for r, lab in zip(rows, labels):
        t = table.setdefault(lab, [0, 0])
        t[0] += 1
        t[1] += str(r.get("idx")) in kept_ids
    return {lab: {"rows": n, "kept": k} for lab, (n, k) in sorted(table.items())}


def build_ablation_data(cfg: DrillConfig, *, run_teacher: Callable, teacher_config: Callable,
                        state: RunState | None = None) -> dict:
    """Write the training set and report of each ablation in ``cfg.ablations`` (skipping those up to date):
    ``<data-dir>/ablation_<variant>.json`` and ``ablation_<variant>_report.json``. ``run_teacher`` and
    ``teacher_config`` are step 2's (:func:`course_lib.drill.pipeline.run_teacher`, ``teacher_config``): the
    pipeline variants run their teacher exactly as step 2 does. A variant left with no row is noted in
    ``state.left_out`` (steps 3-5 leave it out, :func:`course_lib.drill.config.ablation_left_out`). Returns
    ``{variant: {"input", "kept"} or {"skipped": True}}``. Introduced in lesson 07."""
    from course_lib.drill.download import defect_labels

    state = RunState() if state is None else state
    p = cfg.paths
    info: dict[str, Any] = {}
    with_tests = None
    for name in cfg.ablations:
        conf = {"train": sha_or_none(p.train_json), "ablation": name, "version": DATA_VERSION}
        if name in PIPELINE_ABLATIONS:
            conf["teacher"] = teacher_config(cfg, PIPELINE_ABLATIONS[name])
        out_path, report_path = p.ablation_json(name), p.ablation_report(name)
        if up_to_date([out_path], conf, cfg.force, f"pipeline[{name}]") and report_path.exists():
            info[name] = {"skipped": True}
        else:
            with_tests = read_json_output(p.train_json, "download") if with_tests is None else with_tests
            rows, report = _build(cfg, name, with_tests, run_teacher)
            labels = defect_labels(with_tests, cfg.hidden_tests)
            kept_ids = {str(r.get("idx", r.get("row_id"))) for r in rows}
            report.update(variant=name, what=ABLATIONS[name][1], by_defect=_by_defect(with_tests, kept_ids, labels))
            if not rows:
                report["left_out"] = (f"{ABLATIONS[name][0]}: kept 0 of {len(with_tests)} training rows, nothing to "
                                      "train on (no model, no row in the tables)")
            atomic_write_text(report_path, json.dumps(report, indent=1, ensure_ascii=False, default=str))
            write_json_output(out_path, rows, conf)
            log().info("pipeline[%s]: %d of %d training rows → %s%s", name, len(rows), len(with_tests), out_path.name,
                       "".join(f"; removed {n} × {why}" for why, n in report.get("removed", {}).items()))
            info[name] = {"input": len(with_tests), "kept": len(rows)}
        report = json.loads(report_path.read_text(encoding="utf-8"))
        if report.get("left_out"):
            state.left_out[name] = report["left_out"]
            log().warning("pipeline[%s]: %s", name, report["left_out"])
    return info


def _build(cfg: DrillConfig, name: str, with_tests: list[dict], run_teacher: Callable) -> tuple[list[dict], dict]:
    if name == "raw_clean":
        return clean_rows(with_tests)
    if name == "raw_code":
        return code_only_rows(with_tests)
    if name == "raw_filter":
        return cheap_filter(with_tests)
    kept, report, measured = run_teacher(cfg, PIPELINE_ABLATIONS[name], with_tests, measure=True)
    removed = Counter(re.sub(r"\d+(\.\d+)?", "N", d["reason"])[:60] for d in report.dropped)
    rows = [{**k, "idx": k.get("row_id")} for k in kept]
    return rows, {"input": len(with_tests), "kept": len(rows), "removed": dict(removed), "teacher": report.teacher,
                  "funnel": report.stages, "teacher_report": None if measured is None else measured.to_dict()}


# --- reading the benchmark: how much of the gap each factor explains --------------------------------

FACTORS: dict[str, str] = {
    "raw_clean": "defects removed (raw answers, no defects)",
    "raw_code": "format: answers reduced to their code (extract + fence)",
    "raw_filter": "cheap filter (compiles, defines the named function)",
    "pipeline_noisy": "pipeline with a teacher that can fail (noisy rules)",
    "pipeline_llm": "pipeline with the LLM teacher (SmolLM2)",
    "pipeline_sft": "pipeline with the gold rule teacher (the full gap)",
}
"""Each variant the ablation table compares with raw SFT, and the factor it isolates."""


def _short_verdict(c: Mapping[str, Any]) -> str:
    """"ahead of raw SFT" / "behind raw SFT" when the interval excludes 0, else "no measurable difference"."""
    if c["low"] > 0:
        return "ahead of raw SFT"
    if c["high"] < 0:
        return "behind raw SFT"
    return "no measurable difference"


def ablation_table(bench: Mapping[str, Any], part: str):
    """One row per factor (:data:`FACTORS`) from ``benchmarks/results/bench_drill_ablations.json``'s
    ``comparisons`` for eval scope ``part`` (an eval part or a half of the held-out part,
    :data:`course_lib.drill.scoreboard.SCOPES`): the variant, its mean test pass@1 over seeds, its difference from
    raw SFT with the paired 95 % interval (:func:`course_lib.drill.scoreboard.paired_comparison`), the share of the
    full raw → pipeline gap it explains (difference / gap; None when the gap is 0 or the variant has no model, with
    the reason) and the verdict (a direction only when the interval excludes 0). A pandas DataFrame.
    Introduced in lesson 07."""
    import pandas as pd

    comp = bench["comparisons"][part]
    gap = (comp.get("pipeline_sft") or {}).get("diff")
    rows = []
    for variant, factor in FACTORS.items():
        c = comp.get(variant)
        if c is None:
            continue
        if c.get("left_out"):
            rows.append({"variant": variant, "factor": factor, "test pass@1": None, "− raw SFT": None,
                         "95% interval": c["left_out"], "share of the gap": None, "verdict": "no model"})
            continue
        share = c["diff"] / gap if gap else None
        rows.append({"variant": variant, "factor": factor, "test pass@1": c.get("mean"),
                     "− raw SFT": c["diff"], "95% interval": f"[{c['low']:+.3f}, {c['high']:+.3f}]",
                     "share of the gap": share, "verdict": _short_verdict(c)})
    return pd.DataFrame(rows)


def ablation_overview(bench: Mapping[str, Any]):
    """One row per factor (:data:`FACTORS`), one column per eval scope of ``bench["comparisons"]`` (the two parts
    and the two halves of the held-out part): ``"+0.123 [+0.080, +0.166]"``, the variant − raw SFT with its paired
    95 % interval, marked ``*`` when the interval excludes 0; ``"no model"`` when the variant has none (its reason:
    ``bench["comparisons"][scope][variant]["left_out"]``). A last row gives raw SFT's own mean test pass@1 per
    scope. A pandas DataFrame (index: variant), compact enough for
    one slide. Introduced in lesson 07."""
    import pandas as pd

    comps = bench["comparisons"]
    rows = {}
    for variant in FACTORS:
        cells = {}
        for scope, comp in comps.items():
            c = comp.get(variant)
            if c is None:
                continue
            if c.get("left_out"):
                cells[scope] = "no model"
            else:
                mark = " *" if c["low"] > 0 or c["high"] < 0 else ""
                cells[scope] = f"{c['diff']:+.3f} [{c['low']:+.3f}, {c['high']:+.3f}]{mark}"
        if cells:
            rows[variant] = cells
    rows["raw_sft (mean)"] = {scope: (f"{comp['raw_sft']['mean']:.3f}" if (comp.get("raw_sft") or {}).get("mean")
                                      is not None else "") for scope, comp in comps.items()}
    return pd.DataFrame(rows).T


def plot_ablations(bench: Mapping[str, Any], ax=None):
    """Each factor's difference from raw SFT (test pass@1) with its paired 95 % interval, one colour per eval
    part; the full gap (pipeline SFT − raw SFT) as the last bar. Never changes the matplotlib backend.
    Introduced in lesson 07."""
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(8, 4))[1]
    parts = list(bench["comparisons"])
    variants = [v for v in FACTORS if any(v in bench["comparisons"][p] for p in parts)]
    width = 0.8 / max(1, len(parts))
    for j, part in enumerate(parts):
        xs, ys, err = [], [], [[], []]
        for i, v in enumerate(variants):
            c = bench["comparisons"][part].get(v)
            if not c or c.get("diff") is None:
                if c and c.get("left_out") and j == 0:
                    ax.text(i, 0, "no model", ha="center", va="bottom", fontsize=8)
                continue
            xs.append(i + (j - (len(parts) - 1) / 2) * width)
            ys.append(c["diff"])
            err[0].append(c["diff"] - c["low"])
            err[1].append(c["high"] - c["diff"])
        ax.bar(xs, ys, width=width, yerr=err, capsize=3, label=part)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(range(len(variants)))
    ax.set_xticklabels(variants, rotation=20, ha="right")
    ax.set_ylabel("test pass@1 − raw SFT")
    ax.set_title("each variant − raw SFT, paired 95% intervals\n(pipeline_sft: the whole raw → pipeline gap)", fontsize=10)
    ax.legend(fontsize=8)
    ax.figure.tight_layout()
    return ax
