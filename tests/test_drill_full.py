"""The drill's full-profile code paths that need no GPU: hub-shaped rows, the prerequisite check (probes
replaced), the teacher and pipeline errors of step 2, and ``output/run_manifest.json``."""
from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).parent))

import _drill_standins as standins  # noqa: E402

from course_lib.drill import config, download, evaluate, inference, orchestrate, pipeline, preflight, scoreboard  # noqa: E402
from course_lib.drill.outputs import DrillPaths, StepOutputError, output_state, write_json_output  # noqa: E402
from course_lib.drill.taskgen import HUB_COLUMNS  # noqa: E402


def hub_rows(n: int = 14) -> list[dict]:
    """Rows with the hub's 11 columns only (no task, tests, entry_point, eval_part)."""
    rows = []
    for i in range(n):
        lang = "Python" if i % 7 else "Rust"
        body = f"def f{i}(x):\n    return x + {i}\n" if i % 3 else f"def f{i}(x)\n    return x\n"   # every 3rd: SyntaxError
        rows.append({"prompt": f"Write f{i} that adds {i}.", "main_topic": "Numbers", "subtopic": "Addition",
                     "adjective": "Simple", "action_verb": "Add", "scenario": "school", "target_audience": "Beginners",
                     "programming_language": lang, "common_sense_topic": "Math", "idx": 1000 + i,
                     "response": f"Here it is:\n```python\n{body}```\nDone."})
    assert all(tuple(r) == HUB_COLUMNS for r in rows)
    return rows


def test_hub_shaped_rows_go_through_download_inference_and_evaluation(tmp_path, monkeypatch):
    """Full-profile rows come from nampdn-ai/tiny-codes: no hidden tests, no task; nothing may need them."""
    standins.install(monkeypatch)
    src = tmp_path / "hub.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in hub_rows()))
    cfg = config.config_from_profile("ci", paths=DrillPaths.under(tmp_path / "drill"), source="local",
                                  data_files=[str(src)], hidden_tests=None, train_size=6, eval_size=6,
                                  humaneval_subset=0, sft_model="Org/not-a-folder")
    cfg.variants = lambda: ["base"]
    cfg.paths.make()
    info = download.step_download(cfg)
    assert info["with_tests"] == 0 and info["other_language"] == 2
    train = json.loads(cfg.paths.train_json.read_text())
    evals = json.loads(cfg.paths.eval_json.read_text())
    assert all(set(r) == set(HUB_COLUMNS) for r in train + evals)       # nothing attached
    # the notebook's displays of a hub row
    assert download.hidden_tests_text(evals[0]) == download.NO_HIDDEN_TESTS
    assert set(download.defect_labels(train, cfg.hidden_tests)) == {"(no record: hub row)"}
    assert download.hidden_tests_text({"tests": "assert f(1) == 2", "task": "a/b/c"}).startswith("HIDDEN TESTS (a/b/c):")

    def infer(cfg, model, prompts, pairs, follow_up=None):
        answers = [{"response": r["response"], "new_tokens": 5, "finished": True}
                   for p in prompts for r in evals if p == r["prompt"]]
        assert follow_up is None or follow_up(answers) is None       # hub rows: no signature round
        return {"answers": answers, "ppl": {"ppl": 2.0, "nll": 0.69, "tokens": 10, "samples": 6},
                "engine": {"engine": "stand-in", "version": None, "fallback_reason": None, "seconds": {}},
                "follow_up": None}
    monkeypatch.setattr(inference, "infer", infer)
    monkeypatch.setattr(inference, "pipeline_ppl",
                        lambda cfg, model, pairs: {"ppl": 3.0, "nll": 1.1, "tokens": 8, "samples": 6})
    inference.step_inference(cfg)
    records = json.loads((cfg.paths.output_for("base") / "inference_results.json").read_text())
    assert [r["task"] for r in records] == [""] * 6 and not any("tests" in r for r in records)
    m = evaluate.step_evaluation(cfg)["base"]
    rep = orchestrate.load_report(cfg, "base")
    assert len(rep) == 6 and not rep["has_tests"].any() and rep["correct"].isna().all()
    assert m["with tests"] == 0 and m["test pass@1"] == 0.0 and m["samples"] == 6
    assert m["SyntaxError"] == sum("(x)\n" in r["response"] for r in evals)
    assert scoreboard.runs_vs_correct(rep.to_dict("records")) is not None


