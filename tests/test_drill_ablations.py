"""Issue 35's ablations: the noisy rule teacher, the raw variants' training sets, the plausible defects."""
from __future__ import annotations

import json
import random
import shutil
import subprocess

import pytest

from course_lib.drill import ablations, config, taskgen
from course_lib.drill.outputs import DrillPaths, write_json_output
from course_lib.evaluation.extract import find_code_blocks
from course_lib.training import rule_teacher as rt


@pytest.fixture(scope="module")
def sample():
    rows, tests = taskgen.generate_rows()
    by_idx = {t["idx"]: t for t in tests}
    return [(r, by_idx[r["idx"]]) for r in rows if r["programming_language"] == "Python"]


# --- the noisy rule teacher ----------------------------------------------------------------------------

@pytest.mark.parametrize("noise", [0.1, 0.2, 0.5])
def test_the_noisy_teacher_misreads_at_about_its_rate_in_every_stage(sample, noise):
    teacher = rt.noisy_rule_teacher(noise, seed=3)()
    # the rows the rules read (the new-instances eval rows are worded otherwise; the pipeline never gets them)
    readable = [(r, t) for r, t in sample if rt.read_instruction(r["prompt"]) is not None]
    n = len(readable)
    for stage in rt.STAGES:
        wrong = sum(teacher.read(r["prompt"], stage) != rt.read_instruction(r["prompt"]) for r, _ in readable)
        # binomial: 4 standard deviations of n readings
        assert abs(wrong / n - noise) < 4 * (noise * (1 - noise) / n) ** 0.5, (stage, wrong, n)


def test_the_noisy_teacher_is_deterministic_given_its_seed(sample):
    prompts = [r["prompt"] for r, _ in sample[:300]]
    a, b = rt.noisy_rule_teacher(0.3, seed=1)(), rt.noisy_rule_teacher(0.3, seed=1)()
    other = rt.noisy_rule_teacher(0.3, seed=2)()
    for stage in rt.STAGES:
        assert [a.read(p, stage) for p in prompts] == [b.read(p, stage) for p in reversed(prompts)][::-1]
    assert [a.read(p, "standardize") for p in prompts] != [other.read(p, "standardize") for p in prompts]
    assert [a.code_for(rt.read_instruction(p), p) for p in prompts] == [b.code_for(rt.read_instruction(p), p)
                                                                       for p in prompts]
    assert rt.noisy_rule_teacher(0.0)().read(prompts[0], "audit") == rt.read_instruction(prompts[0])
    with pytest.raises(ValueError, match="probability"):
        rt.noisy_rule_teacher(1.5)


def test_a_misreading_changes_one_field_and_reads_back(sample):
    """Each misreading is another task in the sample's words: its standardised instruction reads back to it, and
    the code the rules write for it passes the teacher's own tests for it; every field is misread sometimes."""
    rng = random.Random(0)
    fields = set()
    for r, _ in sample[:400]:
        spec = rt.read_instruction(r["prompt"])
        wrong, field_ = rt.misread(spec, rng)
        fields.add(field_)
        assert wrong != spec and (wrong.name, wrong.arg) == (spec.name, spec.arg)
        changed = {"operation": wrong.op != spec.op, "filter": wrong.keep != spec.keep,
                   "family": wrong.takes != spec.takes}
        assert [k for k, v in changed.items() if v] == [field_]
        assert rt.read_instruction(rt.standard_instruction(wrong)) == wrong
        exec(rt.write_code(wrong) + rt.write_tests(wrong), {})   # our own generated code
    assert fields == set(rt.MISREAD_FIELDS)


def test_the_noisy_teacher_varies_its_loop_variables(sample):
    teacher = rt.noisy_rule_teacher(0.2)()
    loops = {teacher.code_for(rt.read_instruction(r["prompt"]), r["prompt"]).splitlines()[2].split()[1]
             for r, _ in sample[:200]}
    assert len(loops) >= 8, loops


def test_the_noisy_teacher_is_a_drill_teacher_with_its_own_folder():
    cfg = config.config_from_profile("ci", teacher="noisy-rules")
    assert cfg.paths.data_dir.parent.name == "ci-teacher-noisy-rules"
    assert config.config_from_profile("ci").paths.data_dir.parent.name == "ci"
    assert cfg.teacher_noise == config.config_from_profile("ci").profile.drill.teacher_noise == 0.2
    with pytest.raises(ValueError, match="probability"):
        config.config_from_profile("ci", teacher_noise=2.0)


# --- the raw variants' training sets -------------------------------------------------------------------

