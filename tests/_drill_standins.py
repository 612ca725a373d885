"""Stand-in *functions* for the drill's neighbours, used only by the drill's unit tests.

Tests install them with ``monkeypatch.setattr`` on the real modules (``course_lib.evaluation.sandbox.run_many``,
``course_lib.training.codegen.run_codegen_pipeline``, ``course_lib.training.sft.finetune``) through :func:`install`, each
wrapped in ``create_autospec`` of the real function, so a call with a keyword the real function does
not accept fails the test. The stand-in sandbox is a plain subprocess — NOT a sandbox; it only runs the
tests' own snippets. The real functions are exercised by the end-to-end test.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from unittest.mock import create_autospec


@dataclass
class FakeResult:
    status: str
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    exit_code: int = 0
    detail: str = ""
    backend: str = "stand-in"


def fake_run_code(code, tests=None, *, timeout_s=None, memory_mb=None, backend=None):
    if timeout_s is None:
        from course_lib.profiles import get_profile

        timeout_s = get_profile().sandbox.timeout_s
    program = code + ("\n" + tests if tests else "")
    try:
        compile(program, "<answer>", "exec")
    except SyntaxError as exc:
        return FakeResult("syntax_error", stderr=f"SyntaxError: {exc}", exit_code=1)
    t0 = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return FakeResult("timeout", duration_s=timeout_s, exit_code=-9)
    dt = time.monotonic() - t0
    if p.returncode == 0:
        return FakeResult("passed", p.stdout, p.stderr, dt, 0)
    status = "failed" if "AssertionError" in p.stderr else "runtime_error"
    return FakeResult(status, p.stdout, p.stderr, dt, p.returncode)


def fake_run_many(items, *, workers=8, progress=True, **kw):
    return [fake_run_code(**{**kw, **it}) if isinstance(it, dict) else fake_run_code(it, **kw) for it in items]


def broken_run_many(items, *, workers=8, progress=True, **kw):
    return [FakeResult("sandbox_error", stderr="bwrap: not found") for _ in items]


class FakeReport:
    def __init__(self, n_input, kept):
        self.n_input, self.kept = n_input, kept

    def summary(self):
        return f"input {self.n_input} -> kept {self.kept}"

    def to_dict(self):
        return {"input": self.n_input, "kept": self.kept, "dropped": [],
                "stages": [{"stage": "compiles", "in": self.n_input, "kept": self.kept,
                            "dropped": self.n_input - self.kept}]}


def fake_run_codegen_pipeline(rows, *, profile="ci", run_code=None, timeout_s=None, **kw):
    """Keeps rows whose answer has a fenced block that compiles (a stand-in for lesson 05's pipeline)."""
    from course_lib.evaluation.extract import extract_code

    kept = []
    for r in rows:
        code = extract_code(r["response"])
        try:
            if code:
                compile(code, "<x>", "exec")
                kept.append({"instruction": r["prompt"], "output": r["response"]})
        except SyntaxError:
            pass
    return kept, FakeReport(len(rows), len(kept))


def make_fake_finetune(calls: list | None = None):
    """'Fine-tunes' by copying the base model and writing a LLaMA-Factory-style trainer_log.jsonl."""
    from course_lib.training.sft import SFTResult

    def finetune(base_model_path, train_rows, out_dir, *, profile="ci", **overrides):
        out = Path(out_dir) / "lazyllm_merge"
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(base_model_path, out)
        log = Path(out_dir) / "lazyllm_lora" / "trainer_log.jsonl"
        log.parent.mkdir(parents=True, exist_ok=True)
        curve = [(i + 1, 3.0 / (i + 1)) for i in range(5)]
        log.write_text("".join(json.dumps({"current_steps": st, "loss": lo}) + "\n" for st, lo in curve))
        if calls is not None:
            calls.append(len(train_rows))
        return SFTResult(merged_model=out, adapter_dir=log.parent, log_path=log, loss_curve=curve,
                         train_runtime=0.0, config={"profile": getattr(profile, "name", profile), **overrides})
    return finetune


def install(monkeypatch, *, calls: list | None = None, sandbox: bool = True, broken_sandbox: bool = False,
            finetune=None) -> None:
    """Replace the neighbours' functions (not modules) with autospecced stand-ins."""
    from course_lib.evaluation import sandbox as sb
    from course_lib.training import codegen, sft

    if sandbox or broken_sandbox:
        monkeypatch.setattr(sb, "run_many", create_autospec(
            sb.run_many, side_effect=broken_run_many if broken_sandbox else fake_run_many))
        monkeypatch.setattr(sb, "resolve_backend", create_autospec(
            sb.resolve_backend, side_effect=lambda backend=None, *, configured=None: backend or "bwrap"))
    monkeypatch.setattr(codegen, "run_codegen_pipeline", create_autospec(
        codegen.run_codegen_pipeline, side_effect=fake_run_codegen_pipeline))
    monkeypatch.setattr(sft, "finetune", create_autospec(sft.finetune,
                                                          side_effect=finetune or make_fake_finetune(calls)))
    # side-by-side SFT in threads, so the stand-in finetune (patched in this process) is the one called
    from course_lib.drill import finetune

    monkeypatch.setattr(finetune, "sft_executor", create_autospec(finetune.sft_executor, side_effect=thread_pool))


def thread_pool(jobs, threads, lazyllm_path=None):
    """``finetune.sft_executor``'s stand-in: the same pool interface, threads of this process."""
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=jobs)


CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def make_tiny_model(folder: Path, corpus: list[str], *, hidden_size: int = 32, heads: int = 2,
                    init_std: float = 0.02) -> Path:
    """A random-init 2-layer Qwen2 model with a byte-level BPE ChatML tokenizer (seconds to build).

    vLLM's CPU attention needs a head size of 32 or more (``hidden_size / heads``); a larger
    ``init_std`` gives peaked next-token distributions, so greedy answers are not near-ties."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  additional_special_tokens=specials[1:])
    tok.chat_template = CHATML
    tok.model_input_names = ["input_ids", "attention_mask"]
    tok.save_pretrained(folder)
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                      num_hidden_layers=2, num_attention_heads=heads, num_key_value_heads=heads,
                      max_position_embeddings=512, initializer_range=init_std,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, tie_word_embeddings=True)
    Qwen2ForCausalLM(cfg).save_pretrained(folder)
    return folder


def make_fake_train_grpo(calls: list | None = None):
    """'Trains' the rl variant by copying the starting model and writing a two-step ``train_log.json`` with
    the issue's keys (a stand-in for :func:`course_lib.rl.trainer.train_grpo`; the real one is tested in
    tests/test_rl.py)."""
    from course_lib.rl.rollouts import LOG_KEYS

    def train_grpo(model_dir, rows, hidden_tests, out_dir, settings=None, *, log=None, train_log_path=None):
        out = Path(out_dir).resolve() / "model"
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(model_dir, out)
        log_path = Path(train_log_path or Path(out_dir) / "train_log.json")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        records = [{**{k: 0.0 for k in LOG_KEYS}, "step": i + 1, "kl": None} for i in range(2)]
        log_path.write_text(json.dumps(records))
        if calls is not None:
            calls.append({"model_dir": str(model_dir), "rows": len(rows), "tests": len(hidden_tests),
                          "settings": settings})
        return {"model_path": str(out), "train_log": str(log_path), "steps": 2, "prompts": len(rows),
                "dropped": {}, "rollouts": 8, "seconds": 0.1, "cpu_seconds": 0.1}
    return train_grpo


def install_rl(monkeypatch, calls: list | None = None) -> None:
    """The TRL environment 'found' and ``train_grpo`` replaced by :func:`make_fake_train_grpo` (autospecced)."""
    from course_lib.rl import trainer, trl_env

    monkeypatch.setattr(trl_env, "trl_python", lambda: (sys.executable, "a stand-in TRL environment"))
    monkeypatch.setattr(trainer, "train_grpo", create_autospec(trainer.train_grpo,
                                                               side_effect=make_fake_train_grpo(calls)))