# --- the full profile's prerequisites (probes replaced) ------------------------------------------

def fake_model(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"x")
    return folder


@pytest.fixture
def probes(monkeypatch):
    """A healthy one-GPU machine: GPU free, Docker + image, the teacher down (as before SFT)."""
    state = {"gpus": [(80_000, 81_559)], "docker": (True, True), "teacher": (False, "ConnectionRefusedError")}
    monkeypatch.setattr(preflight, "gpu_memory_mib", lambda: state["gpus"])
    monkeypatch.setattr(preflight, "docker_state", lambda: state["docker"])
    monkeypatch.setattr(pipeline, "teacher_answers", lambda url: state["teacher"])
    monkeypatch.delenv("COURSE_TEACHER_URL", raising=False)
    monkeypatch.delenv("COURSE_TEACHER_MODEL", raising=False)
    return state


def full_cfg(tmp_path, **kw):
    return config.config_from_profile("full", paths=DrillPaths.under(tmp_path / "drill"), **kw)


def test_full_prerequisites_all_good_and_hub_ids_said(tmp_path, probes, monkeypatch, caplog):
    import logging

    model = fake_model(tmp_path / "qwen")
    cfg = full_cfg(tmp_path, sft_model=str(model))
    assert preflight.check_full_prerequisites(cfg, ["sft", "inference", "evaluation"]) == []
    assert preflight.model_location(str(model)) == "local"
    assert preflight.model_location("Qwen/Qwen2.5-0.5B-Instruct") == "hub"
    assert preflight.model_location("/models/nowhere") == "missing"
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    logging.getLogger("course_lib.drill").propagate = True
    with caplog.at_level(logging.INFO, logger="course_lib.drill"):
        assert preflight.check_full_prerequisites(full_cfg(tmp_path), ["sft"]) == []
    assert "hub id Qwen/Qwen2.5-0.5B-Instruct" in caplog.text


