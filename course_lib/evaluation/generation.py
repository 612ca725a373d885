"""How the drill's models answer: one call per model for its answers and its PPL (step 4's engine).

Both profiles answer with vLLM's offline engine and the lesson's knobs (full: ``max_model_len`` 4096,
``gpu_memory_utilization`` 0.8, ``max_num_seqs`` 16, ``max_num_batched_tokens`` 16384, answers up to
1536 tokens; ci: the same knobs scaled to the tiny model, ``float32``), one engine per model in a child
process that exits before the next model starts (:mod:`course_lib.evaluation.vllm_engine`).
:func:`run_model` is the one entry point: it computes the teacher-forced PPL first (transformers; that
model is freed before the engine starts, so two copies never sit in memory together), then sends every
prompt to the engine in one go. Greedy decoding, stop on ``<|im_end|>``/``<|endoftext|>``. When vLLM
cannot run, transformers ``generate`` (batched, left padding, same prompt ids and stop tokens) is the
fallback, and the reason is printed and recorded.

Introduced in lesson 06.
"""
from __future__ import annotations

import gc
import logging
import math
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from course_lib.evaluation.vllm_engine import (
    VLLMKnobs,
    VLLMUnavailable,
    generate_offline,
    knobs_from_profile,
)
from course_lib.profiles import ProfileLike, resolve_profile

_STOP_TOKENS = ("<|im_end|>", "<|endoftext|>")
_ENGINES = ("vllm", "transformers")
_PROFILE = object()   # "take this setting from the profile"


def vllm_server_command(model: str | Path, knobs: VLLMKnobs, *, port: int = 8000,
                        python: str = sys.executable) -> list[str]:
    """The argv that serves ``model`` with vLLM's OpenAI-compatible server and the lesson's knobs
    (the course's one builder, :func:`course_lib.training.teacher.vllm_server_command`); on a CPU
    machine pass ``python=vllm_engine.vllm_python()[0]`` (the ``.venv-vllm`` interpreter).

    Introduced in lesson 06.
    """
    from course_lib.training.teacher import vllm_server_command as build

    return build(model, port=port, python=python,
                 max_model_len=knobs.max_model_len, gpu_memory_utilization=knobs.gpu_memory_utilization,
                 max_num_seqs=knobs.max_num_seqs, max_num_batched_tokens=knobs.max_num_batched_tokens)


def stop_token_ids(tokenizer) -> list[int]:
    """Ids of ``<|im_end|>``, ``<|endoftext|>`` (when the vocabulary has them) and the eos token. Introduced in lesson 06."""
    ids = []
    for t in _STOP_TOKENS:
        i = tokenizer.convert_tokens_to_ids(t)
        if isinstance(i, int) and i >= 0 and i != tokenizer.unk_token_id:
            ids.append(i)
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    return ids


def load_tokenizer(model_path: str | Path):
    """The model's tokenizer, set up for batched generation (left padding, a pad token). Introduced in lesson 06."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_path))
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def load_model(model_path: str | Path, *, threads: int | None = None):
    """(tokenizer, model) from a Hugging Face folder on CPU in float32, ready for batched generation. Introduced in lesson 06."""
    import torch
    from transformers import AutoModelForCausalLM

    if threads:
        torch.set_num_threads(int(threads))
    tok = load_tokenizer(model_path)
    model = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=torch.float32)
    model.eval()
    return tok, model


def model_max_len(model_path: str | Path, knobs: VLLMKnobs) -> int:
    """The context both engines use: ``knobs.max_model_len`` capped at the model's own. Introduced in lesson 06."""
    from course_lib.evaluation.vllm_engine import model_context

    ctx = model_context(model_path)
    return min(knobs.max_model_len, ctx) if ctx else knobs.max_model_len


def encode_prompts(tokenizer, prompts: Sequence[str], room: int,
                   answer_prefixes: Sequence[str | None] | None = None) -> tuple[list[list[int]], int]:
    """Chat-formatted token ids of ``prompts``, each cut to its last ``room`` tokens (the answer's
    budget must fit in the context). ``answer_prefixes[i]`` (optional): the start of the answer, given
    to the model after the chat prompt (encoded on its own, as SFT encodes the answer apart from the
    prompt). Returns (ids per prompt, how many prompts were cut). Introduced in lesson 06."""
    from course_lib.training.instructions import chat_prompt

    if answer_prefixes is not None and len(answer_prefixes) != len(prompts):
        raise ValueError(f"{len(prompts)} prompts but {len(answer_prefixes)} answer prefixes")
    out, cut = [], 0
    for i, p in enumerate(prompts):
        ids = list(tokenizer(chat_prompt(tokenizer, p), add_special_tokens=False)["input_ids"])
        prefix = answer_prefixes[i] if answer_prefixes is not None else None
        if prefix:
            ids += list(tokenizer(prefix, add_special_tokens=False)["input_ids"])
        if len(ids) > room:
            ids, cut = ids[-room:], cut + 1
        out.append(ids)
    return out, cut


