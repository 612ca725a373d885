"""Step 4 of the drill — inference: each model answers the eval prompts and a HumanEval subset; PPL.

:func:`step_inference` asks one engine per model (:func:`infer`, through
:func:`course_lib.evaluation.generation.run_model`: vLLM, or transformers ``generate`` as a fallback that says
why) and writes ``<output-dir>/<variant>/inference_results.json``, ``humaneval_generations.json`` and
``ppl.json`` (PPL on the references in two formats, :data:`PPL_FORMATS`). Eval rows with hidden tests are
answered a second time from the task's ``def`` line (:func:`signature_prefix`): those answers are what
test pass@1 runs in step 5.

Introduced in lesson 07.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

from course_lib.drill.config import DrillConfig, Need, RunState, Step, base_model_path, trained_by
from course_lib.drill.outputs import (
    StepOutputError,
    check_weights,
    has_weights,
    log,
    read_json_output,
    sha_or_none,
    up_to_date,
    write_json_output,
)
from course_lib.drill.pipeline import reference_in_pipeline_format
from course_lib.evaluation.generation import run_model
from course_lib.evaluation.vllm_engine import VLLMKnobs


def model_path_for(cfg: DrillConfig, variant: str) -> str:
    """Where step 4 finds the model of ``variant`` (raises naming the step to run when it is missing)."""
    if variant == "base":
        base = base_model_path(cfg)
        if Path(base).is_dir():
            check_weights(base, "copy or download the base model again (ci: delete lesson 04's tiny-model "
                                "folder in the course cache and rerun lesson 04)")
        return base
    res = read_json_output(cfg.paths.model_record(variant), "sft")
    if not has_weights(res["model_path"]) and not str(res["model_path"]).startswith("hf://"):
        raise StepOutputError(f"no fine-tuned model at {res['model_path']}; run step 3 "
                              f"(`--only-step sft --force`)")
    check_weights(res["model_path"], "run step 3 again: `python -m course_lib.drill --only-step sft --force`")
    return res["model_path"]


def _model_fingerprint(cfg: DrillConfig, variant: str) -> str | None:
    if variant == "base":
        return cfg.sft_model or f"profile:{cfg.profile.name}"
    return sha_or_none(cfg.paths.model_record(variant))


def inference_knobs(cfg: DrillConfig) -> VLLMKnobs:
    """The vLLM knobs of step 4, with ``--max-new-tokens`` (when given) as the answer budget."""
    if cfg.max_new_tokens:
        from dataclasses import replace

        return replace(cfg.vllm, response_max_tokens=int(cfg.max_new_tokens))
    return cfg.vllm


def _inference_config(cfg: DrillConfig, variant: str) -> dict:
    conf = {"variant": variant, "model": _model_fingerprint(cfg, variant),
            "eval": sha_or_none(cfg.paths.eval_json), "engine": cfg.inference_backend,
            "knobs": inference_knobs(cfg).as_dict(), "humaneval_subset": cfg.humaneval_subset,
            "ppl_samples": cfg.ppl_samples, "signature_given": "own lead-in + def line, v2",
            "ppl_formats": PPL_FORMATS}
    if cfg.language != "python":   # the Python key is unchanged
        conf.update(language=cfg.language, signature_given="own lead-in (#include lines) + declaration + ' {', v1")
    return conf


PPL_FORMATS = "raw (the eval answers as they are) + pipeline (as the pipeline writes them, v2)"
"""The reference formats step 4 scores PPL on (part of its cache key: a change reruns step 4)."""


def pipeline_ppl(cfg: DrillConfig, model_path: str, pairs: list[tuple[str, str]]) -> dict:
    """PPL of a model on the references in the pipeline's format (after its engine has exited: one model
    in memory at a time). Introduced in lesson 07."""
    from course_lib.evaluation.generation import model_max_len, teacher_forced_ppl

    if not pairs:
        return {"ppl": float("nan"), "nll": float("nan"), "tokens": 0, "samples": 0}
    return teacher_forced_ppl(model_path, pairs, threads=cfg.inference_workers,
                              max_length=model_max_len(model_path, inference_knobs(cfg)))


# test pass@1's protocol: the model answers freely; its first `def` line is replaced by the one the task
# asks for, and the model writes the rest again from there (HumanEval gives the signature the same way)
DEFAULT_LEAD_IN = "```python\n"


def _row_language(row: dict) -> str:
    from course_lib.drill.download import is_language

    return "cpp" if is_language(row, "cpp") else "python"


def cpp_default_lead_in(signature: str) -> str:
    """The lead-in test pass@1 gives a C++ answer that defined no function: a ```` ```cpp ```` fence and the
    ``#include`` lines the declaration's types need (``<string>``, ``<vector>``), as HumanEval's prompt
    carries its imports. Introduced for issue 38."""
    heads = [h for h, word in (("string", "string"), ("vector", "vector")) if word in signature]
    return "```cpp\n" + "".join(f"#include <{h}>\n" for h in heads) + ("\n" if heads else "")


