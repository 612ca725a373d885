"""The RL step's library (course_lib.rl): settings, prompts, rewards, per-step records, the judge, the
attacks a policy could try on it, and one end-to-end run of the real TRL worker at toy size.

The end-to-end test needs the TRL environment (``python -m course_lib.rl setup`` creates ``.venv-trl``).
In CI (``$CI`` set) a missing environment FAILS the test; elsewhere it is skipped with the reason.
"""
from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).parent))

import _drill_standins as standins  # noqa: E402

from course_lib.evaluation.sandbox import SandboxResult  # noqa: E402
from course_lib.rl import rollouts, trainer, trl_env  # noqa: E402
from course_lib.rl.rollouts import (  # noqa: E402
    LOG_KEYS,
    RolloutJudge,
    build_rl_prompts,
    group_stats,
    program_of,
    reward_of,
    split_tests,
    step_record,
)
from course_lib.rl.settings import RLSettings, rl_settings, trl_config  # noqa: E402

ADD_TESTS = "assert add(2, 3) == 5\nassert add(-1, 1) == 0\nassert add(0, 0) == 0\nassert add(10, 5) == 15\n"
ADD_ROW = {"idx": 7, "tests": ADD_TESTS, "signature": "def add(a, b):", "entry_point": "add"}


def require_bwrap() -> None:
    from tests._sandbox_support import ensure_backend

    ensure_backend("bwrap")


# --- settings ----------------------------------------------------------------------------------------

def test_ci_settings_use_the_notes_group_size_and_fp32():
    s = rl_settings("ci")
    assert s.group_size == 8 and s.reward == "pass" and s.bf16 is False and s.use_cpu and not s.use_vllm
    assert s.rollouts_per_step == s.prompts_per_step * 8


def test_overrides_none_keeps_the_profile_value_and_bad_values_are_refused():
    assert rl_settings("ci", steps=None, reward=None).steps == 25
    assert rl_settings("ci", reward="lecture").reward == "lecture"
    with pytest.raises(ValueError, match="unknown RL reward"):
        rl_settings("ci", reward="exec")
    with pytest.raises(ValueError, match="unknown RL settings"):
        rl_settings("ci", num_gens=4)
    with pytest.raises(ValueError, match="group_size"):
        rl_settings("ci", group_size=1)


# the values these fields had as RLSettings' dataclass defaults before they moved into the profiles' rl section
# (issue 37): written out here, since the RL results and the cached step 6 depend on them
OLD_DEFAULTS = {
    "num_iterations": 1, "lr_scheduler_type": "constant", "warmup_steps": 0, "max_grad_norm": 1.0, "beta": 0.0,
    "epsilon": 0.2, "epsilon_high": 0.28, "loss_type": "dapo", "scale_rewards": "group", "temperature": 1.0,
    "mask_truncated_completions": False, "seed": 0, "omp_wait_policy": "PASSIVE", "vllm_mode": "colocate",
    "vllm_gpu_memory_utilization": 0.3, "vllm_importance_sampling_correction": True,
    "vllm_importance_sampling_mode": "token_mask", "vllm_importance_sampling_clip_min": 0.5,
    "vllm_importance_sampling_clip_max": 2.0, "judge_memory_mb": 128, "sandbox_backend": None,
    "passk_samples": 8, "passk_temperature": 1.0,
}


@pytest.mark.parametrize("profile", ["ci", "full"])
def test_settings_from_each_profile_keep_the_old_default_values(profile):
    """Every RLSettings field comes from the profile (its rl section, seed and sandbox.backend) or is a named
    constant; the fields that were only dataclass defaults kept their values in both profiles."""
    import dataclasses

    from course_lib.profiles import PROFILES
    from course_lib.rl import settings as rl_mod

    s = rl_settings(profile)
    assert {k: getattr(s, k) for k in OLD_DEFAULTS} == OLD_DEFAULTS
    P = PROFILES[profile]
    with_default = {f.name for f in dataclasses.fields(RLSettings) if f.default is not dataclasses.MISSING}
    assert with_default == {"omp_wait_policy", "vllm_mode", "sandbox_backend", "sandbox_configured"}
    assert (rl_mod.OMP_WAIT_POLICY, rl_mod.VLLM_MODE) == ("PASSIVE", "colocate")
    from_profile = {f.name for f in dataclasses.fields(RLSettings)} - with_default - {"seed"}
    assert from_profile == set(P.rl) - set(rl_mod.PROFILE_ONLY_KEYS)
    assert s.seed == P.seed and s.sandbox_configured == P.sandbox.backend


