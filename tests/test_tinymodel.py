"""Tests of course_lib.training.tinymodel: the tiny model's folder is a standard Hugging Face model."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch
import transformers

from course_lib.training import sft, tinymodel  # noqa: E402
from course_lib.training.tinymodel import (  # noqa: E402
    EOT,
    IM_END,
    IM_START,
    QWEN_FIM,
    SPECIAL_TOKENS,
    STARCODER_FIM,
    build_tiny_model,
    pack_windows,
    pretraining_data,  # noqa: E402
    split_into_snippets,
    tiny_config,
)
from course_lib.training.tinymodel import model as model_code  # noqa: E402


def toy_repositories(n_train: int = 8, n_held_out: int = 2, files_per_repo: int = 5):
    """A toy corpus in the shape of ``tinymodel.corpus_repositories``: repositories of real
    standard-library modules, named so that both splits of ``is_held_out(name, 10)`` are filled."""
    import sysconfig

    from course_lib.data.repos import source_files

    root = sysconfig.get_paths()["stdlib"]
    paths = [p for p in source_files(root) if p.endswith(".py") and "/" not in p][:200]
    texts = [Path(root, p).read_text(encoding="utf-8") for p in paths]
    repos, held, i = [], 0, 0
    while len(repos) < n_train + n_held_out:
        name = f"toy-{i}"
        i += 1
        out = tinymodel.is_held_out(name, 10)
        if (out and held >= n_held_out) or (not out and len(repos) - held >= n_train):
            continue
        held += out
        k = (len(repos) * files_per_repo) % (len(paths) - files_per_repo)
        repos.append(tinymodel.RepoFiles(name, paths[k:k + files_per_repo], texts[k:k + files_per_repo]))
    return repos, "toy0123456789abc"


@pytest.fixture(scope="module")
def toy_corpus(tmp_path_factory):
    """The tiny model's loader answers with :func:`toy_repositories`; the cache is a fresh folder."""
    repos = toy_repositories()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COURSE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        mp.setattr(pretraining_data, "corpus_repositories", lambda profile="ci": repos)
        yield repos


@pytest.fixture(scope="module")
def quick_model(tmp_path_factory, toy_corpus):
    """A tiny model built with the real code on the toy corpus, 2 training steps (format checks)."""
    out = tmp_path_factory.mktemp("tiny") / "model"
    meta = build_tiny_model(out, "base", "ci", train_steps=2, progress=False)
    return out, meta


def test_pretraining_corpus_keeps_dependency_order_and_holds_out_whole_repositories(toy_corpus):
    repos, fingerprint = toy_corpus
    corpus = tinymodel.pretraining_corpus("ci")
    assert corpus.info["fingerprint"] == fingerprint and corpus.info["source"] == "deps.load_ordered_corpus"
    assert {r.name for r in corpus.held_out} == {r.name for r in repos if tinymodel.is_held_out(r.name, 10)}
    assert not {r.name for r in corpus.train} & {r.name for r in corpus.held_out}
    by_name = {r.name: r for r in repos}
    for r in corpus.train + corpus.held_out:
        original = by_name[r.name].paths
        assert r.paths == original[:len(r.paths)]          # a prefix of the dependency order
        originals = dict(zip(by_name[r.name].paths, by_name[r.name].texts))
        assert r.texts == [tinymodel.strip_docstrings_and_comments(originals[p]) for p in r.paths]
    doc = corpus.documents("train")[0]
    assert doc.startswith("<|repo_name|>" + corpus.train[0].name + "\n<|file_sep|>" + corpus.train[0].paths[0])
    assert len(doc) <= corpus.info["repo_chars"]
    with pytest.raises(ValueError, match="split"):
        corpus.documents("test")


def test_model_metadata_names_its_corpus(quick_model, toy_corpus):
    _, meta = quick_model
    assert meta["corpus"]["fingerprint"] == toy_corpus[1]
    assert meta["corpus"]["train_repos"] >= 1 and meta["corpus"]["held_out_repos"] >= 1
    assert meta["tokens_seen"] == 2 * meta["settings"]["batch_size"] * meta["settings"]["seq_len"]


def test_tiny_config_is_a_small_random_qwen2():
    cfg = tiny_config(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1)
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert sum(p.numel() for p in model.parameters()) < 20_000
    out = model(input_ids=torch.tensor([[1, 2, 3]]), labels=torch.tensor([[1, 2, 3]]))
    assert out.logits.shape == (1, 3, 128) and torch.isfinite(out.loss)


def test_default_config_has_2_to_4_million_parameters():
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(tiny_config())
    n = sum(p.numel() for p in model.parameters())
    assert 2_000_000 <= n <= 4_000_000


def test_folder_has_the_standard_files(quick_model):
    out, meta = quick_model
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                 "special_tokens_map.json", "generation_config.json"):
        assert (out / name).exists(), name
    assert json.loads((out / "config.json").read_text())["model_type"] == "qwen2"
    assert meta["train_steps"] == 2 and meta["parameters"] > 2_000_000


