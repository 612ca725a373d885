"""Tests of course_lib.training.sft (lesson 05): the LLaMA-Factory settings and YAML of both profiles, the
post-run checks, and one real tiny fine-tune on CPU through LazyLLM → LLaMA-Factory."""
import json

import pytest

from course_lib.training import sft
from tests.chat_model_for_tests import make_chat_model

ROWS = [{"instruction": f"Write a function that returns {i} plus one.", "input": "",
         "output": f"def f():\n    return {i} + 1"} for i in range(32)]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return make_chat_model(tmp_path_factory.mktemp("models") / "tinychat")


# the lecture's finetune.llamafactory dictionary (§4), typed out here from the lecture
LECTURE_DICT = {
    "learning_rate": 1e-4, "cutoff_len": 4096, "max_samples": 5000, "val_size": 0.02,
    "optim": "adamw_torch_fused", "bf16": True, "fp16": False, "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 4, "num_train_epochs": 2.0, "template": "qwen", "stage": "sft",
    "save_steps": 10, "resume_from_checkpoint": None, "save_strategy": "steps", "save_total_limit": 3,
}


def test_full_profile_has_the_lessons_hyperparameters():
    assert sft.LESSON_HYPERPARAMETERS == LECTURE_DICT
    cfg = sft.llamafactory_config("full")
    for key, value in LECTURE_DICT.items():
        assert cfg[key] == value and type(cfg[key]) is type(value), key
    assert cfg["finetuning_type"] in ("lora", "full")


def test_full_profile_yaml_has_every_key_of_the_lecture(tiny_model, tmp_path):
    """Render the full profile's LLaMA-Factory YAML through LazyLLM (no training) and check every key
    of the lecture's dictionary, with the lecture's launcher."""
    data, _ = sft.write_alpaca_json(ROWS, tmp_path / "train.json")
    y, cmd = sft.render_train_yaml(tiny_model, data, tmp_path / "run", profile="full", launcher="sco")
    for key, value in LECTURE_DICT.items():
        assert key in y, key
        assert y[key] == value and type(y[key]) is type(value), (key, y[key], value)
    assert "llamafactory-cli train" in cmd


def test_launcher_is_a_profile_setting():
    import lazyllm

    for profile in ("ci", "full"):
        assert sft.launcher_settings(profile) == ("empty", {})
    kind, options = sft.launcher_settings("full", "sco")
    assert (kind, options) == ("sco", {"ngpus": 1, "partition": "a800", "resource": "N3lS.Ii.I60.1"})
    assert sft.LECTURE_LAUNCHER == (kind, options)
    assert sft.launcher_settings("ci", "slurm", {"partition": "p", "ngpus": 2}) == ("slurm", {"partition": "p", "ngpus": 2})
    assert isinstance(sft.make_launcher("empty"), lazyllm.launcher.EmptyLauncher)
    sco = sft.make_launcher("sco", {**options, "workspace_name": "ws"})
    assert type(sco).__name__ == "ScoLauncher" and sco.partition == "a800" and sco.ngpus == 1 and sco.sync
    assert type(sft.make_launcher("slurm", {"partition": "p", "ngpus": 1})).__name__ == "SlurmLauncher"
    sft.make_launcher("remote", {"ngpus": 1})                   # LazyLLM's configured default launcher
    with pytest.raises(ValueError, match="launcher must be one of"):
        sft.launcher_settings("ci", "kubernetes")


def test_ci_profile_is_cpu_safe():
    cfg = sft.llamafactory_config("ci")
    assert cfg["fp16"] is False and cfg["use_cpu"] is True
    assert cfg["bf16"] is sft.cpu_has_bf16()          # "auto": bf16 only on a CPU with bf16 instructions
    assert cfg["report_to"] == "none" and cfg["preprocessing_num_workers"] == 1
    assert cfg["val_size"] == 0 and cfg["eval_strategy"] == "no"
    assert cfg["template"] == "qwen" and cfg["stage"] == "sft" and cfg["train_on_prompt"] is False
    assert sft.llamafactory_config("ci", learning_rate=0.5)["learning_rate"] == 0.5


def test_bf16_auto_reads_the_cpu_flags():
    assert sft.cpu_has_bf16("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_bf16 avx512_vnni\n")
    assert sft.cpu_has_bf16("Features\t: fp asimd bf16 i8mm\n")                 # Arm
    assert not sft.cpu_has_bf16("flags\t\t: fpu sse avx2 avx512f avx512bw\n")   # AVX-512 without BF16
    assert not sft.cpu_has_bf16("model name\t: bf16 in a name is not a flag\n")
    assert sft.resolve_bf16(True) is True and sft.resolve_bf16(False, "cuda") is False
    assert sft.resolve_bf16("auto", "cpu") is sft.cpu_has_bf16()
    with pytest.raises(ValueError, match="'auto'"):
        sft.resolve_bf16("yes")


