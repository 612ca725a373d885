"""Evaluation hooks of the RL step: pass@k from K samples, and the drill's greedy test pass@1.

* :func:`sample_pass_at_k` — K answers per eval prompt at temperature 1 (the RL prompts' protocol: the
  task's ``def`` line given), each judged by the hidden tests in the sandbox, then pass@k for k = 1..K
  with the unbiased estimator (:func:`course_lib.evaluation.metrics.pass_at_k`), per eval part. Before
  and after RL it answers the lesson's question: does RL only sharpen (pass@1 up, pass@K flat), or does
  pass@K move too?
* :func:`greedy_test_pass1` — the drill's own test pass@1 on both eval parts, through the drill's
  functions (:func:`course_lib.drill.inference.run_model` with the signature round of step 4,
  :func:`course_lib.drill.evaluate.evaluate_answers` of step 5), so it is the number
  ``drill_metrics.json`` reports.

Sampling runs with transformers in this process (float32 on CPU; batched, left padding, the same prompt
ids and stop tokens as the drill's inference).

Introduced in lesson 10.
"""
from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

from course_lib.profiles import ProfileLike
from course_lib.rl.rollouts import RLPrompt, RolloutJudge, build_rl_prompts
from course_lib.rl.settings import RLSettings, rl_settings

PARTS = ("new instances", "held-out combinations")


def eval_prompts(eval_rows: Sequence[Mapping[str, Any]], tokenizer) -> tuple[list[RLPrompt], dict[str, str]]:
    """The eval rows with hidden tests as :class:`RLPrompt` (tests from the rows themselves), and each
    prompt's eval part by key."""
    prompts, _ = build_rl_prompts(eval_rows, {int(r["idx"]): r for r in eval_rows if r.get("tests")}, tokenizer)
    part = {str(r["idx"]): r.get("eval_part") or "" for r in eval_rows}
    return prompts, {p.key: part.get(p.key, "") for p in prompts}


def sample_completions(model_dir, prompts: Sequence[RLPrompt], *, n: int, temperature: float, max_new_tokens: int,
                       seed: int = 0, batch_size: int = 16, threads: int | None = 2) -> list[list[str]]:
    """``n`` sampled completions per prompt (what follows the prompt's prefix), with transformers.

    Prompt ids are built as the drill builds them (chat prompt and prefix encoded apart,
    :func:`course_lib.evaluation.generation.encode_prompts`); sampling at ``temperature`` with no top-k/top-p cut,
    stopping at the drill's stop tokens. Introduced in lesson 10.
    """
    import torch
    from transformers import GenerationConfig

    from course_lib.evaluation.generation import decode_answer, encode_prompts, load_model, stop_token_ids
    from course_lib.evaluation.vllm_engine import model_context

    tok, model = load_model(model_dir, threads=threads)
    stop = stop_token_ids(tok)
    pad = tok.pad_token_id if tok.pad_token_id is not None else stop[0]
    room = max(16, (model_context(model_dir) or 2048) - max_new_tokens)
    ids, _ = encode_prompts(tok, [p.instruction for p in prompts], room, [p.prefix for p in prompts])
    cfg = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=True, temperature=temperature, top_k=0, top_p=1.0,
                           num_return_sequences=n, eos_token_id=stop, pad_token_id=pad)
    torch.manual_seed(seed)
    out: list[list[str]] = [[] for _ in prompts]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    # generate() logs (in red, on stderr) that the explicit config overrides the model's saved
    # generation_config defaults — which is the point here, not an error: silence transformers' logger.
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            width = max(len(ids[i]) for i in chunk)
            inp = torch.tensor([[pad] * (width - len(ids[i])) + ids[i] for i in chunk])
            att = torch.tensor([[0] * (width - len(ids[i])) + [1] * len(ids[i]) for i in chunk])
            with torch.no_grad():
                gen = model.generate(input_ids=inp, attention_mask=att, generation_config=cfg)
            rows = gen[:, width:].tolist()
            for j, i in enumerate(chunk):
                out[i] = [decode_answer(tok, rows[j * n + s], stop)["response"] for s in range(n)]
    finally:
        hf_logging.set_verbosity(verbosity)
    del model
    return out


def pass_at_k_table(counts: Sequence[tuple[int, int]], ks: Sequence[int]) -> dict[str, float]:
    """``{"pass@k": mean over problems}`` for each k from ``(n, c)`` per problem. Introduced in lesson 10."""
    from course_lib.evaluation.metrics import mean_pass_at_k

    return {f"pass@{k}": mean_pass_at_k(counts, k) for k in ks}