def test_loads_with_auto_classes_and_special_tokens_are_single_ids(quick_model):
    out, _ = quick_model
    tok = transformers.AutoTokenizer.from_pretrained(out)
    model = transformers.AutoModelForCausalLM.from_pretrained(out)
    assert model.config.vocab_size == len(tok) <= 4096   # the toy corpus is too small for all 4,096
    for token in SPECIAL_TOKENS:
        ids = tok.encode(token, add_special_tokens=False)
        assert len(ids) == 1, (token, ids)
        assert tok.decode(ids) == token
    assert tok.eos_token == IM_END and tok.pad_token == EOT and tok.bos_token == EOT
    assert tok.model_input_names == ["input_ids", "attention_mask"]
    # sentinels are never split by ordinary text around them
    ids = tok.encode(f"x = 1{QWEN_FIM[0]}y{STARCODER_FIM[1]}", add_special_tokens=False)
    assert tok.convert_tokens_to_ids(QWEN_FIM[0]) in ids and tok.convert_tokens_to_ids(STARCODER_FIM[1]) in ids


def test_tokenizer_round_trips_code(quick_model):
    out, _ = quick_model
    tok = transformers.AutoTokenizer.from_pretrained(out)
    code = "def add(a, b):\n    \"\"\"Return a + b.\"\"\"\n    return a + b  # é ✓\n\n\tx = [1, 2]\n"
    assert tok.decode(tok.encode(code, add_special_tokens=False)) == code
    assert len(tok.encode(code, add_special_tokens=False)) < len(code)  # BPE merges learned on code


def test_chat_template_renders_chatml(quick_model):
    out, _ = quick_model
    tok = transformers.AutoTokenizer.from_pretrained(out)
    text = tok.apply_chat_template([{"role": "user", "content": "Write add."}], tokenize=False,
                                   add_generation_prompt=True)
    assert text == f"{IM_START}user\nWrite add.{IM_END}\n{IM_START}assistant\n"   # no default system turn
    assert sft.template_default_system(out) == ""   # so LLaMA-Factory adds none either
    text = tok.apply_chat_template([{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
                                    {"role": "assistant", "content": "A"}], tokenize=False)
    assert text == (f"{IM_START}system\nS{IM_END}\n{IM_START}user\nU{IM_END}\n"
                    f"{IM_START}assistant\nA{IM_END}\n")


def test_generation_runs(quick_model):
    out, _ = quick_model
    tok = transformers.AutoTokenizer.from_pretrained(out)
    model = transformers.AutoModelForCausalLM.from_pretrained(out)
    ids = tok("def add(a, b):\n", return_tensors="pt")
    gen = model.generate(**ids, max_new_tokens=5, do_sample=False)
    assert gen.shape[1] <= ids["input_ids"].shape[1] + 5
    assert set(model.generation_config.eos_token_id) == {tok.convert_tokens_to_ids(IM_END),
                                                          tok.convert_tokens_to_ids(EOT)}


def test_repeat_copy_loss_reports_both_copies(quick_model):
    out = tinymodel.repeat_copy_loss(quick_model[0], sequences=2, length=12)
    assert set(out) == {"first copy", "second copy"}
    assert all(v > 0 and math.isfinite(v) for v in out.values())


def test_training_log_has_losses(quick_model):
    out, _ = quick_model
    log = json.loads((out / "training_log.json").read_text())
    assert len(log["train_loss"]) == 2
    assert [e["step"] for e in log["eval"]] == [0, 2]
    assert all(e["l2r_loss"] > 0 and e["middle_loss"] > 0 for e in log["eval"])
    assert sum(log["modes"].values()) > 0


def test_snippets_reassemble_the_file():
    text = ("import os\n\n\n@decorator\ndef f(x):\n    return x\n\n" + "y = 1\n" * 400
            + "class A:\n    pass\n")
    snippets = split_into_snippets(text, max_chars=300)
    assert "".join(snippets) == text
    assert all(len(s) <= 300 for s in snippets)


def test_pack_windows_separates_documents_with_eot():
    windows = pack_windows([[5, 6], [7], [8, 9, 10], [11]], seq_len=3, eot_id=0)
    assert windows == [[5, 6, 0], [7, 0, 8], [9, 10, 0]]  # the last partial window [11, 0] is dropped


def test_get_tiny_model_builds_once_then_uses_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    corpus = {"fingerprint": "a" * 16}
    monkeypatch.setattr(pretraining_data, "corpus_repositories", lambda profile="ci": ([], corpus["fingerprint"]))
    calls = []

    def fake_build(out, name, profile, **kw):
        calls.append(name)
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "model.safetensors").write_text("x")
        return {}

    monkeypatch.setattr(model_code, "build_tiny_model", fake_build)
    first = tinymodel.get_tiny_model("base")
    second = tinymodel.get_tiny_model("base")
    assert first == second and calls == ["base"]
    assert first.parent == tmp_path / "models" and not list(tmp_path.glob("models/*.tmp*"))
    assert tinymodel.get_tiny_model("nofim") != first
    corpus["fingerprint"] = "b" * 16                      # a changed corpus: another folder, a rebuild
    assert tinymodel.get_tiny_model("base") != first and calls == ["base", "nofim", "base"]
    with pytest.raises(ValueError, match="unknown tiny model"):
        tinymodel.get_tiny_model("huge")


