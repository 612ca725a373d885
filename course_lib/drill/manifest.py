"""``<output-dir>/run_manifest.json``: which engine each drill step used, with which settings, and when.

One entry per step, keyed by the step's name::

    {"profile": "ci", "updated": "...", "steps": {
        "sft": {"step": "sft", "number": 3, "profile": "ci", "status": "ran", "cached": false,
                "started": "2026-12-03T12:00:00+00:00", "finished": "...", "seconds": 212.4,
                "engine": {"name": "LazyLLM → LLaMA-Factory", "base_model": "...", ...},
                "variants": {"raw_sft": {"status": "ran", "finetune": {...}}, ...}}, ...}}

Step 4's entry says which engine was configured (``engine``: ``vllm`` or ``transformers``, the vLLM knobs,
``dtype``, ``kv_cache_gib``, the interpreter and vLLM version found) and which one answered: ``used``,
``used_version`` and ``fallback_reason`` (None unless the transformers fallback ran), with each variant's
engine, version, settings and seconds under ``variants``.

``status`` is ``ran`` (at least one output was made), ``cached`` (every output was up to date, nothing
ran) or ``failed`` (with ``error``). A rerun merges into the existing file: steps that did not run keep
their entry; a step that was skipped because its outputs were cached keeps its earlier entry (start,
end, settings of the run that made the outputs), marked ``cached`` with the time it was last checked.

Introduced in lesson 07.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from course_lib.drill.store import atomic_write_text, log

if TYPE_CHECKING:  # pragma: no cover
    from course_lib.drill.run import DrillConfig

MANIFEST_NAME = "run_manifest.json"


def now() -> str:
    """The current UTC time, ISO 8601 with seconds."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def manifest_path(cfg: "DrillConfig") -> Path:
    return cfg.paths.output_dir / MANIFEST_NAME


def load_manifest(path: str | Path) -> dict[str, Any]:
    """The manifest at ``path``; an empty one when it is missing, and (with a warning) when it is not a
    manifest (then it is rewritten from this run). Introduced in lesson 07."""
    path = Path(path)
    empty: dict[str, Any] = {"steps": {}}
    if not path.exists():
        return empty
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        log().warning("%s is not valid JSON (%s): starting a new manifest", path.name, exc)
        return empty
    if not isinstance(data, dict) or not isinstance(data.get("steps"), dict):
        log().warning("%s is not a run manifest: starting a new one", path.name)
        return empty
    return data


def _sandbox_name(cfg: "DrillConfig") -> str | None:
    from course_lib.evaluation import sandbox

    try:
        return sandbox.resolve_backend(cfg.sandbox_backend)
    except (RuntimeError, ValueError, OSError):
        return cfg.sandbox_backend


