"""The drill's reference row: a real pretrained instruct model, zero-shot, before any SFT.

The lecture's "before SFT" column is Qwen2.5-0.5B-Instruct (58.1 % Pass@1): a model that already follows
instructions. The ci drill's own base model has never seen one, so its "before SFT" is near zero. This row
puts the profile's pretrained model (``models.pretrained``: SmolLM2-135M-Instruct in ci,
:mod:`course_lib.training.pretrained`) through the drill's own protocol on a subset of its eval rows:

* the free answer to the instruction (greedy; the lecture's Pass@1, FCR, SER ... and test pass@1 on the free
  answer), then
* the signature-given answer (test pass@1: the model's own lead-in up to its first ``def`` line, then the
  task's ``def`` line, :func:`course_lib.drill.inference.signature_prefix`),

judged by :func:`course_lib.drill.evaluate.evaluate_answers` and scored by
:func:`course_lib.drill.scoreboard.drill_metrics`, exactly as the drill's variants are. Answers are cached by
:func:`course_lib.evaluation.model_samples.sample_answers` (model fingerprint + prompts + settings).

Introduced in lesson 07.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from course_lib.profiles import ProfileLike, resolve_profile

REFERENCE_LABEL = "pretrained, zero-shot"


def reference_rows(eval_rows: Sequence[dict], size: int) -> list[dict]:
    """``size`` eval rows with hidden tests, the same number from each eval part (in their order), so the
    row's "new instances" and "held-out combinations" rates rest on equal counts. Introduced in lesson 07."""
    parts: dict[str, list[dict]] = {}
    for r in eval_rows:
        if r.get("tests") and r.get("signature"):
            parts.setdefault(r.get("eval_part") or "", []).append(r)
    if not parts:
        return []
    per = max(1, size // len(parts))
    return [r for rows in parts.values() for r in rows[:per]]


def pretrained_reference(eval_rows: Sequence[dict], *, profile: ProfileLike = "ci", model: Any = None,
                         size: int | None = None, backend: str | None = None, workers: int = 8,
                         log: Callable[[str], None] | None = print) -> dict[str, Any]:
    """The pretrained model's zero-shot row on ``size`` (default ``models.reference_rows``) of the drill's
    ``eval_rows``: ``{"metrics"`` (:func:`~course_lib.drill.scoreboard.drill_metrics`' keys), ``"report"``
    (one row per answer), ``"records"`` (the rows with ``response`` and ``signature_response``),
    ``"generation"`` (one summary line per round), ``"model"}``. Greedy answers of at most
    ``models.reference_max_new_tokens`` tokens by ``models.engine``. Raises ``RuntimeError`` (no model)
    or the engine's error; it never makes an answer up. Introduced in lesson 07."""
    from course_lib.drill import evaluate, scoreboard
    from course_lib.drill.inference import signature_prefix
    from course_lib.evaluation.model_samples import sample_answers
    from course_lib.training.pretrained import describe, get_pretrained_model

    P = resolve_profile(profile)
    M = P.models
    model = model or get_pretrained_model(P)
    rows = reference_rows(eval_rows, size or M.reference_rows)
    prompts = [r["prompt"] for r in rows]
    kw = dict(n=1, temperature=0.0, max_new_tokens=M.reference_max_new_tokens, engine=M.engine, threads=M.threads,
              profile=P, progress=False, log=None)
    free = sample_answers(model, prompts, name="drill-reference-free", **kw)
    prefixes = [signature_prefix(r, a[0]["response"]) for r, a in zip(rows, free.answers)]
    given = sample_answers(model, prompts, answer_prefixes=prefixes, name="drill-reference-given", **kw)
    records = [{**r, "response": f[0]["response"], "signature_response": g[0]["response"]}
               for r, f, g in zip(rows, free.answers, given.answers)]
    report = evaluate.evaluate_answers(records, workers=workers, backend=backend)
    metrics = scoreboard.drill_metrics(evaluate.summarize(report))
    generation = {"free answers": free.summary(), "signature given": given.summary()}
    if log is not None:
        for what, line in generation.items():
            log(f"{what}: {line}")
    return {"metrics": metrics, "report": report, "records": records, "generation": generation,
            "seconds": free.seconds + given.seconds, "cached": free.cached and given.cached, "model": describe(model)}
