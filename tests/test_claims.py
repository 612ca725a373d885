"""The outcome claims the lessons assert hold with margin over seeds, not for one machine's run.

docs/claims.md lists every outcome a lesson states: kind (a) is asserted in the lesson and checked here by
running the experiment's library function under seeds 0-4 (the toys of lesson 09: seconds each), or, where
one run takes minutes (SFT, the drill), by reading the benchmark that ran it over several seeds and both
precisions; kind (b) is printed from the run beside the benchmark's verdict and never asserted. Another
seed is the stand-in for another CPU here: fp32 kernels differ by instruction set, so another machine
trains another model from the same seed.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from course_lib.paths import repo_root

SEEDS = range(5)


# --- lesson 09: the toys run in seconds, so every seed is run here ----------------------------------

@pytest.mark.parametrize("seed", SEEDS)
def test_09_reference_guidance_saves_rollouts_and_keeps_novel_successes(seed):
    from course_lib.agentic.trajectories import guidance_experiment

    st = guidance_experiment(seed=seed, n=400)
    assert st["plain sampling"]["novel_successes"] >= 5, (seed, st)
    # "stop + resample" generates fewer steps per success than plain sampling, by at least 10 %
    assert st["stop + resample"]["steps_per_success"] < 0.9 * st["plain sampling"]["steps_per_success"], (seed, st)


@pytest.mark.parametrize("seed", SEEDS)
def test_09_the_gate_cuts_long_trajectories_more_and_strata_keep_them(seed):
    from course_lib.agentic.distill import truncation_by_length

    t = truncation_by_length(seed=seed)
    assert t["survive_longest"] < t["survive_rest"] - 0.1, (seed, t["survive_longest"], t["survive_rest"])
    long_set = set(t["longest"].tolist())
    assert all(sum(t["trained"][i] for i in b if i in long_set) > 0 for b in t["stratified_batches"]), seed


@pytest.mark.parametrize("seed", SEEDS)
def test_09_hindsight_critic_lowers_variance_and_moves_the_blame(seed):
    """Lesson 09's text on ``advantage_quality``: hindsight's advantages vary less than history's at every step
    (by little at the first step, where both critics see the same state), history blames the edits when the
    file was wrong and hindsight does not, and the ``outcome`` critic's advantages are zero."""
    from course_lib.agentic.critic import ToyTask, advantage_quality

    q = advantage_quality(ToyTask(), n_fit=20_000, n_eval=4_000, seed=seed)
    hist, hind = np.asarray(q["history"]["adv_std"]), np.asarray(q["hindsight"]["adv_std"])
    assert np.all(hind < hist), (seed, hist, hind)
    assert np.all(hind[1:] < hist[1:] - 0.02), (seed, hist, hind)
    assert q["history"]["edit_adv_wrong_file"] < -0.05 < q["hindsight"]["edit_adv_wrong_file"], seed
    assert abs(q["hindsight"]["edit_adv_wrong_file"]) < 0.01, seed
    assert np.allclose(q["outcome"]["adv_std"], 0), seed


@pytest.mark.parametrize("seed", SEEDS)
def test_09_ppo_critics_over_seed_blocks(seed):
    """Lesson 09 runs ``ppo_experiment`` on seeds ``SEED * ppo_seeds …``: every block of seeds must give the
    asserted outcomes — hindsight's advantages vary less than history's, the clip binds only at lr 10, and
    the ``outcome`` critic learns slower than ``history`` (its paired 95 % interval below 0)."""
    from course_lib.agentic.critic import CRITICS, ToyTask, paired_difference, ppo_experiment
    from course_lib.profiles import get_profile

    A = get_profile("ci").agentic
    task = ToyTask(edit_steps=A.ppo_edit_steps)
    for name, lr in {"lr 0.3": 0.3, "lr 10": 10.0}.items():
        res = ppo_experiment(task, CRITICS, seeds=A.ppo_seeds, iterations=A.ppo_iterations, lr=lr,
                             first_seed=seed * A.ppo_seeds)
        assert res["hindsight"]["adv_std_mean"] < 0.8 * res["history"]["adv_std_mean"], (seed, name)
        d = paired_difference(res["outcome"]["auc"], res["history"]["auc"])
        assert d["verdict"] == "b higher", (seed, name, d)
        clipped = res["history"]["clipped"]
        if lr < 1:
            assert clipped.max() < 0.01, (seed, clipped.max())
        else:
            assert clipped[:, :5].mean() > 0.02, (seed, clipped[:, :5].mean())