def test_train_threads_takes_the_callers_setting_else_the_profiles(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert (sft.train_threads("ci"), sft.train_threads("full")) == (2, 8)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert sft.train_threads("ci") == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "zero")       # not a count: the profile's
    assert sft.train_threads("ci") == 2


@pytest.mark.parametrize("profile", ["ci", "full"])
def test_yaml_lazyllm_writes(profile, tiny_model, tmp_path):
    data, n = sft.write_alpaca_json(ROWS, tmp_path / "train.json")
    assert n == 32
    y, cmd = sft.render_train_yaml(tiny_model, data, tmp_path / "run", profile=profile)
    cfg = sft.llamafactory_config(profile)
    for key in ("learning_rate", "cutoff_len", "max_samples", "val_size", "bf16", "fp16", "template", "stage",
                "finetuning_type", "per_device_train_batch_size", "gradient_accumulation_steps", "report_to"):
        assert y[key] == cfg[key], key
    assert y["model_name_or_path"].endswith("qwen2-tinychat")       # linked so LazyLLM guesses `qwen`
    assert "llamafactory-cli train" in cmd
    info = json.loads((tmp_path / "run" / "lazyllm_temp").rglob("dataset_info.json").__next__().read_text())
    assert list(info.values())[0]["columns"] == {"prompt": "instruction", "query": "input", "response": "output"}
    if profile == "full":
        assert "llamafactory-cli export" in cmd                       # LoRA: merge after training
        assert y["eval_strategy"] == "steps"
    else:
        assert y["eval_strategy"] == "no" and y["use_cpu"] is True


def test_a_setting_lazyllms_template_lacks_is_an_error_not_dropped(tiny_model, tmp_path):
    """lazyllm.finetune.llamafactory drops keyword arguments its train template lacks (one INFO line);
    the course refuses them instead, naming the key."""
    for profile in ("ci", "full"):
        from course_lib.drill.config import config_from_profile

        cfg = sft.llamafactory_config(profile, **config_from_profile(profile).sft_overrides)
        assert set(cfg) <= sft.lazyllm_template_keys(), sorted(set(cfg) - sft.lazyllm_template_keys())
    data, _ = sft.write_alpaca_json(ROWS, tmp_path / "train.json")
    with pytest.raises(ValueError, match="'neat_packing'.*not keys of LazyLLM's train template"):
        sft.render_train_yaml(tiny_model, data, tmp_path / "run", profile="ci", neat_packing=True)


def test_bad_training_rows_name_the_row(tmp_path):
    with pytest.raises(ValueError, match="training row 1"):
        sft.write_alpaca_json([ROWS[0], {"instruction": "x", "output": ""}], tmp_path / "t.json")
    with pytest.raises(ValueError, match="kept nothing"):
        sft.write_alpaca_json([], tmp_path / "t.json")


def _fake_run(tmp_path, log_text, losses, weights=True):
    run = tmp_path / "target" / "lazyllm_lora"
    run.mkdir(parents=True)
    (run / "train_log_1.log").write_text(log_text)
    (run / "trainer_log.jsonl").write_text("\n".join(
        json.dumps({"current_steps": i + 1, "loss": v}) for i, v in enumerate(losses)))
    if weights:
        (run / "model.safetensors").write_bytes(b"x")
        (run / "config.json").write_text("{}")
    (run / "trainer_state.json").write_text("{}")
    return run


def test_verify_run_catches_silent_failures(tmp_path):
    run = _fake_run(tmp_path / "a", "Traceback...\nValueError: Please specify dataset for evaluation.", [])
    with pytest.raises(sft.FinetuneError, match="Please specify dataset"):
        sft.verify_run(run, None, "full")
    run = _fake_run(tmp_path / "b", "{'train_runtime': 1.0}", [3.0, 3.1, 3.2, 3.3, 3.4])
    with pytest.raises(sft.FinetuneError, match="did not fall"):
        sft.verify_run(run, None, "full")
    # issue 27: a run that jumped up at once and crept back (5.65 → 7.0 → ... → 6.05) beat its own first
    # fifth without learning anything; the check compares with the first logged loss
    run = _fake_run(tmp_path / "d", "{'train_runtime': 1.0}", [5.65, 7.0, 6.8, 6.5, 6.3, 6.2, 6.1, 6.05, 6.0, 6.05])
    with pytest.raises(sft.FinetuneError, match="first logged loss"):
        sft.verify_run(run, None, "full")
    run = _fake_run(tmp_path / "c", "{'train_runtime': 1.0}", [3.0, 2.0], weights=False)
    with pytest.raises(sft.FinetuneError, match="no merged"):
        sft.verify_run(run, None, "lora")


