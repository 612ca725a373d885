"""Step 4 of the drill — inference: answers of a model on the eval prompts, plus teacher-forced PPL.

ci: transformers ``generate`` in batches (greedy, left padding, stop on ``<|im_end|>``/``<|endoftext|>``).
full: vLLM with the lesson's knobs (``max_model_len`` 4096, ``gpu_memory_utilization`` 0.8,
``max_num_seqs`` 16, ``max_num_batched_tokens`` 16384, response ``max_tokens`` 1536), either offline
(``vllm.LLM``) or as the OpenAI-compatible server command that :func:`vllm_server_command` builds.

Introduced in lesson 07.
"""
from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

STOP_TOKENS = ("<|im_end|>", "<|endoftext|>")


@dataclass(frozen=True)
class VLLMKnobs:
    """The lesson's vLLM settings (``--vllm-*`` options of the drill)."""

    # values: the profile's drill section (``vllm_*`` keys), via course_lib.drill.run.config_from_profile
    max_model_len: int
    gpu_memory_utilization: float
    max_num_seqs: int
    max_num_batched_tokens: int
    response_max_tokens: int

    def engine_args(self, model: str | Path) -> dict[str, Any]:
        """Keyword arguments of ``vllm.LLM`` for ``model``."""
        return {"model": str(model), "max_model_len": self.max_model_len,
                "gpu_memory_utilization": self.gpu_memory_utilization,
                "max_num_seqs": self.max_num_seqs,
                "max_num_batched_tokens": self.max_num_batched_tokens, "trust_remote_code": True}


def vllm_server_command(model: str | Path, knobs: VLLMKnobs, *, port: int = 8000,
                        python: str = sys.executable) -> list[str]:
    """The argv that serves ``model`` with vLLM's OpenAI-compatible server and the lesson's knobs
    (the course's one builder, :func:`course_lib.training.teacher.vllm_server_command`).

    Introduced in lesson 07.
    """
    from course_lib.training.teacher import vllm_server_command as build

    return build(model, port=port, python=python, max_model_len=knobs.max_model_len,
                 gpu_memory_utilization=knobs.gpu_memory_utilization, max_num_seqs=knobs.max_num_seqs,
                 max_num_batched_tokens=knobs.max_num_batched_tokens)


def chat_prompt(tokenizer, user: str) -> str:
    """The model's chat-formatted prompt for one user message (the tokenizer's chat template)."""
    from course_lib.training.instructions import chat_prompt as _chat_prompt

    return _chat_prompt(tokenizer, user)


def _stop_ids(tokenizer) -> list[int]:
    ids = []
    for t in STOP_TOKENS:
        i = tokenizer.convert_tokens_to_ids(t)
        if isinstance(i, int) and i >= 0 and i != tokenizer.unk_token_id:
            ids.append(i)
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    return ids