def test_full_prerequisites_name_each_missing_piece(tmp_path, probes, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    probes.update(gpus=None, docker=(False, False))
    cfg = full_cfg(tmp_path, pipeline_model="/models/missing-teacher")
    problems = preflight.check_full_prerequisites(cfg, list(orchestrate.STEPS))
    text = "\n".join(problems)
    assert "Qwen/Qwen2.5-0.5B-Instruct is a hub id but HF_HUB_OFFLINE=1" in text           # base model
    assert "the teacher model /models/missing-teacher does not exist" in text
    assert "does not answer at http://127.0.0.1:8000/v1/" in text
    assert "vllm.entrypoints.openai.api_server --model /models/missing-teacher" in text    # how to start it
    assert "no Docker daemon answers" in text
    assert "no NVIDIA GPU is visible" in text
    probes["docker"] = (True, False)
    assert any("python -m course_lib.evaluation.sandbox image" in p
               for p in preflight.check_full_prerequisites(cfg, ["evaluation"]))
    # Docker is checked where step 5 will use it: the profile's sandbox.backend, unless the run names another
    # backend (--sandbox-backend) or $SANDBOX_BACKEND does
    monkeypatch.delenv("SANDBOX_BACKEND", raising=False)
    assert not any("Docker" in p for p in preflight.check_full_prerequisites(
        full_cfg(tmp_path, sandbox_backend="bwrap"), ["evaluation"]))
    monkeypatch.setenv("SANDBOX_BACKEND", "bwrap")
    assert not any("Docker" in p for p in preflight.check_full_prerequisites(full_cfg(tmp_path), ["evaluation"]))
    monkeypatch.delenv("SANDBOX_BACKEND")
    # run_drill stops before any step runs
    ran = []
    monkeypatch.setattr(orchestrate, "DRILL_STEPS", tuple(replace(s, run=lambda c, state, s=s.name: ran.append(s))
                                                  for s in orchestrate.DRILL_STEPS))
    with pytest.raises(config.PrerequisiteError, match="cannot start the drill"):
        orchestrate.run_drill(cfg)
    assert ran == []


def test_gpu_memory_and_a_teacher_left_running(tmp_path, probes):
    cfg = full_cfg(tmp_path, sft_model=str(fake_model(tmp_path / "m")))
    probes["gpus"] = [(20_000, 81_559)]
    problems = preflight.gpu_memory_problems(cfg, ["inference"])
    assert len(problems) == 1 and "gpu_memory_utilization 0.8 x 81559 MiB = 65247 MiB" in problems[0]
    probes.update(gpus=[(80_000, 81_559)], teacher=(True, "Qwen/Qwen3-30B-A3B-Instruct-2507"))
    (problem,) = preflight.gpu_memory_problems(cfg, ["sft", "inference"])
    assert "still runs on this machine's only GPU" in problem and "stop it before SFT" in problem
    probes["gpus"] = [(80_000, 81_559), (80_000, 81_559)]                 # a second GPU: fine
    assert preflight.gpu_memory_problems(cfg, ["sft", "inference"]) == []
    # with step 2 planned the teacher must be up: only the GPU's presence is checked then
    probes["gpus"] = [(1_000, 81_559)]
    assert preflight.check_full_prerequisites(cfg, ["pipeline", "sft"]) == []
    probes["teacher"] = (True, "some/other-model")
    assert "pass --pipeline-model some/other-model" in pipeline.teacher_problem(cfg)


def test_full_run_checks_gpu_memory_again_after_step_2(tmp_path, probes, monkeypatch):
    probes["teacher"] = (True, "Qwen/Qwen3-30B-A3B-Instruct-2507")
    cfg = full_cfg(tmp_path, sft_model=str(fake_model(tmp_path / "m")))
    ran = []
    monkeypatch.setattr(orchestrate, "DRILL_STEPS", tuple(replace(s, run=lambda c, state, s=s.name: ran.append(s) or {})
                                                  for s in orchestrate.DRILL_STEPS))
    monkeypatch.setattr(orchestrate, "check_prerequisites", lambda cfg, steps: [])
    with pytest.raises(config.PrerequisiteError, match=r"(?s)step 3 \(sft\).*stop it before SFT"):
        orchestrate.run_drill(cfg)
    assert ran == ["download", "pipeline"]


def test_step_2_needs_the_teacher_and_never_caches_an_empty_run(tmp_path, probes, monkeypatch):
    standins.install(monkeypatch)
    cfg = full_cfg(tmp_path)
    cfg.paths.make()
    with pytest.raises(config.PrerequisiteError, match="Start it .*\n.*vllm.entrypoints.openai.api_server"):
        pipeline.step_pipeline(cfg)
    # ci: the offline teacher; a run that keeps nothing (or whose teacher was down) is an error
    src = tmp_path / "hub.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in hub_rows()))
    cfg = config.config_from_profile("ci", paths=DrillPaths.under(tmp_path / "ci"), source="local",
                                  data_files=[str(src)], hidden_tests=None, train_size=6, eval_size=2)
    cfg.paths.make()
    download.step_download(cfg)
    write_json_output(cfg.paths.codegen_json, [{"instruction": "old", "output": "x"}], {"old": True})
    from course_lib.training import codegen

    class DownReport(standins.FakeReport):
        def to_dict(self):
            return {**super().to_dict(), "dropped": [{"row_id": 1, "stage": "teacher",
                                                       "reason": "teacher unreachable at http://x/: refused"}]}
    for kept, report in (([], standins.FakeReport(6, 0)), ([{"instruction": "a", "output": "b"}], DownReport(6, 1))):
        monkeypatch.setattr(codegen, "run_codegen_pipeline", lambda rows, kept=kept, report=report, **kw: (kept, report))
        with pytest.raises(StepOutputError, match=r"pipeline: kept \d of 6 training rows .*Nothing was cached"):
            pipeline.step_pipeline(cfg)
        assert not output_state(cfg.paths.codegen_json)[0]      # the old file no longer counts as done
    assert json.loads((cfg.paths.data_dir / "codegen_funnel.json").read_text())["input"] == 6


def test_pipeline_and_full_defaults_follow_the_lecture(capsys, monkeypatch):
    from course_lib.drill.command import main
    from course_lib.evaluation.sandbox import policy
    from course_lib.profiles import get_profile

    monkeypatch.delenv("SANDBOX_BACKEND", raising=False)
    monkeypatch.setattr(policy, "_probe", lambda name: (True, ""))     # a machine where Docker answers

    cfg = config.config_from_profile("full")
    assert cfg.inference_workers == 8 and cfg.eval_workers == 8                 # the lecture's run.py defaults
    assert orchestrate.step_settings(cfg, "pipeline")["timeout_s"] == get_profile("full").pipeline.timeout_s
    with pytest.raises(SystemExit):
        main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "vLLM does not use it: its engine batches by itself, up to --vllm-max-num-seqs" in help_text
    inf = orchestrate.step_settings(cfg, "inference")
    assert inf["engine"] == "vllm" and inf["max_new_tokens"] == 1536 and inf["ppl_threads"] == 8
    assert inf["fallback"] is None and inf["dtype"] == "auto"
    assert inf["vllm"] == {"max_model_len": 4096, "gpu_memory_utilization": 0.8, "max_num_seqs": 16,
                           "max_num_batched_tokens": 16384, "response_max_tokens": 1536, "kv_cache_gib": 4,
                           "enforce_eager": False, "dtype": "auto"}
    ev = orchestrate.step_settings(cfg, "evaluation")
    assert (ev["sandbox_backend"], ev["timeout_s"], ev["memory_mb"]) == ("docker", 10.0, 128)


# --- output/run_manifest.json ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from course_lib.paths import assets_dir

    rows = [json.loads(line) for line in open(assets_dir("tiny_codes", "tiny_codes_sample.jsonl"))][:200]
    return standins.make_tiny_model(tmp_path_factory.mktemp("tiny") / "model",
                                    [r["prompt"] + "\n" + r["response"] for r in rows])


def test_manifest_records_each_step_and_merges_reruns(tmp_path, monkeypatch, tiny_model):
    standins.install(monkeypatch)
    cfg = config.config_from_profile("ci", paths=DrillPaths.under(tmp_path), train_size=20, eval_size=4,
                                  humaneval_subset=1, max_new_tokens=8, batch_size=4, sft_model=str(tiny_model),
                                  inference_workers=1, eval_workers=2, compare_raw=False, timeout_s=5.0,
                                  inference_backend="transformers")    # head size 16: not for vLLM's CPU attention
    orchestrate.run_drill(cfg)
    path = cfg.paths.output_dir / "run_manifest.json"
    first = json.loads(path.read_text())
    assert first["profile"] == "ci" and list(first["steps"]) == [s for s in orchestrate.STEPS if s != "rl"]
    for name, e in first["steps"].items():
        assert e["status"] == "ran" and e["cached"] is False and e["profile"] == "ci", name
        assert e["started"] <= e["finished"] and e["seconds"] >= 0 and e["engine"]["name"]
    sft = first["steps"]["sft"]
    assert sft["engine"]["base_model"] == str(tiny_model)
    assert sft["variants"]["pipeline_sft"]["finetune"]["profile"] == "ci"      # what finetune reported
    inf = first["steps"]["inference"]["engine"]
    assert (inf["engine"], inf["max_new_tokens"], inf["batch_size"], inf["threads"]) == ("transformers", 8, 4, 1)
    assert inf["used"] == "transformers" and "selected" in inf["fallback_reason"]
    assert first["steps"]["inference"]["variants"]["base"]["status"] == "ran"
    ev = first["steps"]["evaluation"]["engine"]
    assert (ev["sandbox_backend"], ev["timeout_s"], ev["memory_mb"], ev["workers"]) == ("bwrap", 5.0, 128, 2)
    assert first["steps"]["download"]["result"]["train"] == 20

    orchestrate.run_drill(cfg)                                              # everything cached
    second = json.loads(path.read_text())
    for name, e in second["steps"].items():
        old = first["steps"][name]
        assert e["status"] == "cached" and e["cached"] is True and "checked" in e, name
        assert (e["started"], e["finished"], e["engine"]) == (old["started"], old["finished"], old["engine"])

    cfg.force = True                                                # a partial rerun: step 5 only
    orchestrate.run_drill(cfg, only_step="evaluation")
    third = json.loads(path.read_text())
    assert third["steps"]["evaluation"]["status"] == "ran"
    assert third["steps"]["sft"] == second["steps"]["sft"]          # steps that did not run keep their entry

    def broken(*a, **k):
        raise RuntimeError("engine crashed")
    monkeypatch.setattr(inference, "infer", broken)
    with pytest.raises(RuntimeError, match="engine crashed"):
        orchestrate.run_drill(cfg, only_step="inference")
    failed = json.loads(path.read_text())["steps"]["inference"]
    assert failed["status"] == "failed" and "engine crashed" in failed["error"]
    path.write_text("not json")                                     # a broken manifest is rewritten
    cfg.force = False
    orchestrate.run_drill(cfg, only_step="download")
    assert json.loads(path.read_text())["steps"]["download"]["status"] == "cached"


def test_evaluate_answers_keeps_hub_records_without_tests():
    standins_rows = [{"idx": 1, "prompt": "p", "response": "```python\nprint(1)\n```"}, {"response": "no code"}]
    rows = evaluate.evaluate_answers(standins_rows[1:])
    assert rows[0]["category"] == "NoCode" and rows[0]["task"] == "" and rows[0]["correct"] is None


# --- scripts/gpu_check.sh -------------------------------------------------------------------------

def test_gpu_check_script_parses_says_what_it_needs_and_uses_real_options(repo, tmp_path):
    import re
    import shlex
    import subprocess

    from course_lib.drill.command import build_parser

    script = repo / "scripts" / "gpu_check.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    out = subprocess.run(["bash", str(script), "--help"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    for word in ("COURSE_SFT_MODEL", "COURSE_TEACHER_MODEL", "--profile full", "drill_metrics.json", "run_manifest.json"):
        assert word in out.stdout
    env = {k: v for k, v in os.environ.items() if k != "COURSE_SFT_MODEL"}
    bad = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=30, env=env)
    assert bad.returncode == 1 and "COURSE_SFT_MODEL is not set" in bad.stderr
    # the drill options the script passes exist in the CLI
    text = script.read_text()
    args = shlex.split(re.search(r"ARGS=\((.*?)\)", text, re.S).group(1).replace("\\\n", " "))
    args = [a.replace("$ROOT", str(tmp_path)).replace("$COURSE_SFT_MODEL", "/m") for a in args]
    ns = build_parser().parse_args(args + ["--no-pipeline", "--skip-steps", "1,2", "--pipeline-model", "/t"])
    assert (ns.profile, ns.train_size, ns.eval_size, ns.humaneval_subset, ns.sft_steps) == ("full", 32, 16, 4, 10)
    for f in ns.data_files + [ns.hidden_tests]:
        assert (repo / f).exists(), f
    # step 6's options (added to ARGS when the TRL environment has vLLM and CUDA, else --no-rl)
    rl_args = re.findall(r"ARGS\+=\((.*?)\)", text)
    assert rl_args == ["--rl-steps 4", "--no-rl"], rl_args
    for extra in rl_args:
        ns = build_parser().parse_args(args + shlex.split(extra))
    assert ns.no_rl and build_parser().parse_args(args + ["--rl-steps", "4"]).rl_steps == 4
    assert "course_lib.rl setup --full" in out.stdout


def test_sft_cache_key_follows_the_profiles_sft_section(tmp_path, monkeypatch):
    """A change of the profile's sft section (here warmup_ratio through COURSE_PROFILE_OVERRIDES) retrains
    step 3 instead of reusing a model trained with other settings; the drill trains in fp32 on every CPU."""
    from course_lib.drill import finetune

    def key(ratio):
        f = tmp_path / f"over_{ratio}.json"
        f.write_text(json.dumps({"profile": "ci", "sections": {"sft": {"warmup_ratio": ratio}}}))
        monkeypatch.setenv("COURSE_PROFILE_OVERRIDES", str(f))
        cfg = config.config_from_profile("ci", paths=DrillPaths.under(tmp_path / "d"))
        return finetune._sft_config(cfg, "pipeline_sft")

    a, b = key(0.1), key(0.2)
    assert a["overrides"] == b["overrides"] and (a["settings"]["warmup_ratio"], b["settings"]["warmup_ratio"]) == (0.1, 0.2)
    assert a != b
    assert a["settings"]["bf16"] is False and a["overrides"]["bf16"] is False      # fp32 whatever the CPU has