def signature_prefix(row: dict, free_answer: str | None = None, language: str | None = None) -> str | None:
    """The start of the answer that test pass@1 gives the model for an eval row with hidden tests: the
    model's own free answer up to its first function definition (prose, the ```` ```python ```` fence;
    :func:`course_lib.evaluation.extract.answer_lead_in`), or ```` ```python ```` when it defined none,
    followed by the task's ``def`` line (``signature`` of the hidden-test record). So every model
    keeps its own answer format and only the name and argument of the function are given, as
    HumanEval's prompt ends with the signature. None for rows without a signature (hub rows).

    C++ (``language="cpp"``; None: the row's ``programming_language``, issue 38): the lead-in ends before the
    free answer's first function definition in a cpp fence, so its ``#include`` lines stay (without one:
    :func:`cpp_default_lead_in`), then the task's declaration and `` {``: the model writes the body."""
    from course_lib.evaluation.extract import answer_lead_in

    sig = row.get("signature")
    if not (sig and row.get("tests")):
        return None
    language = language or _row_language(row)
    if language != "python":
        lead = answer_lead_in(free_answer, language) if free_answer else None
        return (lead if lead is not None else cpp_default_lead_in(sig)) + sig + " {\n"
    lead = answer_lead_in(free_answer) if free_answer else None
    return (lead if lead is not None else DEFAULT_LEAD_IN) + sig + "\n"


def infer(cfg: DrillConfig, model_path: str, prompts: list[str], ppl_pairs: list[tuple[str, str]],
          answer_prefixes: list[str | None] | None = None, follow_up=None) -> dict:
    """One model's answers to ``prompts`` and its PPL on ``ppl_pairs`` with the configured engine
    (:func:`run_model`, from :mod:`course_lib.evaluation.generation`: vLLM, or the transformers fallback saying
    why);
    ``follow_up`` builds a second round from the answers, for the same engine."""
    return run_model(model_path, prompts, ppl_pairs, profile=cfg.profile, knobs=inference_knobs(cfg),
                               engine=cfg.inference_backend, fallback=cfg.inference_fallback,
                               batch_size=cfg.batch_size, threads=cfg.inference_workers,
                               timeout_s=cfg.inference_timeout_s, log=log(), answer_prefixes=answer_prefixes,
                               follow_up=follow_up)