def sample_pass_at_k(model_dir, eval_rows: Sequence[Mapping[str, Any]], settings: RLSettings | None = None, *,
                     n: int | None = None, limit_per_part: int | None = None) -> dict[str, Any]:
    """pass@k for k = 1..n (``n``: the settings' ``passk_samples``, K = 8) per eval part, from ``n``
    sampled answers per eval prompt judged by its hidden tests in the sandbox.

    Returns ``{"n", "temperature", "parts": {part: {"prompts", "pass@1", ..., "pass@n", "mean_correct"}},
    "seconds": {"sample", "judge"}}``. Introduced in lesson 10.
    """
    from course_lib.evaluation.generation import load_tokenizer

    s = settings or rl_settings("ci")
    n = int(n or s.passk_samples)
    prompts, part_of = eval_prompts(eval_rows, load_tokenizer(model_dir))
    if limit_per_part:
        seen: dict[str, int] = {}
        kept = []
        for p in prompts:
            seen[part_of[p.key]] = seen.get(part_of[p.key], 0) + 1
            if seen[part_of[p.key]] <= limit_per_part:
                kept.append(p)
        prompts = kept
    t0 = time.monotonic()
    samples = sample_completions(model_dir, prompts, n=n, temperature=s.passk_temperature,
                                 max_new_tokens=s.max_completion_length, seed=s.seed, batch_size=s.passk_batch_size,
                                 threads=s.threads)
    t1 = time.monotonic()
    judge = RolloutJudge(prompts, s)
    keys = [p.key for p, c in zip(prompts, samples) for _ in c]
    verdict = judge.score(keys, [x for c in samples for x in c])
    correct: dict[str, int] = {}
    for k, ok in zip(keys, verdict["passed"]):
        correct[k] = correct.get(k, 0) + int(ok)
    parts: dict[str, Any] = {}
    for part in sorted({part_of[p.key] for p in prompts}):
        counts = [(n, correct.get(p.key, 0)) for p in prompts if part_of[p.key] == part]
        parts[part] = {"prompts": len(counts), **pass_at_k_table(counts, range(1, n + 1)),
                       "mean_correct": sum(c for _, c in counts) / len(counts)}
    return {"n": n, "temperature": s.passk_temperature, "parts": parts,
            "groups_without_signal": verdict["stats"]["groups_without_signal"], "groups": verdict["stats"]["groups"],
            "seconds": {"sample": round(t1 - t0, 2), "judge": round(time.monotonic() - t1, 2)}}


def greedy_test_pass1(model_dir, eval_rows: Sequence[Mapping[str, Any]], *, profile: ProfileLike = "ci",
                      engine: str | None = None, workers: int = 2, log=None) -> dict[str, Any]:
    """The drill's test pass@1 of ``model_dir`` on each eval part: free answers, then the signature round
    (each answer's own lead-in and the task's ``def`` line, :func:`course_lib.drill.inference.signature_prefix`),
    greedy, with the drill's inference engine (``engine`` None: the profile's), judged by the drill's
    :func:`~course_lib.drill.evaluate.evaluate_answers`. Returns ``{part: pass@1, "held-out: <half>": pass@1,
    "engine", "seconds", "rows", "per_prompt"}``; ``per_prompt``: each prompt's outcome
    (:func:`course_lib.drill.evaluate.per_prompt_outcomes`: id, part, half, passed, status ...), what a paired
    interval needs (:func:`course_lib.drill.scoreboard.paired_comparison`). Introduced in lesson 10.
    """
    from pathlib import Path

    from course_lib.drill import evaluate, inference
    from course_lib.drill.inference import signature_prefix
    from course_lib.drill.taskgen import HOLDOUT_HALVES
    from course_lib.profiles import resolve_profile

    P = resolve_profile(profile)

    if Path(model_dir).exists():
        model_dir = str(Path(model_dir).resolve())   # the engine's process runs in a temp folder
    rows = [dict(r) for r in eval_rows]
    sig_rows = [i for i, r in enumerate(rows) if signature_prefix(r)]

    def signature_round(first: list[dict]):
        return ([rows[i]["prompt"] for i in sig_rows], [signature_prefix(rows[i], first[i]["response"]) for i in sig_rows])

    kw = {} if engine is None else {"engine": engine}
    t0 = time.monotonic()
    res = inference.run_model(model_dir, [r["prompt"] for r in rows], profile=P, follow_up=signature_round,
                              log=log, **kw)
    t1 = time.monotonic()
    records = []
    follow = dict(zip(sig_rows, res["follow_up"] or []))
    for i, (r, a) in enumerate(zip(rows, res["answers"])):
        rec = {"idx": r["idx"], "task": r.get("task", ""), "response": a["response"], "tests": r.get("tests"),
               "entry_point": r.get("entry_point"), "eval_part": r.get("eval_part", ""),
               "holdout_half": r.get("holdout_half", "")}
        if i in follow:
            rec["signature_response"] = follow[i]["response"]
        records.append(rec)
    report = evaluate.evaluate_answers(records, workers=workers, configured=P.sandbox.backend)
    out: dict[str, Any] = {}
    for part in PARTS:
        in_part = [x for x in report if x["eval_part"] == part and x["has_tests"]]
        if in_part:
            out[part] = sum(bool(x["correct"]) for x in in_part) / len(in_part)
    for half in HOLDOUT_HALVES:
        in_half = [x for x in report if x["holdout_half"] == half and x["has_tests"]]
        if in_half:
            out[f"held-out: {half}"] = sum(bool(x["correct"]) for x in in_half) / len(in_half)
    out.update(engine=res["engine"]["engine"], rows=len(report),
               seconds={"inference": round(t1 - t0, 2), "judge": round(time.monotonic() - t1, 2)},
               per_prompt=evaluate.per_prompt_outcomes(report))
    return out