def test_the_cheap_filter_counts_what_it_removed(sample):
    train = [r for r, t in sample if not t["holdout"]]
    label = {r["idx"]: t["defect"] or "(clean)" for r, t in sample}
    kept, report = ablations.cheap_filter(train)
    assert report["input"] == len(train) and report["kept"] == len(kept)
    assert sum(report["removed"].values()) == len(train) - len(kept) > 0
    assert set(report["removed"]) <= {"no closed Python fence", "does not compile", "does not define the named function",
                                      "the prompt names no function"}
    kept_ids = {r["idx"] for r in kept}
    assert all(label[i] not in ("prose only", "other language", "truncated", "wrong fence tag") for i in kept_ids)
    assert all(i in kept_ids for i, lab in label.items() if lab == "(clean)" and i in {r["idx"] for r in train})
    assert all(k["response"] == next(r for r in train if r["idx"] == k["idx"])["response"] for k in kept[:50])


@pytest.mark.parametrize("prompt,response,why", [
    ("Write `f(x)`.", "```python\ndef f(x):\n    return x\n```", None),
    ("Write `f(x)`.", "```\ndef f(x):\n    return x\n```", None),
    ("Write `f(x)`.", "no code", "no closed Python fence"),
    ("Write `f(x)`.", "```python\ndef f(x):\n    return x\n", "no closed Python fence"),
    ("Write `f(x)`.", "```text\ndef f(x):\n    return x\n```", "no closed Python fence"),
    ("Write `f(x)`.", "```python\ndef f(x)\n    return x\n```", "does not compile"),
    ("Write `f(x)`.", "```python\ndef g(x):\n    return x\n```", "does not define the named function"),
    ("Write a function.", "```python\ndef f(x):\n    return x\n```", "the prompt names no function"),
])
def test_the_cheap_check(prompt, response, why):
    assert ablations.cheap_check(prompt, response) == why


def test_code_only_rows_keep_the_code_in_one_fence_and_count_the_rest(sample):
    train = [r for r, t in sample if not t["holdout"]][:300]
    rows, report = ablations.code_only_rows(train)
    assert report["kept"] == len(rows) and sum(report["removed"].values()) == len(train) - len(rows) > 0
    for r in rows:
        blocks = find_code_blocks(r["response"])
        assert len(blocks) == 1 and blocks[0].tag == "python" and blocks[0].closed
        assert r["response"].startswith("```python\n") and r["response"].endswith("\n```")


def test_clean_rows_are_the_generators_answers_without_defects(sample):
    train = [r for r, t in sample if not t["holdout"]]
    clean, report = ablations.clean_rows(train)
    assert [r["prompt"] for r in clean] == [r["prompt"] for r in train]
    assert report["answers replaced"] == sum(bool(t["defect"]) for _, t in sample if not t["holdout"])
    by_idx = {t["idx"]: t for _, t in sample}
    for r in clean[:200]:
        exec(ablations.extract_code(r["response"]) + by_idx[r["idx"]]["tests"], {})   # our own generated code
    with pytest.raises(ValueError, match="idx 5"):
        ablations.clean_rows([{"idx": 5, "prompt": "not the generator's", "response": ""}])


def test_an_ablation_without_rows_is_left_out(tmp_path):
    cfg = config.config_from_profile("ci", ablations=("pipeline_llm", "raw_code"), paths=DrillPaths.under(tmp_path))
    cfg.paths.make()
    assert "pipeline_llm" in cfg.trained_variants("sft")
    write_json_output(cfg.paths.ablation_json("pipeline_llm"), [], {"x": 1})
    cfg.paths.ablation_report("pipeline_llm").write_text(json.dumps({"left_out": "kept 0 of 1000 training rows"}))
    assert config.ablation_left_out(cfg, "pipeline_llm") == "kept 0 of 1000 training rows"
    assert "pipeline_llm" not in cfg.variants() and "raw_code" in cfg.variants()
    with pytest.raises(ValueError, match="unknown ablation"):
        config.config_from_profile("ci", ablations=("raw_nothing",))


def test_ablations_are_off_by_default():
    cfg = config.config_from_profile("ci")
    assert cfg.ablations == () and not set(cfg.variants()) & set(config.ABLATIONS)