def step_inference(cfg: DrillConfig, variants: Sequence[str] | None = None, state: RunState | None = None) -> dict:
    """Step 4: each model answers the eval prompts and a HumanEval subset; PPL on the references.

    One engine per model (:func:`infer`): the eval and HumanEval prompts go to it in one go, and it is
    shut down (its process exits) before the next model starts. Eval rows with hidden tests are then
    answered once more (a second round for the same engine), each from its free answer's lead-in and the task's
    ``def`` line (:func:`signature_prefix`): those answers are what test pass@1 runs. Writes
    ``<output-dir>/<variant>/inference_results.json``, ``humaneval_generations.json`` and ``ppl.json``;
    which engine answered, with which settings (and why it fell back, if it did), goes to the run
    manifest (through ``state.notes["inference"]``, the run's :class:`~course_lib.drill.config.RunState`).
    ``variants`` (default :meth:`DrillConfig.core_variants`): the models to answer (the ``rl`` step passes
    its own). Introduced in lesson 07.
    """
    from course_lib.drill import evaluate

    state = RunState() if state is None else state
    info: dict[str, Any] = {}
    notes = state.notes.setdefault("inference", {})
    evals = None
    for variant in (cfg.core_variants() if variants is None else variants):
        out, conf = cfg.paths.output_for(variant), _inference_config(cfg, variant)
        files = {"answers": out / "inference_results.json", "humaneval": out / "humaneval_generations.json",
                 "ppl": out / "ppl.json"}
        early = variant in answered_now(cfg, state)     # answered by step 3 of this run (its note says so)
        if up_to_date(list(files.values()), conf, cfg.force and not early, f"inference[{variant}]"):
            info[variant] = {"skipped": True}
            if not early:
                notes[variant] = {"status": "cached"}
            continue
        evals = evals if evals is not None else read_json_output(cfg.paths.eval_json, "download")
        model_path = model_path_for(cfg, variant)
        problems = evaluate.humaneval_problems(cfg.humaneval_subset) if cfg.humaneval_subset else []
        prompts = [r["prompt"] for r in evals]
        he_prompts = [evaluate.HUMANEVAL_INSTRUCTION.format(prompt=p["prompt"]) for p in problems]
        # PPL on both formats of the eval references: the answers as they are (raw: prose + code, what raw SFT
        # trains on) and as the pipeline writes them (its code in one fence, what pipeline SFT trains on)
        refs = evals[: cfg.ppl_samples or len(evals)]
        pairs = [(r["prompt"], r["response"]) for r in refs]
        pipeline_pairs = [(r["prompt"], reference_in_pipeline_format(r["response"], r["prompt"], cfg.language))
                          for r in refs]
        log().info("inference[%s]: %d eval + %d HumanEval prompts, PPL on %d references, %s (%s)", variant,
                   len(prompts), len(he_prompts), len(pairs), model_path, cfg.inference_backend)
        # test pass@1: each eval row with hidden tests again, its free answer's def line replaced by the
        # task's signature (signature_prefix): a second round for the same engine, built from the first's answers
        sig_rows = [i for i, r in enumerate(evals) if signature_prefix(r, language=cfg.language)]

        def signature_round(first: list[dict], evals=evals, sig_rows=sig_rows):
            if not sig_rows:
                return None
            return ([evals[i]["prompt"] for i in sig_rows],
                    [signature_prefix(evals[i], first[i]["response"], cfg.language) for i in sig_rows])

        t0 = time.monotonic()
        res = infer(cfg, model_path, prompts + he_prompts, pairs, follow_up=signature_round)
        secs = time.monotonic() - t0
        if len(res["answers"]) != len(prompts) + len(he_prompts):   # never silently drop a prompt
            raise StepOutputError(f"inference[{variant}]: {len(prompts) + len(he_prompts)} prompts but "
                                  f"{len(res['answers'])} answers")
        answers, he_answers = res["answers"][: len(prompts)], res["answers"][len(prompts):]
        sig_answers: dict[int, dict] = {}
        if sig_rows:
            if len(res["follow_up"] or []) != len(sig_rows):
                raise StepOutputError(f"inference[{variant}]: {len(sig_rows)} signature prompts but "
                                      f"{len(res['follow_up'] or [])} answers")
            sig_answers = dict(zip(sig_rows, res["follow_up"]))
            log().info("inference[%s]: %d answers again with the task's signature given (same engine, %s s)",
                       variant, len(sig_rows), res["engine"]["seconds"].get(
                           "engine_follow_up_generate", res["engine"]["seconds"].get("follow_up_generate")))
        records = []
        for i, (r, a) in enumerate(zip(evals, answers)):
            rec = {"idx": r["idx"], "task": r.get("task", ""), "prompt": r["prompt"],
                   "response": a["response"], "reference": r["response"], "new_tokens": a["new_tokens"],
                   "finished": a["finished"]}
            if r.get("tests"):
                rec["tests"], rec["entry_point"] = r["tests"], r.get("entry_point")
            if i in sig_answers:
                rec["signature"] = r["signature"]
                rec["signature_response"] = sig_answers[i]["response"]
            if r.get("eval_part"):
                rec["eval_part"] = r["eval_part"]
            if r.get("holdout_half"):
                rec["holdout_half"] = r["holdout_half"]
            records.append(rec)
        write_json_output(files["answers"], records, conf)
        write_json_output(files["humaneval"], [{"task_id": p["task_id"], "response": a["response"]}
                                               for p, a in zip(problems, he_answers)], conf)
        ppl = res["ppl"] or {"ppl": float("nan"), "nll": float("nan"), "tokens": 0, "samples": 0}
        ppl = {**ppl, "format": "raw", "formats": {"raw": dict(ppl), "pipeline": pipeline_ppl(cfg, model_path,
                                                                                             pipeline_pairs)}}
        write_json_output(files["ppl"], ppl, conf)
        engine = res["engine"]
        tokens = sum(a["new_tokens"] for a in res["answers"])   # the free answers' run
        gen_s = engine["seconds"].get("engine_generate", engine["seconds"].get("generate", secs))
        log().info("inference[%s]: %s %s answered %d prompts, %d new tokens (%.0f tokens/s while generating); "
                   "PPL %.2f over %d reference tokens; %.1f s in all", variant, engine["engine"],
                   engine.get("version") or "", len(res["answers"]), tokens, tokens / max(gen_s, 1e-9),
                   ppl["ppl"], ppl["tokens"], secs)
        info[variant] = {"answers": len(records), "humaneval": len(he_answers), "seconds": round(secs, 1),
                         "ppl": ppl["ppl"], "engine": engine["engine"]}
        notes[variant] = {"status": "ran", "model": model_path, "answers": len(records), "new_tokens": tokens,
                          "humaneval_problems": len(problems), **engine,
                          "signature_answers": len(sig_answers),
                          "signature_engine": res["engine"]["engine"] if sig_answers else None}
    return info