def test_trl_config_carries_both_clip_sides_k_beta_and_loss_type():
    s = rl_settings("ci", group_size=4, prompts_per_step=3, epsilon=0.1, epsilon_high=0.3, beta=0.01, loss_type="grpo")
    cfg = trl_config(s, "/tmp/x")
    assert cfg["num_generations"] == 4 and cfg["per_device_train_batch_size"] == 12
    assert (cfg["epsilon"], cfg["epsilon_high"], cfg["beta"], cfg["loss_type"]) == (0.1, 0.3, 0.01, "grpo")
    assert cfg["bf16"] is False and cfg["use_cpu"] is True and cfg["logging_steps"] == 1 and "use_vllm" not in cfg


def test_full_profile_generates_with_vllm_and_corrects_the_mismatch():
    cfg = trl_config(rl_settings("full"), "/tmp/x")
    assert cfg["use_vllm"] is True and cfg["vllm_importance_sampling_correction"] is True
    assert cfg["vllm_importance_sampling_mode"] == "token_mask" and cfg["bf16"] is True


# --- prompts -----------------------------------------------------------------------------------------

def test_step_6_judges_where_step_5_does():
    """The drill's RL settings take the profile's sandbox.backend (Docker in full) as the judge's configured
    backend and the run's --sandbox-backend as its named one, as step 5 does; the rl options may name one."""
    from course_lib.drill.config import config_from_profile
    from course_lib.rl import drill_step as drill_rl

    full, ci = config_from_profile("full"), config_from_profile("ci")
    for cfg, backend in ((full, "docker"), (ci, "bwrap")):
        s = drill_rl.drill_rl_settings(cfg)
        assert (s.sandbox_backend, s.sandbox_configured) == (None, backend) == (cfg.sandbox_backend,
                                                                                 cfg.profile.sandbox.backend)
    named = config_from_profile("full", sandbox_backend="bwrap")          # --sandbox-backend bwrap
    assert drill_rl.drill_rl_settings(named).sandbox_backend == "bwrap"
    full.rl_overrides = {"sandbox_backend": "unsafe"}
    assert drill_rl.drill_rl_settings(full).sandbox_backend == "unsafe"


def test_the_cli_reads_a_drill_folder(tmp_path):
    """``python -m course_lib.rl train|eval`` read the drill's files (drill_inputs) and its options parse."""
    from course_lib.drill.outputs import DrillPaths, write_json_output
    from course_lib.rl.__main__ import drill_inputs

    paths = DrillPaths.under(tmp_path)
    paths.make()
    (paths.model_for("pipeline_sft")).mkdir(parents=True)
    write_json_output(paths.model_record("pipeline_sft"), {"model_path": "/m", "rows": 1}, {})
    write_json_output(paths.train_json, [{"idx": 3, "tests": "assert f(1) == 1"}, {"idx": 4}], {})
    write_json_output(paths.codegen_json, [{"instruction": "i", "output": "o"}], {})
    write_json_output(paths.eval_json, [{"idx": 9}], {})
    got = drill_inputs(tmp_path)
    assert got["model"] == "/m" and list(got["hidden_tests"]) == [3] and got["eval_rows"] == [{"idx": 9}]


def test_split_tests_gives_one_statement_each():
    assert split_tests(ADD_TESTS) == ["assert add(2, 3) == 5", "assert add(-1, 1) == 0", "assert add(0, 0) == 0",
                                      "assert add(10, 5) == 15"]
    assert split_tests("for x in [1]:\n    assert x\nassert 1") == ["for x in [1]:\n    assert x", "assert 1"]
    with pytest.raises(ValueError, match="do not parse"):
        split_tests("assert (")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from course_lib.paths import assets_dir

    rows = [json.loads(line) for line in open(assets_dir("tiny_codes", "tiny_codes_sample.jsonl"))][:200]
    return standins.make_tiny_model(tmp_path_factory.mktemp("rl") / "model",
                                    [r["prompt"] + "\n" + r["response"] for r in rows])