def test_verify_run_copies_full_weights_when_rsync_did_nothing(tmp_path):
    run = _fake_run(tmp_path, "{'train_runtime': 1.0}", [3.0, 2.5, 2.0])
    merged, curve, _, notes = sft.verify_run(run, None, "full")
    assert (merged / "model.safetensors").exists() and not (merged / "trainer_state.json").exists()
    assert curve == [(1, 3.0), (2, 2.5), (3, 2.0)] and "rsync" in notes[0]


@pytest.mark.slow
def test_real_tiny_finetune_on_cpu(tiny_model, tmp_path, monkeypatch):
    """A real LazyLLM → LLaMA-Factory run; update() starts no relay server (deploy.dummy's port comes from
    the seeded global random with no check that it is free: a busy port failed a CI run)."""
    import lazyllm

    def no_server(*a, **k):
        raise AssertionError("sft.finetune started a LazyLLM relay server")

    monkeypatch.setattr(lazyllm.deploy.RelayServer, "__init__", no_server)
    res = sft.finetune(tiny_model, ROWS, tmp_path / "sft", max_steps=12, learning_rate=3e-3)
    assert (res.merged_model / "model.safetensors").exists()
    assert "train_runtime" in res.log_path.read_text()
    assert res.loss_curve[-1][1] < res.loss_curve[0][1]
    (answer,) = sft.generate(res.merged_model, [ROWS[0]["instruction"]], max_new_tokens=8)
    assert isinstance(answer, str)


def test_encode_chat_is_the_one_source_of_sft_examples(tiny_model):
    """tokenize_chat and the drill's teacher-forced PPL build their examples with encode_chat: the
    prompt is the generation prompt, the answer ends with <|im_end|>, labels -100 on the prompt; and
    no other module of course_lib writes the -100 labels itself."""
    import re
    from pathlib import Path

    from transformers import AutoTokenizer

    from course_lib.training import instructions as I

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    sample = {"instruction": "Write f", "input": "", "output": "def f():\n    return 1"}
    enc = I.encode_chat(tokenizer, I.to_messages(sample))
    assert enc == I.tokenize_chat(sample, tokenizer)
    prompt = I.chat_prompt(tokenizer, "Write f")
    assert tokenizer.decode(enc["input_ids"][:enc["prompt_len"]]) == prompt
    assert enc["text"].endswith("<|im_end|>") and enc["labels"][-1] == enc["input_ids"][-1]
    assert enc["labels"][:enc["prompt_len"]] == [I.IGNORE_INDEX] * enc["prompt_len"]
    joint = tokenizer(enc["text"], add_special_tokens=False)["input_ids"]
    assert joint == enc["input_ids"]          # separate tokenization (LLaMA-Factory's) = joint here
    pkg = Path(I.__file__).parent
    writers = [str(p.relative_to(pkg)) for p in pkg.rglob("*.py")
               if re.search(r"\[\s*-100\s*\]", p.read_text(encoding="utf-8"))]
    assert writers == [], f"these modules build -100 labels themselves: {writers}"


def test_train_only_deploy_serves_nothing_and_is_not_registered():
    import lazyllm

    cls = sft.train_only_deploy()
    assert cls is sft.train_only_deploy()
    assert issubclass(cls, lazyllm.components.deploy.base.LazyLLMDeployBase)
    assert "TrainOnlyDeploy" not in lazyllm.deploy and "trainonlydeploy" not in lazyllm.deploy
    assert cls(launcher=lazyllm.launchers.remote(sync=False), stream=False)("target", "base") == ""


def test_sft_demo_one_task_with_signature_given():
    from course_lib.training import sft_demo

    train = sft_demo.load_task_rows("train", operations=["list/sum"])
    held = sft_demo.load_task_rows("eval", operations=["list/sum"])
    assert train and held and {r["task"] for r in train + held} == {"list/sum"}
    assert not {r["entry_point"] for r in held} & {r["entry_point"] for r in train}
    row = held[0]
    prefix = sft_demo.answer_prefix(row)
    assert prefix == row["signature"] + "\n" and prefix.startswith(f"def {row['entry_point']}(")
    arg = row["signature"].split("(")[1].split(")")[0]
    assert sft_demo.uses_argument(prefix + f"    return sum({arg})\n", row)
    assert not sft_demo.uses_argument(prefix + "    return sum(xs_other)\n", row)
    assert not sft_demo.uses_argument(prefix + "    return 0\n", row)       # the def line itself does not count