def answered_now(cfg: DrillConfig, state: RunState | None = None) -> list[str]:
    """The variants step 3 of this run (``state``, the run's :class:`~course_lib.drill.config.RunState`) has
    already answered (their step-4 notes say so): step 3 answers with the models that are ready while the
    last SFT run trains (:func:`course_lib.drill.finetune.step_sft`), and step 4 then finds them done.
    Introduced in lesson 07."""
    if state is None:
        return []
    return [v for v, n in state.notes.get("inference", {}).items()
            if n.get("status") == "ran" and n.get("answered_during")]


def _needs(cfg: DrillConfig) -> list[Need]:
    return [Need(cfg.paths.eval_json, "download", "the eval set")] + [
        Need(cfg.paths.model_record(v), trained_by(v), f"the fine-tuned model of {v}")
        for v in cfg.trained_variants() if v in cfg.core_variants()]


def _check(cfg: DrillConfig, steps: Sequence[str]) -> list[str]:
    from course_lib.drill.config import base_model_problems

    problems = []
    if "base" in cfg.variants() and "sft" not in steps:
        problems += base_model_problems(cfg)
    if cfg.inference_backend == "vllm" and not cfg.inference_fallback:
        from course_lib.evaluation.vllm_engine import vllm_python

        python, why = vllm_python()
        if python is None:
            problems.append(f"step 4 needs vLLM (this profile has no transformers fallback): {why}")
    return problems


def _engine(cfg: DrillConfig) -> dict:
    from course_lib.evaluation.vllm_engine import installed_version, vllm_python

    knobs = inference_knobs(cfg)
    out = {"engine": cfg.inference_backend, "fallback": cfg.inference_fallback,
           "humaneval_subset": cfg.humaneval_subset, "ppl_samples": cfg.ppl_samples,
           "ppl": "transformers, teacher-forced: raw format before the engine starts, pipeline format after it "
                  "exits", "ppl_formats": PPL_FORMATS, "ppl_threads": cfg.inference_workers,
           "max_new_tokens": knobs.response_max_tokens}
    if cfg.inference_backend == "vllm":
        python, found = vllm_python()
        out.update(name="vLLM offline engine (greedy), one child process per model", vllm=knobs.as_dict(),
                   dtype=knobs.dtype, kv_cache_gib=knobs.kv_cache_gib, enforce_eager=knobs.enforce_eager,
                   timeout_s=cfg.inference_timeout_s, python=python or found,
                   version=installed_version(python) if python else None)
        if cfg.inference_fallback:
            out["fallback_settings"] = {"batch_size": cfg.batch_size, "threads": cfg.inference_workers}
    else:
        out.update(name="transformers generate (greedy, batched, float32)", batch_size=cfg.batch_size,
                   threads=cfg.inference_workers)
    return out


def _run(cfg: DrillConfig, state: RunState) -> dict:
    return step_inference(cfg, state=state)


STEP = Step("inference", run=_run, needs=_needs, check=_check, engine=_engine, uses_gpu=True)
