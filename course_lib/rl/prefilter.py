"""The KAT notes' prompt filter before RL: "对每题采样 8 次，去掉全对与全错", done for real.

A group whose K rollouts all pass (or all fail) has reward minus group mean = 0 for every rollout: it costs a
generation round and teaches nothing. :func:`prefilter_prompts` samples ``samples`` answers per training prompt
from the starting model (the RL rollouts' protocol and temperature, :func:`course_lib.rl.passk.sample_completions`),
judges them with the hidden tests in the sandbox (:class:`course_lib.rl.rollouts.RolloutJudge`) and keeps the
prompts whose pass count is strictly between 0 and ``samples``. It samples the pool in a seeded order, a chunk at a
time, and stops once it has the prompts the run will use (``needed``: steps x prompts per step), so a short run
does not pay for a pass over every training row.

The result is cached per starting model (:func:`model_fingerprint`: the weights' and config's bytes), prompt
pool, K, temperature, completion length and seed, in a JSON file the caller names; a second run with the same
inputs reads it.

:func:`split_by_pass_count` is the rule alone (no model): what is kept, what is all-pass, what is all-fail.

Introduced in lesson 10.
"""
from __future__ import annotations

import hashlib
import json
import random
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from course_lib.rl.rollouts import RLPrompt, RolloutJudge
from course_lib.rl.settings import RLSettings

CHUNK = 32          # prompts sampled per round until enough are kept


def split_by_pass_count(counts: Mapping[str, int], samples: int) -> dict[str, list[str]]:
    """``{"kept", "all_pass", "all_fail"}``: the keys whose pass count out of ``samples`` lies strictly between 0
    and ``samples`` (a group with a learning signal), equals ``samples``, or is 0. Raises ``ValueError`` for a
    count outside 0..samples (naming the key). Introduced in lesson 10."""
    out: dict[str, list[str]] = {"kept": [], "all_pass": [], "all_fail": []}
    for key, c in counts.items():
        if not 0 <= int(c) <= samples:
            raise ValueError(f"prompt {key}: {c} passes out of {samples} samples is impossible")
        out["all_fail" if c == 0 else "all_pass" if c == samples else "kept"].append(key)
    return out


def model_fingerprint(model_dir: str | Path) -> str:
    """sha256 (16 hex digits) over the model folder's weight files and ``config.json``, names and bytes."""
    h = hashlib.sha256()
    folder = Path(model_dir)
    for f in sorted(folder.iterdir()):
        if f.is_file() and (f.suffix in (".safetensors", ".bin") or f.name == "config.json"):
            h.update(f.name.encode())
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
    return h.hexdigest()[:16]


def prefilter_prompts(model_dir: str | Path, prompts: Sequence[RLPrompt], settings: RLSettings, *,
                      needed: int | None = None, cache_path: str | Path | None = None,
                      log: Callable[[str], Any] | None = None,
                      sampler: Callable[..., list[list[str]]] | None = None) -> tuple[list[RLPrompt], dict[str, Any]]:
    """The prompts of ``prompts`` whose ``settings.prefilter_samples`` sampled answers from ``model_dir`` neither
    all pass nor all fail, in the seeded order they were sampled, and a report
    ``{"samples", "sampled_prompts", "kept", "all_pass", "all_fail", "needed", "pool", "pass_rate", "seconds",
    "cached", "kept_keys"}``.

    Stops sampling once ``needed`` prompts are kept (None: sample the whole pool). ``cache_path``: a JSON file
    holding the result for this model, pool and settings (read when its key matches, else written).
    ``sampler``: :func:`course_lib.rl.passk.sample_completions` unless given (same signature).
    Introduced in lesson 10."""
    k = int(settings.prefilter_samples)
    if k < 2:
        raise ValueError(f"prefilter_samples must be >= 2 to tell all-pass and all-fail from mixed, got {k}")
    key = {"model": model_fingerprint(model_dir), "pool": hashlib.sha256(
               json.dumps([[p.key, p.text, list(p.tests)] for p in prompts]).encode()).hexdigest()[:16],
           "samples": k, "temperature": settings.temperature, "max_completion_length": settings.max_completion_length,
           "seed": settings.seed, "needed": needed}
    by_key = {p.key: p for p in prompts}
    if cache_path and Path(cache_path).exists():
        try:
            cached = json.loads(Path(cache_path).read_text(encoding="utf-8"))
        except ValueError:
            cached = {}
        if cached.get("key") == key and all(x in by_key for x in cached["report"]["kept_keys"]):
            report = dict(cached["report"], cached=True)
            _say(log, f"rl prefilter: cached ({report['kept']} of {report['sampled_prompts']} sampled prompts kept)")
            return [by_key[x] for x in report["kept_keys"]], report
    if sampler is None:
        from course_lib.rl.passk import sample_completions as sampler
    order = list(prompts)
    random.Random(settings.seed).shuffle(order)
    t0 = time.monotonic()
    kept: list[RLPrompt] = []
    counts: dict[str, int] = {}
    split: dict[str, list[str]] = {"kept": [], "all_pass": [], "all_fail": []}
    for start in range(0, len(order), CHUNK):
        chunk = order[start:start + CHUNK]
        samples = sampler(model_dir, chunk, n=k, temperature=settings.temperature,
                          max_new_tokens=settings.max_completion_length, seed=settings.seed + start,
                          batch_size=settings.passk_batch_size, threads=settings.threads)
        keys = [p.key for p, answers in zip(chunk, samples) for _ in answers]
        verdict = RolloutJudge(chunk, settings).score(keys, [a for answers in samples for a in answers])
        these = {p.key: 0 for p in chunk}
        for x, ok in zip(keys, verdict["passed"]):
            these[x] += int(ok)
        counts.update(these)
        part = split_by_pass_count(these, k)
        for name in split:
            split[name] += part[name]
        kept += [by_key[x] for x in part["kept"]]
        _say(log, f"rl prefilter: {len(counts)} prompts x {k} samples: {len(split['kept'])} kept, "
                  f"{len(split['all_pass'])} all pass, {len(split['all_fail'])} all fail")
        if needed is not None and len(kept) >= needed:
            break
    report = {"samples": k, "sampled_prompts": len(counts), "kept": len(kept), "all_pass": len(split["all_pass"]),
              "all_fail": len(split["all_fail"]), "needed": needed, "pool": len(prompts),
              "pass_rate": round(sum(counts.values()) / (k * len(counts)), 4) if counts else None,
              "seconds": round(time.monotonic() - t0, 1), "cached": False, "kept_keys": [p.key for p in kept]}
    if cache_path:
        Path(cache_path).parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(str(cache_path) + ".tmp")
        tmp.write_text(json.dumps({"key": key, "report": report}, indent=1), encoding="utf-8")
        tmp.replace(cache_path)
    return kept, report


def _say(log, msg: str) -> None:
    if log is None:
        return
    (log.info if hasattr(log, "info") else log)(msg)