def test_prompts_follow_the_drills_test_pass1_protocol(tiny_model):
    from course_lib.drill import inference
    from course_lib.evaluation import generation
    from course_lib.training.instructions import chat_prompt

    tok = generation.load_tokenizer(tiny_model)
    rows = [{"row_id": "7", "instruction": "Write `add(a, b)` returning the sum.", "input": "", "output": "..."},
            {"row_id": "8", "instruction": "no tests for me", "output": "..."},
            {"instruction": "no idx", "output": "..."}]
    prompts, dropped = build_rl_prompts(rows, {7: ADD_ROW}, tok)
    assert dropped == {"no idx": 1, "no instruction": 0, "no hidden tests": 1, "no signature": 0, "no planned test": 0}
    (p,) = prompts
    assert p.key == "7" and p.prefix == "```python\ndef add(a, b):\n" == inference.signature_prefix(ADD_ROW)
    assert p.text == chat_prompt(tok, rows[0]["instruction"]) + p.prefix
    # TRL tokenizes the prompt text in one go; the drill encodes chat prompt and prefix apart: same ids
    drill_ids, _ = generation.encode_prompts(tok, [rows[0]["instruction"]], 10_000, [p.prefix])
    assert tok(p.text, add_special_tokens=False)["input_ids"] == drill_ids[0]
    assert len(p.tests) == 4


def test_program_is_the_def_line_and_the_body_up_to_the_closing_fence():
    prefix = "```python\ndef add(a, b):\n"
    assert program_of(prefix, "    return a + b\n```\nSome prose.\n") == "def add(a, b):\n    return a + b\n"
    assert program_of(prefix, "    return a + b") == "def add(a, b):\n    return a + b\n"   # stopped mid-block
    assert program_of("", "no code at all") is None


# --- rewards -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("result,expected", [
    (SandboxResult("passed", tests=["ok"] * 4), (1.0, 1.0, 1.0)),
    (SandboxResult("failed", tests=["ok", "assert", "ok", "ok"]), (0.0, 0.75, 0.75)),
    (SandboxResult("failed", tests=["assert"] * 4), (0.0, 0.0, 0.0)),
    (SandboxResult("syntax_error"), (0.0, 0.0, -1.0)),
    (SandboxResult("runtime_error"), (0.0, 0.0, -0.5)),
    (SandboxResult("timeout"), (0.0, 0.0, -0.5)),
    (SandboxResult("memory_limit"), (0.0, 0.0, -0.5)),
    (None, (0.0, 0.0, -1.0)),                       # no code in the answer: nothing compiles
])
def test_the_three_rewards(result, expected):
    assert tuple(reward_of(k, result) for k in ("pass", "fraction", "lecture")) == expected


def test_a_sandbox_failure_is_not_the_rollouts_fault():
    with pytest.raises(RuntimeError, match="sandbox itself failed"):
        reward_of("pass", SandboxResult("sandbox_error", detail="bwrap missing"))
    with pytest.raises(ValueError, match="unknown RL reward"):
        reward_of("exec", SandboxResult("passed"))


def test_group_stats_count_groups_without_signal():
    keys = ["a"] * 4 + ["b"] * 4 + ["c"] * 4 + ["d"] * 4
    rewards = [1, 1, 1, 1] + [0, 0, 0, 0] + [1, 0, 1, 0] + [0.5, 0.5, None, 0.5]
    passed = [True] * 4 + [False] * 4 + [True, False, True, False] + [False] * 4
    st = group_stats(keys, rewards, passed)
    assert st["groups"] == 4 and st["groups_without_signal"] == 3
    assert (st["groups_all_pass"], st["groups_all_fail"]) == (1, 2)
    assert st["pass_rate"] == 6 / 16 and st["unscored"] == 1
    assert math.isclose(st["reward_mean"], (4 + 2 + 1.5) / 15)
    with pytest.raises(ValueError):
        group_stats(["a"], [1.0, 0.0], [True])


def test_step_record_has_the_issue_keys_first_and_null_kl_without_a_kl_term():
    logs = {"clip_ratio/low_mean": 0.01, "clip_ratio/high_mean": 0.02, "entropy": 0.3, "loss": 0.1,
            "grad_norm": float("nan"), "completions/mean_length": 20.0}
    st = group_stats(["a", "a"], [1.0, 0.0], [True, False])
    rec = step_record(3, logs, st, seconds=1.23456, cpu_seconds=2.0)
    assert list(rec)[:len(LOG_KEYS)] == list(LOG_KEYS)
    assert rec["kl"] is None and rec["clip_low_fraction"] == 0.01 and rec["clip_high_fraction"] == 0.02
    assert rec["reward_mean"] == 0.5 and rec["pass_rate"] == 0.5 and rec["groups_without_signal"] == 0
    assert rec["seconds"] == 1.235 and rec["grad_norm"] is None and rec["completion_mean_tokens"] == 20.0
    assert step_record(1, {"kl": 0.004}, None, seconds=1)["kl"] == 0.004
    json.dumps(rec, allow_nan=False)


