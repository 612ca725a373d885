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

from course_lib.drill.outputs import atomic_write_text, log

if TYPE_CHECKING:  # pragma: no cover
    from course_lib.drill.config import DrillConfig, RunState

_MANIFEST_NAME = "run_manifest.json"


def now() -> str:
    """The current UTC time, ISO 8601 with seconds."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _manifest_path(cfg: "DrillConfig") -> Path:
    return cfg.paths.output_dir / _MANIFEST_NAME


def _load_manifest(path: str | Path) -> dict[str, Any]:
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


def _engines_used(variants: dict[str, Any]) -> dict[str, Any]:
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
                error: str | None = None, state: "RunState | None" = None) -> dict[str, Any]:
    """Merge the entry of ``step`` (just run, cached or failed) into the manifest and write it atomically;
    the step's notes per variant come from the run's ``state`` (:class:`~course_lib.drill.config.RunState`).

    The entry's ``engine`` is the step's own description of its engine and settings
    (:attr:`course_lib.drill.config.Step.engine`). Returns the whole manifest. A failure to record a
    *failed* step is logged, never raised (the step's own error is what the user must see).
    Introduced in lesson 07.
    """
    from course_lib.drill.steps import STEPS, get_step

    path = _manifest_path(cfg)
    try:
        data = _load_manifest(path)
        notes = state.notes.get(step, {}) if state is not None else {}
        old = data["steps"].get(step)
        finished = now()
        if error is None and _was_cached(step, info, notes) and isinstance(old, dict) and old.get("status") != "failed":
            entry = {**old, "status": "cached", "cached": True, "checked": finished}
        else:
            status = "failed" if error is not None else ("cached" if _was_cached(step, info, notes) else "ran")
            entry = {"step": step, "number": STEPS.index(step) + 1, "profile": cfg.profile.name, "status": status,
                     "cached": status == "cached", "started": started, "finished": finished,
                     "seconds": round(seconds, 2), "engine": get_step(step).engine(cfg)}
            if notes:   # a variant cached in this run keeps what the run that made it recorded
                before = old.get("variants", {}) if isinstance(old, dict) else {}
                entry["variants"] = {v: ({**before[v], "status": "cached"}
                                         if n.get("status") == "cached" and isinstance(before.get(v), dict) else n)
                                     for v, n in notes.items()}
            if step == "inference" and entry.get("variants"):
                entry["engine"].update(_engines_used(entry["variants"]))
            if error is not None:
                entry["error"] = error[:2000]
            elif isinstance(info, dict) and step in ("download", "pipeline"):
                entry["result"] = info
        data["steps"][step] = entry
        data["steps"] = {s: data["steps"][s] for s in STEPS if s in data["steps"]}
        data.update(profile=cfg.profile.name, updated=finished)
        atomic_write_text(path, json.dumps(data, indent=1, ensure_ascii=False, default=str))
    except Exception as exc:
        if error is None:
            raise
        log().warning("could not record the failed step %s in %s: %s", step, path.name, exc)
        return {}
    return data
