"""Small local stand-ins for the drill's neighbours, used only by the drill's unit tests.

They follow the contracts of course_lib.sandbox (run_code/run_many), course_lib.codegen
(run_codegen_pipeline) and course_lib.sft (finetune) so each drill step can be tested on tiny data in
seconds. The stand-in sandbox is a plain subprocess — NOT a sandbox; it only runs the tests' own
snippets. The real modules are exercised by the end-to-end test.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import types
from dataclasses import dataclass
from pathlib import Path


@dataclass
class FakeResult:
    status: str
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    exit_code: int = 0


def fake_run_code(code, tests=None, *, timeout_s=10.0, memory_mb=128, backend=None):
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


def fake_run_many(items, *, workers=8, **kw):
    return [fake_run_code(**it, **kw) if isinstance(it, dict) else fake_run_code(it, **kw) for it in items]


def sandbox_module(broken: bool = False) -> types.ModuleType:
    mod = types.ModuleType("course_lib.sandbox")
    if broken:
        mod.run_code = lambda *a, **k: FakeResult("sandbox_error", stderr="bwrap: not found")
        mod.run_many = lambda items, **k: [FakeResult("sandbox_error", stderr="bwrap: not found") for _ in items]
    else:
        mod.run_code, mod.run_many = fake_run_code, fake_run_many
    return mod


def codegen_module() -> types.ModuleType:
    """Keeps rows whose answer has a fenced block that compiles (a stand-in for lesson 05's pipeline)."""
    from course_lib.drill.extract import extract_code

    def run_codegen_pipeline(rows, profile="ci"):
        kept = []
        for r in rows:
            code = extract_code(r["response"])
            try:
                if code:
                    compile(code, "<x>", "exec")
                    kept.append({"instruction": r["prompt"], "output": r["response"]})
            except SyntaxError:
                pass
        return kept, {"input": len(rows), "kept": len(kept), "stages": {"compiles": len(kept)}}

    mod = types.ModuleType("course_lib.codegen")
    mod.run_codegen_pipeline = run_codegen_pipeline
    return mod


def sft_module(calls: list | None = None) -> types.ModuleType:
    """'Fine-tunes' by copying the base model and writing a LLaMA-Factory-style trainer_log.jsonl."""

    def finetune(base_model_path, train_rows, out_dir, *, profile="ci"):
        out = Path(out_dir) / "lazyllm_merge"
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(base_model_path, out)
        log = Path(out_dir) / "lazyllm_lora" / "trainer_log.jsonl"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("".join(json.dumps({"current_steps": i + 1, "loss": 3.0 / (i + 1)}) + "\n"
                               for i in range(5)))
        if calls is not None:
            calls.append(len(train_rows))
        return out

    mod = types.ModuleType("course_lib.sft")
    mod.finetune = finetune
    return mod


def metrics_module() -> types.ModuleType:
    import numpy as np

    def pass_at_k(n, c, k):
        if n - c < k:
            return 1.0
        return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))

    mod = types.ModuleType("course_lib.metrics")
    mod.pass_at_k = pass_at_k
    return mod


CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def make_tiny_model(folder: Path, corpus: list[str]) -> Path:
    """A random-init 2-layer Qwen2 model with a byte-level BPE ChatML tokenizer (seconds to build)."""
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
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, tie_word_embeddings=True)
    Qwen2ForCausalLM(cfg).save_pretrained(folder)
    return folder