def test_the_benchmark_compares_each_variant_with_raw_sft_by_prompt_and_says_which_has_no_model(tmp_path):
    """bench_drill_ablations.compare: per eval scope (the parts and the held-out halves) each variant − raw SFT from
    the recorded per-prompt files, paired prompt by prompt with the course's interval; a variant left out in a
    seed carries the reason instead of numbers."""
    from benchmarks.bench_drill_ablations import compare
    from course_lib.drill.outputs import write_per_prompt

    half0, half1 = taskgen.HOLDOUT_HALVES

    def recs(passed):
        return [{"id": i, "part": "new instances" if i < 40 else "held-out combinations",
                 "half": "" if i < 40 else (half0 if i < 60 else half1), "passed": p} for i, p in enumerate(passed)]

    results = []
    for seed in (0, 1):
        where = {}
        for v, passed in {"raw_sft": [i % 4 == 0 for i in range(80)],
                          "pipeline_sft": [True] * 80,
                          "raw_code": [i % 4 == 0 or i % 4 == 1 for i in range(80)]}.items():
            write_per_prompt(recs(passed), tmp_path / f"seed{seed}" / f"{v}.jsonl")
            where[v] = f"seed{seed}/{v}.jsonl"
        results.append({"seed": seed, "per_prompt": where, "variants": {
            "raw_sft": {"metrics": {}}, "pipeline_sft": {"metrics": {}}, "raw_code": {"metrics": {}},
            "pipeline_noisy": {"left_out": "pipeline SFT, noisy teacher: kept 0 rows"}}})
    comp = compare(results, tmp_path)
    assert list(comp) == ["new instances", "held-out combinations", f"held-out: {half0}", f"held-out: {half1}"]
    new = comp["new instances"]
    assert new["pipeline_sft"]["diff"] == pytest.approx(0.75) and new["pipeline_sft"]["low"] > 0
    assert new["pipeline_sft"]["verdict"].startswith("pipeline_sft ahead of raw SFT")
    assert new["raw_code"]["diff"] == pytest.approx(0.25) and new["raw_code"]["mean"] == pytest.approx(0.5)
    assert new["raw_sft"]["mean"] == pytest.approx(0.25)
    assert new["pipeline_noisy"] == {"left_out": "pipeline SFT, noisy teacher: kept 0 rows"}
    assert comp[f"held-out: {half1}"]["raw_code"]["prompts"] == 20
    table = ablations.ablation_table({"comparisons": comp}, "new instances").set_index("variant")
    assert table.loc["raw_code", "share of the gap"] == pytest.approx(1 / 3)
    assert table.loc["raw_code", "verdict"] == "ahead of raw SFT"
    overview = ablations.ablation_overview({"comparisons": comp})
    assert list(overview.columns) == list(comp)
    assert overview.loc["raw_code", "new instances"].startswith("+0.250 [") and overview.loc[
        "raw_code", "new instances"].endswith("*")
    assert overview.loc["pipeline_noisy", "new instances"] == "no model"
    assert overview.loc["raw_sft (mean)", "new instances"] == "0.250"


# --- plausible defects ---------------------------------------------------------------------------------

def test_other_language_answers_compute_the_tasks_operation(sample):
    """The "other language" answers are the task's own function in JavaScript (operation, filter, loop), not a
    plain sum; with node on the machine they are run and return what the hidden tests expect."""
    rows = [(r, t) for r, t in sample if t["defect"] == "other language"]
    assert rows and len({t["operation"] for _, t in rows}) >= 5
    for r, t in rows:
        blocks = find_code_blocks(r["response"])
        assert [b.tag for b in blocks] == ["javascript"] and f"function {t['entry_point']}(" in blocks[0].code
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the JavaScript was checked for its shape only")
    calls, expected = [], []
    for r, t in rows:
        js = find_code_blocks(r["response"])[0].code
        for line in t["tests"].splitlines():
            arg = line.split("(", 1)[1].rsplit(") == ", 1)[0]
            value = eval(arg)   # our own generated test line
            calls.append(f"(function(){{ {js} return {t['entry_point']}({json.dumps(value)}); }})()")
            expected.append(taskgen.expected_value(t["family"], t["operation"], t["filter"], value))
    out = subprocess.run(["node", "-e", "console.log(JSON.stringify([" + ",".join(calls) + "]))"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    assert json.loads(out) == expected


def test_defect_rates_are_stated_once_and_wrong_fence_tags_are_rare():
    rates = {**taskgen.DEFECT_RATES, **taskgen.FORMAT_DEFECT_RATES}
    assert rates["wrong fence tag"] <= 0.01
    assert rates["wrong fence tag"] == min(rates.values())


def test_the_ablation_table_reads_the_gap_and_says_which_variant_has_no_model():
    bench = {"comparisons": {"new instances": {
        "raw_sft": {"mean": 0.2},
        "pipeline_sft": {"diff": 0.4, "low": 0.3, "high": 0.5, "mean": 0.6},
        "raw_clean": {"diff": 0.1, "low": -0.02, "high": 0.2, "mean": 0.3},
        "pipeline_llm": {"left_out": "pipeline SFT, LLM teacher: kept 0 of 1000 training rows"}}}}
    table = ablations.ablation_table(bench, "new instances").set_index("variant")
    assert list(table.index) == ["raw_clean", "pipeline_llm", "pipeline_sft"]
    assert table.loc["raw_clean", "share of the gap"] == pytest.approx(0.25)
    assert table.loc["raw_clean", "95% interval"] == "[-0.020, +0.200]"
    assert "kept 0 of 1000" in table.loc["pipeline_llm", "95% interval"]
    ax = ablations.plot_ablations(bench)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["raw_clean", "pipeline_llm", "pipeline_sft"]