def test_order_experiment_at_toy_size(toy_corpus):
    """Both arms train on the same files for the same steps; only the order inside a repository
    differs, and the loss is measured on the later files of held-out repositories."""
    repos, _ = toy_corpus
    tok = tinymodel.train_tokenizer([t for r in repos for t in r.texts], vocab_size=400)
    model = transformers.AutoModelForCausalLM.from_config(tiny_config(
        vocab_size=tok.get_vocab_size(), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, bos_token_id=0, eos_token_id=0, pad_token_id=0))
    train = [r for r in repos if not tinymodel.is_held_out(r.name, 10)]
    held = [r for r in repos if tinymodel.is_held_out(r.name, 10)]
    ids, owner = tinymodel.repo_token_stream(held[0], tok, file_chars=200)
    assert owner[0] == -1 and owner[-1] == len(held[0].paths) - 1 and owner == sorted(owner)
    shuffled_ids, _ = tinymodel.repo_token_stream(held[0], tok, order=[1, 0, 2, 3, 4], file_chars=200)
    assert sorted(shuffled_ids) == sorted(ids) and shuffled_ids != ids
    result = tinymodel.order_experiment(model, tok, train, held, steps=3, batch_size=2, seq_len=128,
                                        file_chars=200, learning_rate=1e-3, seed=0)
    for arm in ("before", "dependency", "shuffled"):
        assert result[arm]["later"] > 0 and result[arm]["later_tokens"] > 0
    assert result["dependency"]["windows"] == result["shuffled"]["windows"]
    assert result["difference"] == pytest.approx(result["shuffled"]["later"] - result["dependency"]["later"])
    assert result["dependency"]["later"] != result["shuffled"]["later"]


def test_cli_help_mentions_model_names(capsys):
    with pytest.raises(SystemExit):
        tinymodel.main(["--help"])
    assert "nofim" in capsys.readouterr().out


@pytest.mark.notebooks
def test_cached_base_model_learned_code_and_infilling(notebook_records):
    """The real "base" model, which lesson 04 builds: pretraining lowered both held-out losses a lot."""
    notebook_records("04")  # lesson 04 has run (in the regression, or now), so the model is built
    path = tinymodel.tiny_model_dir("base", "ci")
    assert (path / "model.safetensors").exists(), f"lesson 04 ran but {path} holds no model"
    log = json.loads((path / "training_log.json").read_text())
    first, last = log["eval"][0], log["eval"][-1]
    assert last["l2r_loss"] < first["l2r_loss"] - 2.0
    assert last["middle_loss"] < first["middle_loss"] - 2.0
    assert 0.4 < log["modes"]["plain"] / sum(log["modes"].values()) < 0.6
    tok = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModelForCausalLM.from_pretrained(path)
    from course_lib.training.fim import infill

    out = infill(model, tok, "def add(a, b):\n    return ", "\n", max_new_tokens=8)
    assert isinstance(out, str)


def test_dependency_order_experiment_is_cached_by_model_settings_and_seed(quick_model, toy_corpus, monkeypatch):
    """A re-run of lesson 04 reads the experiment back (same base model, settings, seed); another seed runs it.
    The experiment itself is replaced by a counter here: this checks the cache, not the training."""
    from course_lib.training.tinymodel import experiments

    calls = []

    def fake_order_experiment(model, tok, train, evals, *, seed, **kw):
        calls.append(seed)
        return {"seed": seed, "difference": 0.5 + seed, "steps": kw["steps"]}

    monkeypatch.setattr(experiments, "get_tiny_model", lambda name, profile="ci": quick_model[0])
    monkeypatch.setattr(experiments, "order_experiment", fake_order_experiment)
    first = experiments.dependency_order_experiment("ci", seed=3)
    again = experiments.dependency_order_experiment("ci", seed=3)
    other = experiments.dependency_order_experiment("ci", seed=4)
    fresh = experiments.dependency_order_experiment("ci", seed=3, cache=False)
    assert calls == [3, 4, 3]
    assert (first["cached"], again["cached"], other["cached"], fresh["cached"]) == (False, True, False, False)
    assert {k: v for k, v in again.items() if k != "cached"} == {k: v for k, v in first.items() if k != "cached"}
    assert other["difference"] == 4.5