# --- the judge ---------------------------------------------------------------------------------------

def _judge(kind: str = "pass") -> tuple[RolloutJudge, str]:
    p = rollouts.RLPrompt(key="7", instruction="add", prefix="```python\ndef add(a, b):\n", text="...",
                          tests=tuple(split_tests(ADD_TESTS)), entry_point="add")
    return RolloutJudge([p], rl_settings("ci", reward=kind, judge_workers=2)), p.key


def test_judge_scores_rollouts_in_the_sandbox_and_runs_each_program_once():
    require_bwrap()
    judge, key = _judge("lecture")
    completions = ["    return a + b\n```", "    return a + b\n```", "    return a - b\n```",
                   "    return a +\n```", "    raise ValueError\n```", "sorry, no idea"]   # last: def line + prose
    out = judge.score([key] * len(completions), completions)
    assert out["rewards"] == [1.0, 1.0, 0.25, -1.0, -0.5, -1.0]     # add(0,0) == 0 holds for a - b
    assert out["passed"] == [True, True, False, False, False, False]
    st = out["stats"]
    assert st["unique_programs"] == 5 and st["groups_without_signal"] == 0 and "no_code" not in st["statuses"]
    with pytest.raises(KeyError, match="not given"):
        judge.score(["nope"], ["    return 0"])


# A policy that finds a way to forge its reward will learn it. Each of these continues after the def line.
FORGERIES = {
    "frame walk: blank the harness's tests": (
        "    return 0\n\nimport sys, types\n_f = sys._getframe()\nwhile _f is not None:\n"
        "    for _space in (_f.f_locals, _f.f_globals):\n"
        "        for _k, _v in list(_space.items()):\n"
        "            if isinstance(_v, list):\n"
        "                for _i, _x in enumerate(_v):\n"
        "                    if isinstance(_x, types.CodeType):\n"
        "                        _v[_i] = compile('pass', '<t>', 'exec')\n"
        "                    elif isinstance(_x, str) and 'assert' in _x:\n"
        "                        _v[_i] = 'pass'\n"
        "    _f = _f.f_back\n```"),
    "always-equal return value": (
        "    class Same:\n        def __eq__(self, other):\n            return True\n"
        "        def __ne__(self, other):\n            return False\n        __hash__ = object.__hash__\n"
        "    return Same()\n```"),
    "write a pass to every fd, then exit": (
        "    return 0\n\nimport os, json\n"
        "for _fd in range(0, 256):\n"
        "    for _msg in (b'ok\\n' * 8, json.dumps({'status': 'passed', 'tests': ['ok'] * 4}).encode() + b'\\n',\n"
        "                 b'PASSED\\n', b'\\x00' * 64):\n"
        "        try:\n            os.write(_fd, _msg)\n        except OSError:\n            pass\n"
        "os._exit(0)\n```"),
}


# what the forgery's honest part earns on its own: `return 0` really passes add(-1, 1) and add(0, 0)
HONEST_PART = {"frame walk: blank the harness's tests": "    return 0\n```"}


@pytest.mark.parametrize("name", list(FORGERIES))
def test_a_rollout_that_forges_its_reward_gets_no_more_than_its_honest_part(name):
    require_bwrap()
    for kind in ("pass", "fraction", "lecture"):
        judge, key = _judge(kind)
        best_allowed = judge.score([key], [HONEST_PART[name]])["rewards"][0] if name in HONEST_PART else 0.0
        assert best_allowed < 1.0
        out = judge.score([key], [FORGERIES[name]])
        assert out["rewards"][0] is not None and out["rewards"][0] <= best_allowed, (name, kind, out)
        assert out["passed"] == [False]


# --- the TRL environment and the worker --------------------------------------------------------------

