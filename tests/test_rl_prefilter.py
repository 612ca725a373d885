"""The KAT notes' prompt filter before RL (issue 35's lever; course_lib.rl.prefilter): the rule, the sandbox's
verdicts on known answers, the early stop, the cache per model, and train_grpo's clear error when too few prompts
survive. The answers in the first tests are written out (a right and a wrong body per prompt) so the rule is
checked on known outcomes; the last test samples a real (random) tiny model."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import _drill_standins as standins  # noqa: E402

from course_lib.rl import prefilter  # noqa: E402
from course_lib.rl.prefilter import model_fingerprint, prefilter_prompts, split_by_pass_count  # noqa: E402
from course_lib.rl.rollouts import RLPrompt, split_tests  # noqa: E402
from course_lib.rl.settings import rl_settings  # noqa: E402

PREFIX = "```python\ndef add(a, b):\n"
TESTS = "assert add(2, 3) == 5\nassert add(-1, 1) == 0\n"
RIGHT, WRONG = "    return a + b\n```", "    return a * b\n```"
# per prompt: the answers its K = 4 samples give
ANSWERS = {"easy": [RIGHT] * 4, "hard": [WRONG] * 4, "mixed": [RIGHT, WRONG, WRONG, RIGHT], "mixed2": [WRONG, RIGHT] * 2}


def require_bwrap() -> None:
    from tests._sandbox_support import ensure_backend

    ensure_backend("bwrap")


def _prompts(keys=ANSWERS) -> list[RLPrompt]:
    return [RLPrompt(key=k, instruction=f"add ({k})", prefix=PREFIX, text=f"... {k}", tests=tuple(split_tests(TESTS)),
                     entry_point="add") for k in keys]


class Sampler:
    """Returns each prompt's written answers; counts the prompts it was asked for."""

    def __init__(self):
        self.asked: list[str] = []

    def __call__(self, model_dir, prompts, *, n, temperature, max_new_tokens, seed, batch_size, threads):
        self.asked += [p.key for p in prompts]
        return [ANSWERS[p.key.split("-")[0]][:n] for p in prompts]