@pytest.mark.parametrize("seed", SEEDS)
def test_09_cold_start_over_seeds(seed):
    """Lesson 09's cold start on lesson 04's tiny model (built here when the cache lacks it, as lesson 04 would):
    cross-entropy training on the teacher's samples lowers the student's held-out cross-entropy and reverse KL.
    Measured on AVX-512: drops of 0.17-0.44 nats and 0.17-0.33 over seeds 0-4; the margin asserted is 0.05."""
    import torch

    from course_lib.agentic import load_lesson_model
    from course_lib.agentic.distill import cold_start, mean_reverse_kl, sample_continuations, sequence_cross_entropy, weaken
    from course_lib.profiles import get_profile

    A = get_profile("ci").agentic
    torch.manual_seed(seed)
    teacher, _ = load_lesson_model("ci", attn="eager", seed=seed, build=True)
    assert getattr(teacher, "lesson_model_kind", "") == "tiny"
    vocab = teacher.config.vocab_size
    prompts = torch.randint(0, vocab, (8, 4), generator=torch.Generator().manual_seed(seed))
    held = sample_continuations(teacher, torch.randint(0, vocab, (16, 4), generator=torch.Generator().manual_seed(seed + 99)),
                                A.distill_new_tokens, seed=seed + 99)
    student = weaken(teacher, noise=A.distill_noise, seed=seed + 1)
    ce0, kl0 = sequence_cross_entropy(student, held, 4), mean_reverse_kl(student, teacher, held, 4)
    cold_start(student, teacher, prompts, steps=A.distill_steps // 2, max_new_tokens=A.distill_new_tokens,
               lr=A.distill_lr, seed=seed)
    ce1, kl1 = sequence_cross_entropy(student, held, 4), mean_reverse_kl(student, teacher, held, 4)
    assert ce1 < ce0 - 0.05 and kl1 < kl0 - 0.05, (seed, ce0, ce1, kl0, kl1)


@pytest.mark.parametrize("seed", SEEDS)
def test_09_rl_plus_opd_is_right_more_often_than_opd_and_closer_to_the_teacher_than_rl(seed):
    from course_lib.agentic.distill import rl_opd_bandit

    teacher = [0.05, 0.60] + [0.35 / 6] * 6
    correct = [1, 1, 0, 0, 0, 0, 0, 0]
    variants = {"RL only": dict(opd_coef=0.0), "OPD only": dict(use_rl=False), "RL + OPD": dict()}
    end = {}
    for name, kw in variants.items():
        runs = [rl_opd_bandit(teacher, correct, group=16, seed=seed * 5 + s, **kw) for s in range(5)]
        end[name] = (np.mean([r["success"][-1] for r in runs]), np.mean([r["kl"][-1] for r in runs]))
    assert end["RL + OPD"][0] > end["OPD only"][0] + 0.05, (seed, end)
    assert end["RL + OPD"][1] < end["RL only"][1] - 0.05, (seed, end)


# --- lesson 06: best-of-n on the candidate pool ------------------------------------------------------