def decode_answer(tokenizer, ids: Sequence[int], stop: Sequence[int]) -> dict[str, Any]:
    """``{"response", "new_tokens", "finished"}`` from generated ids: cut at the first stop token
    (``finished``: the model stopped on its own rather than at the token budget). Introduced in lesson 06."""
    ids = list(ids)
    hits = [ids.index(s) for s in stop if s in ids]
    cut = min(hits, default=len(ids))
    return {"response": tokenizer.decode(ids[:cut], skip_special_tokens=True), "new_tokens": cut,
            "finished": bool(hits)}


def _generate_ids_transformers(model_path: str | Path, prompt_ids: Sequence[Sequence[int]], *,
                              max_new_tokens: int, batch_size: int, threads: int | None = None,
                              progress: bool = True) -> list[list[int]]:
    """Greedy generated ids for already-encoded prompts with transformers (batched, left padding)."""
    import torch
    from tqdm.auto import tqdm
    from transformers import GenerationConfig

    tok, model = load_model(model_path, threads=threads)
    stop = stop_token_ids(tok)
    pad = tok.pad_token_id if tok.pad_token_id is not None else stop[0]
    gen_cfg = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=stop,
                               pad_token_id=pad)   # only these: the model's own defaults do not apply
    order = sorted(range(len(prompt_ids)), key=lambda i: len(prompt_ids[i]))
    out: list[list[int] | None] = [None] * len(prompt_ids)
    bar = tqdm(total=len(order), desc="generate", disable=not progress, leave=False)
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        width = max(len(prompt_ids[i]) for i in chunk)
        input_ids = torch.tensor([[pad] * (width - len(prompt_ids[i])) + list(prompt_ids[i]) for i in chunk])
        attn = torch.tensor([[0] * (width - len(prompt_ids[i])) + [1] * len(prompt_ids[i]) for i in chunk])
        with torch.no_grad():
            gen = model.generate(input_ids=input_ids, attention_mask=attn, generation_config=gen_cfg)
        for row, i in zip(gen[:, width:], chunk):
            out[i] = row.tolist()
        bar.update(len(chunk))
    bar.close()
    del model
    gc.collect()
    return out  # type: ignore[return-value]


def generate_transformers(model_path: str | Path, prompts: Sequence[str], *, max_new_tokens: int,
                          batch_size: int, threads: int | None = None, max_len: int | None = None,
                          progress: bool = True) -> list[dict[str, Any]]:
    """Greedy answers of the model at ``model_path`` to ``prompts`` with transformers ``generate``
    (the fallback engine), batched with left padding in float32.

    Prompts longer than ``max_len - max_new_tokens`` tokens (``max_len``: the model's context) keep
    their last tokens. Returns one dict per prompt, in order: ``response``, ``new_tokens``,
    ``finished`` (stopped on its own rather than at ``max_new_tokens``). Introduced in lesson 06.
    Public: documented in docs/drill.md, for students to call.
    """
    from course_lib.evaluation.vllm_engine import model_context

    tok = load_tokenizer(model_path)
    max_len = max_len or model_context(model_path) or 2048
    ids, _ = encode_prompts(tok, prompts, max(16, max_len - max_new_tokens))
    gen = _generate_ids_transformers(model_path, ids, max_new_tokens=max_new_tokens, batch_size=batch_size,
                                    threads=threads, progress=progress)
    stop = stop_token_ids(tok)
    return [decode_answer(tok, g, stop) for g in gen]


def teacher_forced_ppl(model_path: str | Path, pairs: Sequence[tuple[str, str]], *, batch_size: int = 8,
                       max_length: int = 1024, threads: int | None = None, device: str | None = None) -> dict:
    """Perplexity of the model on reference answers, teacher-forced (the lesson's PPL).

    For each (prompt, reference) the model reads the chat-formatted prompt and the reference answer
    followed by ``<|im_end|>``; the loss counts only the answer's tokens. PPL = exp(total NLL / total
    answer tokens). ``device`` None: CUDA when torch sees a GPU, else the CPU. Returns ``{"ppl", "nll",
    "tokens", "samples"}``. Introduced in lesson 06.
    """
    import torch

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
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