def _model(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


def test_the_rule_keeps_mixed_groups_only_and_refuses_impossible_counts():
    assert split_by_pass_count({"a": 0, "b": 8, "c": 3, "d": 1, "e": 7}, 8) == {
        "kept": ["c", "d", "e"], "all_pass": ["b"], "all_fail": ["a"]}
    with pytest.raises(ValueError, match="prompt z: 9 passes out of 8"):
        split_by_pass_count({"z": 9}, 8)
    for bad in (1, -2):
        with pytest.raises(ValueError, match="prefilter_samples"):
            rl_settings("ci", prefilter_samples=bad)
    with pytest.raises(ValueError, match="top_entropy_quantile"):
        rl_settings("ci", top_entropy_quantile=1.5)


def test_the_sandbox_decides_what_is_kept_and_a_second_run_reads_the_cache(tmp_path):
    require_bwrap()
    model = _model(tmp_path)
    s = rl_settings("ci", prefilter_samples=4, judge_workers=1)
    sampler = Sampler()
    cache = tmp_path / "pre.json"
    kept, report = prefilter_prompts(model, _prompts(), s, cache_path=cache, sampler=sampler)
    assert sorted(p.key for p in kept) == ["mixed", "mixed2"]
    assert (report["all_pass"], report["all_fail"], report["kept"], report["sampled_prompts"]) == (1, 1, 2, 4)
    assert report["pass_rate"] == pytest.approx((4 + 0 + 2 + 2) / 16) and report["cached"] is False
    assert sorted(sampler.asked) == sorted(ANSWERS)

    def refuse(*a, **k):
        raise AssertionError("the cache should have answered")

    again, rep2 = prefilter_prompts(model, _prompts(), s, cache_path=cache, sampler=refuse)
    assert [p.key for p in again] == [p.key for p in kept] and rep2["cached"] is True
    # another model (other bytes) or another K: sampled again
    (model / "model.safetensors").write_bytes(b"other weights")
    assert model_fingerprint(model) != json.loads(cache.read_text())["key"]["model"]
    _, rep3 = prefilter_prompts(model, _prompts(), s, cache_path=cache, sampler=Sampler())
    assert rep3["cached"] is False


def test_sampling_stops_once_the_run_has_its_prompts(tmp_path, monkeypatch):
    require_bwrap()
    monkeypatch.setattr(prefilter, "CHUNK", 1)
    sampler = Sampler()
    keys = ["easy", "hard", "mixed", "mixed2"] * 3
    prompts = [RLPrompt(key=f"{k}-{i}", instruction=k, prefix=PREFIX, text=k, tests=tuple(split_tests(TESTS)),
                        entry_point="add") for i, k in enumerate(keys)]
    kept, report = prefilter_prompts(_model(tmp_path), prompts, rl_settings("ci", prefilter_samples=4, judge_workers=1),
                                     needed=2, sampler=sampler)
    assert len(kept) == 2 and report["sampled_prompts"] == len(sampler.asked) < len(prompts)
    assert report["needed"] == 2 and report["pool"] == len(prompts)


def test_train_grpo_says_when_the_filter_leaves_too_few_prompts(tmp_path):
    """A random tiny model (real samples, real sandbox): every sample fails, so nothing is kept, and training
    stops before the TRL worker starts with the counts and what to do."""
    require_bwrap()
    from course_lib.paths import assets_dir
    from course_lib.rl import trainer, trl_env

    if trl_env.trl_python()[0] is None:
        pytest.skip("no TRL environment (train_grpo checks it first)")
    rows = [json.loads(line) for line in open(assets_dir("tiny_codes", "tiny_codes_sample.jsonl"))][:50]
    model = standins.make_tiny_model(tmp_path / "m", [r["prompt"] + "\n" + r["response"] for r in rows])
    train_rows = [{"row_id": str(i), "instruction": f"Write `add(a, b)` returning the sum ({i}).", "output": "..."}
                  for i in range(3)]
    tests = {i: {"idx": i, "tests": TESTS, "signature": "def add(a, b):", "entry_point": "add"} for i in range(3)}
    s = rl_settings("ci", steps=1, group_size=2, prompts_per_step=2, max_completion_length=8, threads=1,
                    judge_workers=1, prefilter_samples=2, passk_batch_size=4)
    with pytest.raises(ValueError, match=r"the prefilter kept 0 of 3 prompts .*all fail 3"):
        trainer.train_grpo(model, train_rows, tests, tmp_path / "out" / "rl", s)
    cached = list((tmp_path / "out" / "rl_prefilter").glob(f"{model_fingerprint(model)}_k2_seed0.json"))
    assert len(cached) == 1


def test_bench_rl_reuses_runs_only_from_the_same_start_model(tmp_path):
    """``bench_rl.py --reuse``: an earlier result's runs join only when its pipeline_sft answered every eval
    prompt as this run's did (else the pairing would compare different start models)."""
    from benchmarks.bench_rl import reused_runs
    from course_lib.drill.outputs import write_per_prompt

    recs = [{"id": i, "part": "new instances", "half": "", "passed": i % 2 == 0} for i in range(4)]
    old = tmp_path / "old"
    write_per_prompt(recs, old / "bench" / "sft.jsonl")
    write_per_prompt(recs, old / "bench" / "seed0" / "pass_k8.jsonl")
    runs = [{"config": c, "seed": 0, "rl": {"per_prompt": {"eval": f"bench/seed0/{c}.jsonl"}}}
            for c in ("pass_k8", "pass_k16x4")]
    (old / "bench.json").write_text(json.dumps({"pipeline_sft": {"per_prompt": {"eval": "bench/sft.jsonl"}},
                                                "runs": runs}))
    new = tmp_path / "new"
    write_per_prompt(recs, new / "levers" / "sft.jsonl")
    sft = {"per_prompt": {"eval": "levers/sft.jsonl"}}
    got = reused_runs(old / "bench.json", ["pass_k8"], sft, new)
    assert [r["config"] for r in got] == ["pass_k8"]
    assert (new / got[0]["rl"]["per_prompt"]["eval"]).resolve() == (old / "bench" / "seed0" / "pass_k8.jsonl").resolve()
    write_per_prompt([dict(r, passed=not r["passed"]) if r["id"] == 0 else r for r in recs], new / "levers" / "sft.jsonl")
    with pytest.raises(SystemExit, match="answered the eval prompts differently"):
        reused_runs(old / "bench.json", ["pass_k8"], sft, new)