def step_settings(cfg: "DrillConfig", step: str) -> dict[str, Any]:
    """The engine of ``step`` and the settings it runs with in ``cfg``. Introduced in lesson 07."""
    from course_lib.profiles import get_profile

    P = get_profile(cfg.profile)
    if step == "download":
        out: dict[str, Any] = {"name": "datasets (streaming)", "source": cfg.source, "train_size": cfg.train_size,
                               "eval_size": cfg.eval_size, "seed": cfg.seed,
                               "hidden_tests": Path(cfg.hidden_tests).name if cfg.hidden_tests else None}
        if cfg.source == "hub":
            out["dataset"] = cfg.dataset
        else:
            out["files"] = [Path(f).name for f in cfg.data_files or []]
        return out
    if step == "pipeline":
        from course_lib.drill.run import _pipeline_timeout

        out = {"name": "LazyLLM codegen pipeline (lesson 05)", "timeout_s": _pipeline_timeout(cfg),
               "min_score": P.pipeline.min_score, "max_score": P.pipeline.max_score}
        if cfg.profile == "ci":
            out["teacher"] = ("course rule teacher on 127.0.0.1 (course_lib.training.rule_teacher: code and tests "
                              "from the instruction alone; rules, not an LLM)")
        else:
            from course_lib.drill.preflight import teacher_endpoint

            t = teacher_endpoint(cfg)
            out.update(teacher=t.model, teacher_url=t.url)
        return out
    if step == "sft":
        from course_lib.drill.run import base_model_path

        return {"name": "LazyLLM → LLaMA-Factory (course_lib.training.sft.finetune)",
                "base_model": base_model_path(cfg), "sft_overrides": dict(cfg.sft_overrides)}
    if step == "inference":
        from course_lib.drill.run import inference_knobs
        from course_lib.drill.vllm_engine import installed_version, vllm_python

        knobs = inference_knobs(cfg)
        out = {"engine": cfg.inference_backend, "fallback": cfg.inference_fallback,
               "humaneval_subset": cfg.humaneval_subset, "ppl_samples": cfg.ppl_samples,
               "ppl": "transformers, teacher-forced, before the engine starts", "ppl_threads": cfg.inference_workers,
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
    if step == "evaluation":
        return {"name": "course sandbox (lesson 06)", "sandbox_backend": _sandbox_name(cfg),
                "timeout_s": cfg.timeout_s, "memory_mb": cfg.memory_mb, "workers": cfg.eval_workers}
    raise ValueError(f"unknown step {step!r}")


def engines_used(variants: dict[str, Any]) -> dict[str, Any]:
    """What step 4 really ran, from its variants' notes: ``used`` (``vllm`` / ``transformers``, or both
    joined by ``+`` when variants differ), ``used_version`` and ``fallback_reason`` (None when vLLM
    answered for every variant; else the first variant's reason). Introduced in lesson 07."""
    ran = [n for n in variants.values() if isinstance(n, dict) and n.get("engine")]
    if not ran:
        return {}
    names = list(dict.fromkeys(n["engine"] for n in ran))
    versions = list(dict.fromkeys(f"{n['engine']} {n.get('version')}" for n in ran))
    reasons = [n["fallback_reason"] for n in ran if n.get("fallback_reason")]
    return {"used": "+".join(names), "used_version": ", ".join(versions),
            "fallback_reason": reasons[0] if reasons else None}


def _was_cached(step: str, info: Any, notes: dict) -> bool:
    if notes:
        return all(n.get("status") == "cached" for n in notes.values())
    return info == {"skipped": True}


def record_step(cfg: "DrillConfig", step: str, started: str, seconds: float, info: Any, *,
                error: str | None = None) -> dict[str, Any]:
    """Merge the entry of ``step`` (just run, cached or failed) into the manifest and write it atomically.

    Returns the whole manifest. A failure to record a *failed* step is logged, never raised (the step's
    own error is what the user must see). Introduced in lesson 07.
    """
    from course_lib.drill.run import STEPS

    path = manifest_path(cfg)
    try:
        data = load_manifest(path)
        notes = cfg.run_notes.get(step, {})
        old = data["steps"].get(step)
        finished = now()
        if error is None and _was_cached(step, info, notes) and isinstance(old, dict) and old.get("status") != "failed":
            entry = {**old, "status": "cached", "cached": True, "checked": finished}
        else:
            status = "failed" if error is not None else ("cached" if _was_cached(step, info, notes) else "ran")
            entry = {"step": step, "number": STEPS.index(step) + 1, "profile": cfg.profile, "status": status,
                     "cached": status == "cached", "started": started, "finished": finished,
                     "seconds": round(seconds, 2), "engine": step_settings(cfg, step)}
            if notes:   # a variant cached in this run keeps what the run that made it recorded
                before = old.get("variants", {}) if isinstance(old, dict) else {}
                entry["variants"] = {v: ({**before[v], "status": "cached"}
                                         if n.get("status") == "cached" and isinstance(before.get(v), dict) else n)
                                     for v, n in notes.items()}
            if step == "inference" and entry.get("variants"):
                entry["engine"].update(engines_used(entry["variants"]))
            if error is not None:
                entry["error"] = error[:2000]
            elif isinstance(info, dict) and step in ("download", "pipeline"):
                entry["result"] = info
        data["steps"][step] = entry
        data["steps"] = {s: data["steps"][s] for s in STEPS if s in data["steps"]}
        data.update(profile=cfg.profile, updated=finished)
        atomic_write_text(path, json.dumps(data, indent=1, ensure_ascii=False, default=str))
    except Exception as exc:
        if error is None:
            raise
        log().warning("could not record the failed step %s in %s: %s", step, path.name, exc)
        return {}
    return data