def _installed(name: str) -> str | None:
    import importlib.metadata as md

    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def _say(message: str, log: logging.Logger | None) -> None:
    """``message`` in the log and, unless the log already writes to the console, on stderr."""
    logger = log or logging.getLogger("course_lib.drill")
    logger.warning(message)
    to_console = any(isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)
                     and getattr(h, "stream", None) in (sys.stdout, sys.stderr) for h in logger.handlers)
    if not to_console:
        print(message, file=sys.stderr, flush=True)


def _free_memory() -> None:
    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:  # pragma: no cover - torch is a course dependency
        pass


def run_model(model_path: str | Path, prompts: Sequence[str], ppl_pairs: Sequence[tuple[str, str]] = (), *,
              profile: ProfileLike = "ci", knobs: VLLMKnobs | None = None, engine: Any = _PROFILE,
              fallback: Any = _PROFILE, batch_size: Any = _PROFILE, threads: Any = _PROFILE,
              timeout_s: Any = _PROFILE, log: logging.Logger | None = None,
              answer_prefixes: Sequence[str | None] | None = None,
              follow_up: Callable[[list[dict]], tuple[Sequence[str], Sequence[str | None]] | None] | None = None,
              ) -> dict[str, Any]:
    """Answers of ONE model to ``prompts`` and its PPL on ``ppl_pairs``: the drill's one inference call.

    ``answer_prefixes`` (optional, one per prompt, None for none): the start of the answer, given to the
    model after the chat prompt, as HumanEval gives the function's signature; the returned
    ``response`` then begins with that prefix, followed by what the model wrote.

    ``follow_up`` (optional): called with the answers once they are in, it returns a second round
    ``(prompts, answer_prefixes)`` (or None for none) that the same engine answers, without a second
    start-up; those answers are returned as ``"follow_up"`` (None when there was no second round).

    Settings not given come from the profile's ``drill`` section: ``knobs`` (``vllm_*``), ``engine``
    (``inference_backend``: ``"vllm"``, or ``"transformers"`` to skip vLLM), ``fallback``
    (``inference_fallback``: ``"transformers"`` or None), ``batch_size`` (of the fallback), ``threads``
    (``inference_workers``: CPU threads of the PPL pass and of the fallback) and ``timeout_s``
    (``inference_timeout_s``, for the engine's process).

    Order: the teacher-forced PPL pass (:func:`teacher_forced_ppl`; its model is freed before the
    engine starts), then one vLLM engine in a child process that answers every prompt and exits.
    When vLLM cannot run (no vLLM environment, ``import vllm`` fails, the engine crashes or times out)
    and ``fallback`` is ``"transformers"``, the reason is printed and transformers ``generate``
    answers instead (same prompt ids, stop tokens and budget); with ``fallback=None`` it raises
    :class:`VLLMUnavailable`. Returns ``{"answers": [{"response", "new_tokens", "finished"}],
    "ppl": {...} | None, "engine": {"engine", "version", "settings", "fallback_reason", "ppl",
    "truncated_prompts", "seconds", ...}}``. Introduced in lesson 06.
    """
    P = resolve_profile(profile)
    d = P.drill
    knobs = knobs or knobs_from_profile(P)
    engine = d.inference_backend if engine is _PROFILE else engine
    fallback = d.inference_fallback if fallback is _PROFILE else fallback
    batch_size = d.batch_size if batch_size is _PROFILE else batch_size
    threads = d.inference_workers if threads is _PROFILE else threads
    timeout_s = d.inference_timeout_s if timeout_s is _PROFILE else timeout_s
    if engine not in _ENGINES:
        raise ValueError(f"unknown inference engine {engine!r}; use one of {_ENGINES}")
    if fallback not in (None, "transformers"):
        raise ValueError(f"unknown inference fallback {fallback!r}; use 'transformers' or None")

    tok = load_tokenizer(model_path)
    stop = stop_token_ids(tok)
    max_len = model_max_len(model_path, knobs)
    room = max(16, max_len - knobs.response_max_tokens)
    prompt_ids, truncated = encode_prompts(tok, prompts, room, answer_prefixes)
    seconds: dict[str, float] = {}
    second: dict[str, Any] = {}      # the follow-up round: its prompts' prefixes, ids, truncations, answers

    def with_prefixes(answers: list[dict], prefixes) -> list[dict]:
        if prefixes is not None:
            for a, prefix in zip(answers, prefixes):
                if prefix:
                    a["response"] = prefix + a["response"]
        return answers

    def next_round(answers: list[dict]) -> list[list[int]] | None:
        """The follow-up prompts' ids, built from the first round's answers (their prefixes applied)."""
        spec = follow_up(answers) if follow_up is not None else None
        if spec is None:
            return None
        prompts2, prefixes2 = spec
        ids2, trunc2 = encode_prompts(tok, prompts2, room, prefixes2)
        second.update(prefixes=prefixes2, ids=ids2, truncated=trunc2)
        return ids2

    ppl = None
    t0 = time.monotonic()
    if ppl_pairs:   # before the engine starts: one copy of the model in memory at a time
        ppl = teacher_forced_ppl(model_path, ppl_pairs, threads=threads, max_length=max_len)
        _free_memory()
    seconds["ppl"] = round(time.monotonic() - t0, 2)

    answers = None
    fallback_reason = None
    info: dict[str, Any] = {}
    if engine == "vllm":
        try:
            decoded: list[dict] = []

            def engine_follow_up(raw: list[dict]) -> list[list[int]] | None:
                decoded[:] = with_prefixes([decode_answer(tok, a["token_ids"], stop) for a in raw],
                                           answer_prefixes)
                return next_round(decoded)

            res = generate_offline(model_path, prompt_ids, knobs, stop_token_ids=stop, timeout_s=timeout_s,
                                   follow_up=engine_follow_up if follow_up is not None else None)
            if follow_up is None:      # (with a follow-up, engine_follow_up has decoded the answers)
                decoded = with_prefixes([decode_answer(tok, a["token_ids"], stop) for a in res["answers"]],
                                        answer_prefixes)
            answers = decoded
            if res.get("follow_up") is not None:
                second["answers"] = [decode_answer(tok, a["token_ids"], stop) for a in res["follow_up"]]
            e = res["engine"]
            info = {"engine": "vllm", "version": e["version"], "device": e["device"], "python": e["python"],
                    "settings": {"knobs": knobs.as_dict(), "dtype": knobs.dtype,
                                 "kv_cache_gib": knobs.kv_cache_gib, "engine_args": e["engine_args"],
                                 "env": e["env"], "greedy": True}}
            seconds.update({f"engine_{k}": v for k, v in e["seconds"].items()})
        except VLLMUnavailable as exc:
            if fallback is None:
                raise
            answers = None
            second.clear()
            fallback_reason = str(exc)
            _say(f"inference: vLLM is unavailable for {model_path}: {fallback_reason}\n"
                 f"inference: falling back to transformers generate (greedy, float32; same answers, slower)", log)
    else:
        fallback_reason = "engine 'transformers' selected (inference_backend)"
    if answers is None:
        t1 = time.monotonic()
        gen = _generate_ids_transformers(model_path, prompt_ids, max_new_tokens=knobs.response_max_tokens,
                                        batch_size=batch_size, threads=threads, progress=False)
        answers = with_prefixes([decode_answer(tok, g, stop) for g in gen], answer_prefixes)
        seconds["generate"] = round(time.monotonic() - t1, 2)
        if next_round(answers) is not None:
            t2 = time.monotonic()
            gen = _generate_ids_transformers(model_path, second["ids"], max_new_tokens=knobs.response_max_tokens,
                                            batch_size=batch_size, threads=threads, progress=False)
            second["answers"] = [decode_answer(tok, g, stop) for g in gen]
            seconds["follow_up_generate"] = round(time.monotonic() - t2, 2)
        _free_memory()
        info = {"engine": "transformers", "version": _installed("transformers"), "device": "cpu",
                "settings": {"max_new_tokens": knobs.response_max_tokens, "batch_size": batch_size,
                             "threads": threads, "dtype": "float32", "greedy": True}}
    follow = with_prefixes(second["answers"], second["prefixes"]) if "answers" in second else None
    if follow is not None:
        info["follow_up_truncated_prompts"] = second["truncated"]
    info.update(fallback_reason=fallback_reason, truncated_prompts=truncated, max_model_len=max_len,
                ppl=None if ppl is None else f"transformers {_installed('transformers')}, teacher-forced, "
                                             "before the engine starts",
                seconds={**seconds, "total": round(time.monotonic() - t0, 2)})
    return {"answers": answers, "ppl": ppl, "engine": info, "follow_up": follow}

