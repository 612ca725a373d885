"""RL's reward path, tested where it breaks (issue 34): rows whose tests differ, every reward kind, a
sandbox error left unscored, groups without signal counted on rewards (not pass flags), the trainer
sending rewards (not pass flags) to the completion they belong to, every GRPOConfig field the settings
builder passes reaching the worker, no prompt or reward from an evaluation row, the CLI never
overwriting the drill's step-6 log, and the audit on fresh inputs."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import _drill_standins as standins  # noqa: E402

from course_lib.evaluation.sandbox import SandboxResult  # noqa: E402
from course_lib.rl import audit, rollouts, trainer  # noqa: E402
from course_lib.rl.rollouts import RLPrompt, RolloutJudge, group_stats, split_tests  # noqa: E402
from course_lib.rl.settings import RLSettings, rl_settings, trl_config  # noqa: E402

PREFIX = "```python\ndef add(a, b):\n"
TESTS_A = "assert add(2, 3) == 5\nassert add(-1, 1) == 0\nassert add(0, 0) == 0\nassert add(10, 5) == 15\n"
# another row, same def line, other tests — and a setup line that is not a test
TESTS_B = "from math import floor\nassert add(5, 3) == 2\nassert add(0, 0) == 0\nassert add(7, 7) == 0\nassert add(1, 0) == 1\n"
PLUS, MINUS, ZERO = "    return a + b\n```", "    return a - b\n```", "    return 0\n```"
# (key, completion) -> (pass, fraction, lecture); A: minus passes add(0,0) (1/4); B: plus passes 2 of 4 planned
EXPECTED = {("1", PLUS): (1.0, 1.0, 1.0), ("1", MINUS): (0.0, 0.25, 0.25),
            ("2", PLUS): (0.0, 0.5, 0.5), ("2", MINUS): (1.0, 1.0, 1.0)}
KINDS = ("pass", "fraction", "lecture")


def require_bwrap() -> None:
    from tests._sandbox_support import ensure_backend

    ensure_backend("bwrap")


def _prompts() -> list[RLPrompt]:
    return [RLPrompt(key=k, instruction="add", prefix=PREFIX, text="...", tests=tuple(split_tests(t)), entry_point="add")
            for k, t in (("1", TESTS_A), ("2", TESTS_B))]


@pytest.mark.parametrize("kind", KINDS)
def test_rows_whose_tests_differ_get_their_own_rewards_for_every_kind(kind):
    require_bwrap()
    judge = RolloutJudge(_prompts(), rl_settings("ci", reward=kind, judge_workers=2))
    keys = ["1", "2", "2", "1", "1", "2"]          # interleaved: a reward sent to the wrong rollout shows
    comps = [PLUS, PLUS, MINUS, MINUS, PLUS, MINUS]
    out = judge.score(keys, comps)
    want = [EXPECTED[(k, c)][KINDS.index(kind)] for k, c in zip(keys, comps)]
    assert out["rewards"] == pytest.approx(want), (kind, out["rewards"], want)
    assert out["passed"] == [EXPECTED[(k, c)][0] == 1.0 for k, c in zip(keys, comps)]
    # the same program for two prompts is two runs (a dedup key without the prompt would merge them)
    assert out["stats"]["unique_programs"] == 4
    assert out["statuses"] == ["passed", "failed", "passed", "failed", "passed", "passed"]
    assert out["programs"][0] == "def add(a, b):\n    return a + b\n"


def test_groups_without_signal_are_counted_on_rewards_not_pass_flags():
    require_bwrap()
    judge = RolloutJudge(_prompts(), rl_settings("ci", reward="fraction", judge_workers=2))
    out = judge.score(["1", "1", "2", "2"], [MINUS, ZERO, PLUS, PLUS])   # A: 0.25 vs 0.5 (both fail); B: 0.5, 0.5
    assert out["rewards"] == [0.25, 0.5, 0.5, 0.5] and not any(out["passed"])
    assert out["stats"]["groups_without_signal"] == 1 and out["stats"]["groups_all_fail"] == 1
    stats = group_stats(["a", "a", "b", "b"], [0.5, 0.5, 0.0, 1.0], [False, False, False, True])
    assert stats["groups_without_signal"] == 1 and stats["groups_flat_mixed"] == 0


def test_a_sandbox_error_is_unscored_not_zero(monkeypatch):
    judge = RolloutJudge(_prompts(), rl_settings("ci", reward="lecture"))
    fake = {"def add(a, b):\n    return a + b\n": SandboxResult("sandbox_error", detail="bwrap died"),
            "def add(a, b):\n    return a - b\n": SandboxResult("failed", tests=["assert", "assert", "ok", "assert"],
                                                                planned=[True] * 4)}
    monkeypatch.setattr(judge, "_run", lambda items: [fake[i["code"]] for i in items])
    out = judge.score(["1", "1"], [PLUS, MINUS])
    assert out["rewards"] == [None, 0.25] and out["passed"] == [False, False]
    assert out["stats"]["unscored"] == 1 and out["stats"]["reward_mean"] == 0.25


def test_every_reward_kind_agrees_with_the_one_reward_module():
    from course_lib.evaluation.rewards import REWARD_STATUSES, reward_of_result, shaped_reward
    from course_lib.rl.mechanics import rl_reward

    for kind in KINDS:
        for status in REWARD_STATUSES:
            for passed, total in ((0, 0), (0, 3), (2, 3), (3, 3)):
                r = SandboxResult(status, tests=["ok"] * passed + ["assert"] * (total - passed)) if status != "no_code" else None
                want = shaped_reward(kind, status, passed, total)
                assert rl_reward(kind, status, passed, total) == want
                if r is not None:
                    assert rollouts.reward_of(kind, r) == reward_of_result(kind, r) == want, (kind, status, passed, total)
    assert rl_reward("pass", "passed", 0, 0) == rollouts.reward_of("pass", SandboxResult("passed")) == 1.0
    for status in ("memory_limit", "output_limit", "timeout"):
        assert rl_reward("pass", status, 3, 3) == 0.0 and rl_reward("lecture", status, 3, 3) == -0.5


# --- every GRPOConfig field the settings builder passes ---------------------------------------------------

# RLSettings field -> the GRPOConfig keys it sets, and a value that differs from every profile's
TRL_FIELDS = {
    "steps": (("max_steps",), 7), "group_size": (("num_generations",), 3), "prompts_per_step": ((), 5),
    "steps_per_generation": (("steps_per_generation",), 3), "num_iterations": (("num_iterations",), 2),
    "learning_rate": (("learning_rate",), 3.3e-5), "lr_scheduler_type": (("lr_scheduler_type",), "cosine"),
    "warmup_steps": (("warmup_steps",), 3), "max_grad_norm": (("max_grad_norm",), 0.7), "beta": (("beta",), 0.03),
    "epsilon": (("epsilon",), 0.13), "epsilon_high": (("epsilon_high",), 0.31), "loss_type": (("loss_type",), "grpo"),
    "scale_rewards": (("scale_rewards",), "batch"), "temperature": (("temperature",), 0.77),
    "max_completion_length": (("max_completion_length",), 33),
    "mask_truncated_completions": (("mask_truncated_completions",), True), "seed": (("seed", "data_seed"), 11),
    "bf16": (("bf16",), True), "use_cpu": (("use_cpu",), False),
    "top_entropy_quantile": (("top_entropy_quantile",), 0.2),
}
VLLM_FIELDS = {"vllm_mode": "server", "vllm_gpu_memory_utilization": 0.41, "vllm_importance_sampling_correction": False,
               "vllm_importance_sampling_mode": "sequence_mask", "vllm_importance_sampling_clip_min": 0.3,
               "vllm_importance_sampling_clip_max": 3.0}


def test_every_field_the_settings_builder_passes_comes_from_the_settings():
    base = rl_settings("ci")
    cfg = trl_config(base, "/tmp/x")
    for field, (keys, value) in TRL_FIELDS.items():
        changed = trl_config(dataclasses.replace(base, **{field: value}), "/tmp/x")
        assert changed != cfg, field
        for key in keys:
            assert changed[key] == value, (field, key)
    assert trl_config(dataclasses.replace(base, prompts_per_step=5), "/x")["per_device_train_batch_size"] == 5 * base.group_size
    on = dataclasses.replace(base, use_vllm=True)
    for field, value in VLLM_FIELDS.items():
        assert trl_config(dataclasses.replace(on, **{field: value}), "/x")[field] == value, field
    known = set(TRL_FIELDS) | set(VLLM_FIELDS) | {"use_vllm"}
    not_trl = {"reward", "threads", "omp_wait_policy", "judge_workers", "judge_timeout_s", "judge_memory_mb",
               "sandbox_backend", "sandbox_configured", "worker_timeout_s", "passk_samples", "passk_temperature", "passk_batch_size",
               "prefilter_samples"}
    assert {f.name for f in dataclasses.fields(RLSettings)} - known - not_trl == set(), "a setting no test covers"


def test_grpo_config_accepts_every_key_the_builder_passes():
    """In the TRL environment (skipped without it): GRPOConfig(**trl_config(...)) keeps every value."""
    from course_lib.rl.trl_env import trl_python

    python, why = trl_python()
    if python is None:
        pytest.skip(f"no TRL environment here: {why}")
    for settings in (rl_settings("ci"), dataclasses.replace(rl_settings("ci"), use_vllm=True)):
        cfg = trl_config(settings, "/tmp/course-grpo-probe")
        cfg = {**cfg, "use_cpu": True, "bf16": False}
        probe = textwrap.dedent("""
            import json, sys
            from trl import GRPOConfig
            cfg = json.loads(sys.argv[1])
            args = GRPOConfig(**cfg)
            bad = {k: [v, getattr(args, k, '<missing>')] for k, v in cfg.items() if getattr(args, k, '<missing>') != v}
            print(json.dumps(bad))
        """)
        out = subprocess.run([python, "-c", probe, json.dumps(cfg)], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        bad = json.loads(out.stdout.strip().splitlines()[-1])
        bad.pop("output_dir", None)
        if bad.get("report_to") == ["none", []]:   # TRL normalises "none" to no reporters
            bad.pop("report_to")
        assert not bad, bad


# --- the trainer sends each completion its own reward -----------------------------------------------------

FAKE_WORKER = '''
import json, os, shutil, sys
job = json.load(open(sys.argv[1]))
def tell(m):
    sys.stdout.write(json.dumps(m) + "\\n"); sys.stdout.flush()
tell({"op": "ready", "wall_s": 0.0, "cpu_s": 0.0})
tell({"op": "score", "keys": KEYS, "completions": COMPLETIONS})
reply = json.loads(sys.stdin.readline())
shutil.copytree(job["model_dir"], job["save_dir"])
json.dump({"job": job, "reply": reply}, open(job["save_dir"] + ".seen.json", "w"))
tell({"op": "log", "step": 1, "logs": {"loss": 0.0}, "wall_s": 1.0, "cpu_s": 1.0})
tell({"op": "done", "cpu_s": 1.0, "seconds": 1.0, "threads": 1, "versions": {}})
'''


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from course_lib.paths import assets_dir

    rows = [json.loads(line) for line in open(assets_dir("tiny_codes", "tiny_codes_sample.jsonl"))][:100]
    return standins.make_tiny_model(tmp_path_factory.mktemp("rl-path") / "model",
                                    [r["prompt"] + "\n" + r["response"] for r in rows])


def test_the_trainer_answers_each_completion_with_its_own_fraction_reward(tiny_model, tmp_path, monkeypatch):
    require_bwrap()
    keys, comps = ["1", "1", "2", "2"], [PLUS, MINUS, PLUS, MINUS]
    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER.replace("KEYS", json.dumps(keys)).replace("COMPLETIONS", json.dumps(comps)))
    monkeypatch.setattr(trainer, "WORKER", script)
    monkeypatch.setattr(trainer, "trl_python", lambda: (sys.executable, "a stand-in worker"))
    rows = [{"row_id": "1", "instruction": "Add the numbers."}, {"row_id": "2", "instruction": "Subtract them."}]
    hidden = {1: {"tests": TESTS_A, "signature": "def add(a, b):"}, 2: {"tests": TESTS_B, "signature": "def add(a, b):"}}
    s = rl_settings("ci", reward="fraction", group_size=2, prompts_per_step=2, steps=1, judge_workers=2)
    res = trainer.train_grpo(tiny_model, rows, hidden, tmp_path / "rl", s)
    seen = json.loads((tmp_path / "rl" / "model.seen.json").read_text())
    assert seen["reply"]["rewards"] == [1.0, 0.25, 0.5, 1.0]          # fraction rewards, in rollout order
    job_cfg = dict(seen["job"]["trl"])
    assert job_cfg.pop("output_dir") and job_cfg == {k: v for k, v in trl_config(s, "x").items() if k != "output_dir"}
    log = json.loads(Path(res["train_log"]).read_text())
    assert log[0]["groups_without_signal"] == 0 and log[0]["reward_mean"] == pytest.approx(2.75 / 4)
    saved = audit.load_rollouts(res["rollouts_file"])
    assert [(r["step"], r["key"], r["reward"], r["status"]) for r in saved] == [
        (1, "1", 1.0, "passed"), (1, "1", 0.25, "failed"), (1, "2", 0.5, "failed"), (1, "2", 1.0, "passed")]
    assert saved[0]["program"] == "def add(a, b):\n    return a + b\n"


# --- evaluation rows and the drill's step-6 log ---------------------------------------------------------

def _drill_folder(root: Path) -> None:
    from course_lib.drill.outputs import DrillPaths, write_json_output

    paths = DrillPaths.under(root)
    paths.make()
    paths.model_for("pipeline_sft").mkdir(parents=True)
    write_json_output(paths.model_record("pipeline_sft"), {"model_path": "/m", "rows": 1}, {})
    write_json_output(paths.train_json, [{"idx": 3, "tests": TESTS_A}, {"idx": 9, "tests": TESTS_B}], {})
    write_json_output(paths.codegen_json, [{"row_id": "3", "instruction": "i"}, {"row_id": "9", "instruction": "j"}], {})
    write_json_output(paths.eval_json, [{"idx": 9, "tests": TESTS_B}], {})


def test_no_rl_prompt_or_reward_comes_from_an_evaluation_row(tmp_path, tiny_model):
    from course_lib.evaluation.generation import load_tokenizer
    from course_lib.rl.__main__ import drill_inputs

    _drill_folder(tmp_path)
    got = drill_inputs(tmp_path)
    assert list(got["hidden_tests"]) == [3]                             # row 9 is an evaluation row
    hidden = {k: dict(v, signature="def add(a, b):") for k, v in got["hidden_tests"].items()}
    prompts, dropped = rollouts.build_rl_prompts(got["rows"], hidden, load_tokenizer(tiny_model))
    eval_keys = {str(r["idx"]) for r in got["eval_rows"]}
    assert [p.key for p in prompts] == ["3"] and not eval_keys & {p.key for p in prompts}
    assert dropped["no hidden tests"] == 1


def test_the_cli_never_overwrites_the_drills_step_6_log(tmp_path, monkeypatch):
    from course_lib.rl import __main__ as cli

    _drill_folder(tmp_path)
    step6 = cli.step6_log(tmp_path)
    step6.parent.mkdir(parents=True, exist_ok=True)
    step6.write_text("[{\"step\": 1}]")
    calls = []
    monkeypatch.setattr(trainer, "train_grpo", lambda *a, **k: calls.append(a[3]) or {"ok": True})
    assert cli.main(["train", "--drill-root", str(tmp_path)]) == 0
    assert calls and Path(calls[0]).resolve() != step6.parent.resolve()
    assert cli.main(["train", "--drill-root", str(tmp_path), "--out", str(step6.parent)]) == 2
    assert cli.main(["train", "--drill-root", str(tmp_path), "--out", str(step6.parent / ".." / "rl")]) == 2
    assert len(calls) == 1 and step6.read_text() == "[{\"step\": 1}]"


# --- the audit: fresh inputs from the task's specification, the other backend ---------------------------

def test_fresh_tests_come_from_the_spec_and_catch_a_memorised_answer():
    from course_lib.drill.taskgen import FAMILIES, expected_value, task_combinations

    family, op, flt = task_combinations()[0]
    tests = audit.fresh_tests((family, op, flt), "solve", seed=1, n=6)
    assert len(tests) == 6 and all(t.startswith("assert solve(") for t in tests)
    assert tests == audit.fresh_tests((family, op, flt), "solve", seed=1, n=6)
    assert tests != audit.fresh_tests((family, op, flt), "solve", seed=2, n=6)
    assert audit.task_spec({"task": f"{family}/{op}/{flt}"}) == (family, op, flt)
    assert audit.task_spec({"task": "nope/x/y"}) is None and audit.task_spec({}) is None
    for fam in FAMILIES:
        for v in audit.fresh_inputs(fam, __import__("random").Random(0), 5):
            expected_value(fam, *[c for c in task_combinations() if c[0] == fam][0][1:], v)
    assert audit.other_backend("bwrap") == "docker" and audit.other_backend("docker") == "bwrap"
    with pytest.raises(ValueError, match="other real backend"):
        audit.other_backend("unsafe")


def test_the_audit_disagrees_with_a_program_that_memorised_the_hidden_tests():
    require_bwrap()
    from course_lib.drill.taskgen import _assert_lines, render_code, task_combinations

    family, op, flt = next(c for c in task_combinations() if c[0] == "list")
    right = render_code(family, op, flt, "solve", "numbers", "x")
    hidden_inputs = [[1, 2, 3], [], [5, -5]]
    lines = _assert_lines(family, op, flt, "solve", hidden_inputs).splitlines()
    table = {repr(v): line.split("== ", 1)[1] for v, line in zip(hidden_inputs, lines)}
    memorised = "def solve(numbers):\n    return {" + ", ".join(f"{k!r}: {v}" for k, v in table.items()) + "}[repr(numbers)]\n"
    from course_lib.evaluation.sandbox import run_code

    assert run_code(memorised, lines, backend="bwrap").status == "passed"      # the judge's hidden tests pass
    items = [{"key": "r", "program": right, "entry_point": "solve", "task": f"{family}/{op}/{flt}"},
             {"key": "m", "program": memorised, "entry_point": "solve", "task": f"{family}/{op}/{flt}"},
             {"key": "hub", "program": right, "entry_point": "solve"}]
    rep = audit.audit_programs(items, backend="bwrap", seed=3, n_inputs=6, workers=2)
    assert rep["audited"] == 2 and rep["agree"] == 1 and rep["disagree"] == ["m"] and rep["no_spec"] == 1
    assert rep["why"] == ""


def test_an_audit_on_a_backend_that_does_not_work_here_says_why(monkeypatch):
    from course_lib.evaluation.sandbox import policy

    why = "no Docker daemon answers (start one: `python -m course_lib.evaluation.sandbox daemon`)"
    monkeypatch.setitem(policy._probe_cache, "docker", (False, why, time.monotonic()))
    items = [{"key": "r", "program": "def f(xs):\n    return sum(xs)\n", "entry_point": "f", "task": "list/sum/all"}]
    rep = audit.audit_programs(items, backend="docker", seed=0, n_inputs=3)
    assert rep["audited"] == 0 and rep["unscored"] == 1 and rep["why"] == why


def test_passing_rollouts_are_the_judges_passes_joined_with_their_task(tmp_path):
    path = tmp_path / "rollouts.jsonl"
    audit.save_rollouts(path, 1, ["3", "3", "4"], ["p", "q", None], [1.0, 0.0, -1.0], ["passed", "failed", "no_code"])
    audit.save_rollouts(path, 2, ["3"], ["p"], [1.0], ["passed"])
    rows = audit.load_rollouts(path)
    assert len(rows) == 4 and rows[-1]["step"] == 2
    items = audit.passing_rollouts(rows, {3: {"task": "list/sum/all", "entry_point": "f"}})
    assert items == [{"task": "list/sum/all", "entry_point": "f", "key": "3", "program": "p", "step": 1, "reward": 1.0}]