def load_model(model_path: str | Path, *, threads: int | None = None):
    """(tokenizer, model) from a Hugging Face folder on CPU, ready for batched generation."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if threads:
        torch.set_num_threads(int(threads))
    tok = AutoTokenizer.from_pretrained(str(model_path))
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=torch.float32)
    model.eval()
    return tok, model


def generate_transformers(model_path: str | Path, prompts: Sequence[str], *, max_new_tokens: int = 256,
                          batch_size: int = 16, threads: int | None = None,
                          progress: bool = True) -> list[dict[str, Any]]:
    """Greedy answers of the model at ``model_path`` to ``prompts``, batched (the ci inference).

    Returns one dict per prompt, in order: ``response``, ``new_tokens``, ``finished`` (stopped on its
    own rather than at ``max_new_tokens``). Introduced in lesson 07.
    """
    import torch
    from tqdm.auto import tqdm

    tok, model = load_model(model_path, threads=threads)
    stop = _stop_ids(tok)
    max_len = getattr(model.config, "max_position_embeddings", 2048)
    texts = [chat_prompt(tok, p) for p in prompts]
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out: list[dict[str, Any] | None] = [None] * len(texts)
    bar = tqdm(total=len(texts), desc="generate", disable=not progress, leave=False)
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        enc = tok([texts[i] for i in chunk], return_tensors="pt", padding=True, add_special_tokens=False,
                  truncation=True, max_length=max(16, max_len - max_new_tokens))
        with torch.no_grad():
            gen = model.generate(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                                 max_new_tokens=max_new_tokens, do_sample=False,
                                 eos_token_id=stop, pad_token_id=tok.pad_token_id)
        new = gen[:, enc["input_ids"].shape[1]:]
        for row, i in zip(new, chunk):
            ids = row.tolist()
            finished = any(s in ids for s in stop)
            cut = min((ids.index(s) for s in stop if s in ids), default=len(ids))
            out[i] = {"response": tok.decode(ids[:cut], skip_special_tokens=True),
                      "new_tokens": cut, "finished": finished}
        bar.update(len(chunk))
    bar.close()
    return out  # type: ignore[return-value]


def generate_vllm(model_path: str | Path, prompts: Sequence[str], knobs: VLLMKnobs) -> list[dict[str, Any]]:
    """Greedy answers with vLLM's offline engine and the lesson's knobs (the full inference).

    Raises a clear error when vLLM is not installed (``pip install -e .[full]`` on a GPU machine).
    Introduced in lesson 07.
    """
    try:
        from vllm import LLM, SamplingParams
    except ImportError as exc:
        raise RuntimeError("the full profile's inference needs vLLM on a GPU machine: "
                           "`pip install -e .[full]` (or use --profile ci for transformers generation)"
                           ) from exc
    llm = LLM(**knobs.engine_args(model_path))
    tok = llm.get_tokenizer()
    params = SamplingParams(temperature=0.0, max_tokens=knobs.response_max_tokens,
                            stop=list(STOP_TOKENS))
    results = llm.generate([chat_prompt(tok, p) for p in prompts], params)
    return [{"response": r.outputs[0].text, "new_tokens": len(r.outputs[0].token_ids),
             "finished": r.outputs[0].finish_reason == "stop"} for r in results]


def teacher_forced_ppl(model_path: str | Path, pairs: Sequence[tuple[str, str]], *, batch_size: int = 8,
                       max_length: int = 1024, threads: int | None = None, device: str = "cpu") -> dict:
    """Perplexity of the model on reference answers, teacher-forced (the lesson's PPL).

    For each (prompt, reference) the model reads the chat-formatted prompt and the reference answer
    followed by ``<|im_end|>``; the loss counts only the answer's tokens. PPL = exp(total NLL / total
    answer tokens). Returns ``{"ppl", "nll", "tokens", "samples"}``. Introduced in lesson 07.
    """
    import torch

    tok, model = load_model(model_path, threads=threads)
    model.to(device)
    from course_lib.training.instructions import IGNORE_INDEX, encode_chat

    total_nll, total_tokens = 0.0, 0
    for start in range(0, len(pairs), batch_size):
        ids_list, labels_list = [], []
        for prompt, ref in pairs[start:start + batch_size]:
            ex = encode_chat(tok, [{"role": "user", "content": prompt}, {"role": "assistant", "content": ref}],
                             max_len=max_length)
            ids_list.append(ex["input_ids"])
            labels_list.append(ex["labels"])
        width = max(len(x) for x in ids_list)
        pad = tok.pad_token_id if tok.pad_token_id is not None else 0
        input_ids = torch.tensor([x + [pad] * (width - len(x)) for x in ids_list], device=device)
        labels = torch.tensor([y + [IGNORE_INDEX] * (width - len(y)) for y in labels_list], device=device)
        attn = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in ids_list], device=device)
        with torch.no_grad():
            logits = model(input_ids=input_ids, attention_mask=attn).logits.float()
        logp = torch.log_softmax(logits[:, :-1], dim=-1)
        tgt = labels[:, 1:]
        mask = tgt != IGNORE_INDEX
        picked = logp.gather(-1, tgt.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        total_nll += float(-(picked * mask).sum())
        total_tokens += int(mask.sum())
    nll = total_nll / max(total_tokens, 1)
    return {"ppl": math.exp(min(nll, 50.0)), "nll": nll, "tokens": total_tokens, "samples": len(pairs)}


def timed(fn, *args, **kwargs) -> tuple[Any, float]:
    t0 = time.monotonic()
    return fn(*args, **kwargs), time.monotonic() - t0