def test_missing_trl_environment_says_how_to_create_it(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_TRL_VENV", str(tmp_path / "nowhere"))
    python, why = trl_env.trl_python()
    assert python is None and "python -m course_lib.rl setup" in why
    assert trl_env.trl_status()["ready"] is False
    with pytest.raises(trainer.RLUnavailable, match="course_lib.rl setup"):
        trainer.train_grpo(tmp_path, [], {}, tmp_path / "out", rl_settings("ci"))


def _fake_weights(folder: Path, shapes: dict) -> Path:
    """A ``model.safetensors`` whose header names ``shapes`` (zero-filled float32 data)."""
    folder.mkdir(parents=True, exist_ok=True)
    header, offset = {}, 0
    for name, shape in shapes.items():
        n = 4 * math.prod(shape)
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    (folder / "model.safetensors").write_bytes(len(raw).to_bytes(8, "little") + raw + bytes(offset))
    return folder


def test_the_saved_model_takes_the_starting_models_config_only_when_its_tensors_match(tmp_path):
    start = _fake_weights(tmp_path / "start", {"w": (2, 3), "b": (3,)})
    (start / "config.json").write_text('{"rope_theta": 1000000.0}')
    (start / "tokenizer.json").write_text("{}")
    trained = _fake_weights(tmp_path / "trained", {"w": (2, 3), "b": (3,)})
    (trained / "config.json").write_text('{"rope_parameters": {}}')
    assert set(trainer.finish_model_folder(trained, start)) == {"config.json", "tokenizer.json"}
    assert json.loads((trained / "config.json").read_text()) == {"rope_theta": 1000000.0}
    other = _fake_weights(tmp_path / "other", {"w": (3, 3), "b": (3,)})
    with pytest.raises(trainer.RLUnavailable, match="differ"):
        trainer.finish_model_folder(other, start)
    with pytest.raises(trainer.RLUnavailable, match="no weights"):
        trainer.finish_model_folder(tmp_path / "empty", start)


def require_trl_environment() -> str:
    python, why = trl_env.trl_python()
    if python is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must have the TRL environment (python -m course_lib.rl setup creates it): {why}")
        pytest.skip(f"no TRL environment here: {why}")
    return python


@pytest.mark.slow
def test_grpo_end_to_end_with_the_real_trl_worker(tiny_model, tmp_path, monkeypatch):
    """A few steps of TRL's GRPOTrainer on a random tiny model, rewards from the sandbox: the log has one
    record per step with the issue's keys, the judge saw every rollout, the saved folder loads in the
    course's transformers and keeps the starting model's config and tokenizer."""
    require_trl_environment()
    require_bwrap()
    from course_lib.evaluation import generation

    rows = [{"row_id": str(i), "instruction": f"Write `add(a, b)` returning the sum ({i}).", "output": "..."}
            for i in range(4)]
    tests = {i: dict(ADD_ROW, idx=i) for i in range(4)}
    s = rl_settings("ci", steps=2, group_size=2, prompts_per_step=2, steps_per_generation=2, max_completion_length=8,
                    threads=1, judge_workers=1, worker_timeout_s=600)
    monkeypatch.chdir(tmp_path)       # a relative output folder: the worker runs elsewhere, it must still land here
    res = trainer.train_grpo(tiny_model, rows, tests, Path("models/rl"), s,
                             train_log_path=Path("output/rl/train_log.json"))     # the drill's layout
    log = json.loads((tmp_path / "output" / "rl" / "train_log.json").read_text())
    assert [r["step"] for r in log] == [1, 2] and res["steps"] == 2
    for rec in log:
        # both steps train on the one generation round: 2 steps x 2 prompts = 4 groups of K=2
        assert set(LOG_KEYS) <= set(rec) and rec["kl"] is None and rec["groups"] == 4 and rec["round"] == 0
    assert res["rollouts"] == 8    # one generation round for 2 steps of 2 prompts x K=2
    assert res["rounds"] == 1 and res["versions"]["trl"] == "1.16.0"
    model_dir = Path(res["model_path"])
    assert json.loads((model_dir / "config.json").read_text()) == json.loads((tiny_model / "config.json").read_text())
    tok, model = generation.load_model(model_dir)
    assert model.config.vocab_size == len(tok)
    assert json.loads((tmp_path / "models" / "rl" / "rl_result.json").read_text())["steps"] == 2
    assert model_dir == tmp_path / "models" / "rl" / "model"