@pytest.fixture(scope="module")
def judged_pool():
    """Lesson 06's candidate pool judged as the lesson judges it (visible and hidden tests, the profile's
    sizes and backend): which candidates pass does not depend on the seed; the preference scores do."""
    import pandas as pd

    from course_lib.evaluation import humaneval
    from course_lib.evaluation.sandbox import preferred_backend, run_many
    from course_lib.profiles import get_profile

    S = get_profile("ci").sandbox
    problems = {p["task_id"]: p for p in humaneval.load_humaneval()}
    pool = pd.DataFrame(humaneval.load_candidate_pool())
    task_ids = list(dict.fromkeys(pool.task_id))[: S.pool_problems]
    pool = pool[pool.task_id.isin(task_ids)].groupby("task_id").head(S.pool_candidates).reset_index(drop=True)
    backend = preferred_backend(S.backend)
    for col, tests in (("visible_ok", humaneval.visible_tests), ("hidden_ok", humaneval.hidden_tests)):
        items = [{"code": r.code, "tests": tests(problems[r.task_id]), "timeout_s": S.loop_timeout_s} for r in pool.itertuples()]
        pool[col] = [r.passed for r in run_many(items, backend=backend, workers=S.workers, progress=False)]
    return S, pool


@pytest.mark.parametrize("seed", SEEDS)
def test_06_best_of_n_gains_more_than_a_tenth_over_one_sample(judged_pool, seed):
    """Lesson 06 asserts that rejection sampling with the largest n gains more than 0.1 over one sample (its
    Monte-Carlo estimate, the lesson's rounds); here under seeds 0-4, with the lesson's code path. Measured
    2026-12-07 (numpy, the same on every CPU): gains 0.325-0.380 (one sample 0.53-0.59, n = 8 0.88-0.92)."""
    from course_lib.evaluation import humaneval

    S, pool = judged_pool
    pool = pool.assign(score=humaneval.preference_scores(pool.hidden_ok, seed=seed, bonus=1.0))
    groups = [g.reset_index(drop=True) for _, g in pool.groupby("task_id", sort=False)]
    rounds = max(10, S.sampling_rounds // 10)
    first, last = S.best_of_n[0], S.best_of_n[-1]
    one = humaneval.best_of_n(groups, first, 1.0, rounds, seed + first)["single sample"]
    best = humaneval.best_of_n(groups, last, 1.0, rounds, seed + last)["rejection sampling (visible tests)"]
    assert best - one > 0.1 + 0.05, (seed, one, best)     # the lesson's 0.1, with a margin of 0.05


# --- lessons 05 and 07: a run takes minutes, so the benchmarks' recorded seeds are checked ----------

def test_05_sft_demo_learns_in_every_recorded_seed_and_precision():
    """Lesson 05 asserts that SFT lowers the held-out answer loss by more than 30 % and that more answers end
    with <|im_end|> after SFT; benchmarks/bench_sft_demo.py ran the lesson's demo over seeds 0-4 with bf16
    on and off (its file must exist, and the claims must hold with margin in every row); seeds 0-2, as a run
    takes a minute or more."""
    from course_lib.training.bench_results import benchmark_result

    res = benchmark_result("bench_sft_demo")
    assert res is not None, "run: PYTHONPATH=$PWD python benchmarks/bench_sft_demo.py --json benchmarks/results/bench_sft_demo.json"
    rows = res["runs"]
    assert {(r["seed"], r["bf16"]) for r in rows} >= {(0, True), (0, False)}, rows   # seed 0 in both precisions at least
    for r in rows:
        assert r["loss_after"] < 0.6 * r["loss_before"], r          # the lesson asserts < 0.7 x
        assert r["stopped_after"] >= r["stopped_before"] + 3, r     # the lesson asserts >


def test_07_sft_beats_the_base_model_in_every_recorded_seed_and_precision():
    """Lesson 07 asserts SFT adds more than 0.3 to the closed-fence rate and Pass@1, and more than 0.2 to test
    pass@1 on new instances, over the base model (whose test pass@1 is at most 0.05): every seed of every
    precision in bench_drill_pipeline.json must clear that with margin (0.4, and 0.3 for test pass@1: on issue
    35's eval parts, recorded 2026-12-07 in fp32, +0.552 / +0.352 / +0.428 over seeds 0-2)."""
    from course_lib.training.bench_results import benchmark_result

    res = benchmark_result("bench_drill_pipeline")
    assert res is not None
    for precision, bench in res["precisions"].items():
        assert len(bench["results"]) >= 3, precision
        for r in bench["results"]:
            base, after = r["metrics"]["base"], r["metrics"]["pipeline_sft"]
            for key, margin in (("closed-fence rate", 0.4), ("Pass@1", 0.4), ("test pass@1 (new instances)", 0.3)):
                assert after[key] > base[key] + margin, (precision, r["seed"], key, base[key], after[key])
            assert base["test pass@1 (new instances)"] <= 0.05, (precision, r["seed"])


def test_07_10_recorded_verdicts_follow_from_the_per_prompt_outcomes():
    """Every "A ahead of B" in bench_drill_pipeline.json and bench_rl.json comes from a paired 95 % interval that
    excludes 0, recomputed here from the per-prompt files beside the JSON; a benchmark still in the format before
    per-prompt outcomes is named with the command that records it (issue 35)."""
    from course_lib.drill import scoreboard
    from course_lib.evaluation.paired import NO_DIFFERENCE
    from course_lib.training.bench_results import benchmark_result

    results = repo_root() / "benchmarks" / "results"
    old = []
    drill = benchmark_result("bench_drill_pipeline") or {}
    for precision, bench in drill.get("precisions", {}).items():
        if not all(r.get("per_prompt") for r in bench["results"]):
            old.append(f"bench_drill_pipeline ({precision}): python benchmarks/bench_drill_pipeline.py --precisions "
                       f"{precision} --json benchmarks/results/bench_drill_pipeline.json")
            continue
        a = scoreboard.benchmark_per_prompt(bench["results"], "pipeline_sft", results)
        b = scoreboard.benchmark_per_prompt(bench["results"], "raw_sft", results)
        for key, rec in bench["comparisons"].items():
            c = scoreboard.paired_comparison(a, b, key, "pipeline SFT", "raw SFT")
            assert c["verdict"] == rec["verdict"], (precision, key, c["verdict"], rec["verdict"])
            assert (" ahead of " in c["verdict"]) == (c["low"] > 0 or c["high"] < 0), c["verdict"]
            assert c["verdict"].startswith(NO_DIFFERENCE) or c["low"] > 0 or c["high"] < 0
    rl = benchmark_result("bench_rl") or {}
    if rl and "chosen" not in rl:
        old.append("bench_rl: python benchmarks/bench_rl.py --json benchmarks/results/bench_rl.json")
    elif rl:
        sft = scoreboard.benchmark_per_prompt([{"seed": "sft", "per_prompt": {"sft": rl["pipeline_sft"]["per_prompt"]["eval"]}}],
                                              "sft", results)[0]
        for name, summ in rl["summary"].items():
            runs = [{"seed": r["seed"], "per_prompt": {"rl": r["rl"]["per_prompt"]["eval"]}}
                    for r in rl["runs"] if r["config"] == name]
            a = scoreboard.benchmark_per_prompt(runs, "rl", results)
            for key, rec in summ["comparisons"].items():
                c = scoreboard.paired_comparison(a, [sft] * len(a), key, "RL (GRPO)", "pipeline SFT")
                assert c["verdict"] == rec["verdict"], (name, key)
        assert rl["selection"]["chosen"] == rl["chosen"] and rl["chosen"] == max(
            rl["summary"], key=lambda n: rl["summary"][n]["selection test pass@1"])   # chosen on the selection split
    if old:
        pytest.skip("benchmarks in the format before per-prompt outcomes; record them with:\n  " + "\n  ".join(old))


# --- the list itself ---------------------------------------------------------------------------------

def test_claims_doc_covers_every_lesson_and_names_real_tests():
    root = repo_root()
    text = (root / "docs" / "claims.md").read_text(encoding="utf-8")
    for lesson in (p.name[:2] for p in sorted((root / "lessons").glob("[0-9][0-9]_*.py"))):
        assert re.search(rf"^\| {lesson} \|", text, re.M), f"docs/claims.md has no row for lesson {lesson}"
    named = set(re.findall(r"`(tests/test_\w+\.py)::(\w+)`", text))
    assert named, "docs/claims.md names the tests that check kind (a)"
    for path, name in named:
        source = (root / path).read_text(encoding="utf-8")
        assert re.search(rf"^def {name}\(", source, re.M), f"docs/claims.md names {path}::{name}, which does not exist"
