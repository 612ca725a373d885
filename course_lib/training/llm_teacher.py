"""A real LLM as the codegen pipeline's teacher: the profile's ``models.teacher`` served by vLLM on 127.0.0.1.

Lesson 05's pipeline asks a model three things per row (standardise the instruction, write the code, score
it 0–10). In ci the answers come from rules (:class:`~course_lib.training.teacher.OfflineTeacher`, lesson 07's
``RuleTeacher``); the full profile's path is a vLLM OpenAI-compatible server with the lecture's large teacher.
This module takes that same path on a CPU with the ci profile's real pretrained instruct model
(:mod:`course_lib.training.pretrained`: SmolLM2-135M-Instruct):

* :func:`serve_teacher` — a context manager: the course's vLLM (``.venv-vllm``, float32 on CPU, the profile's
  ``drill.vllm_*`` knobs) serves the model on a free port of 127.0.0.1
  (:class:`course_lib.evaluation.vllm_engine.VLLMServer`), waits until it answers, and stops it on exit.
  Greedy decoding (temperature 0) and ``models.teacher_max_new_tokens`` tokens per answer are the server's
  defaults, because LazyLLM's operators send no sampling settings;
* :func:`run_teacher_pipeline` — the lesson's LazyLLM pipeline (the same five operators,
  :func:`course_lib.training.codegen.run_codegen_pipeline`) with that server as the ``model`` of its three
  LLM operators, cached in ``<course cache>/codegen_llm/`` under a key made of the model's fingerprint, the
  rows and every setting: a second run reads the result back without starting vLLM;
* :func:`teacher_unavailable` — None, or why the teacher cannot run here (no vLLM environment, no model),
  for callers that skip and say so. Nothing here writes an answer in the model's place.

Introduced in lesson 05 (its pipeline demo with a real LLM teacher).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from course_lib import store
from course_lib.evaluation.vllm_engine import VLLMServer, VLLMUnavailable, knobs_from_profile, vllm_python
from course_lib.paths import cache_dir, display_path
from course_lib.profiles import ProfileLike, resolve_profile
from course_lib.training import codegen, pretrained

PIPELINE_KEYS = ("id", "idx", "row_id", "prompt", "instruction", "input", "messages", "response", "output")
"""The columns of a row that the pipeline reads (:func:`course_lib.training.codegen.run_codegen_pipeline`):
the cache key is made of these, and only these reach the pipeline (a row's hidden tests never do)."""

START_TIMEOUT_S = 600.0
"""Seconds the server may take to answer its first request (import ~15 s, engine start ~25 s on 2 idle
cores; several times that on a busy machine)."""


def teacher_model(profile: ProfileLike = "ci", model: str | None = None) -> Path:
    """The folder of the teacher model: ``model`` (a course model name of
    :data:`course_lib.training.pretrained.COURSE_MODELS` or a local folder), else the profile's
    ``models.teacher``, converted on first use (:func:`course_lib.training.pretrained.get_pretrained_model`).
    Raises ``RuntimeError`` for a hub id (the full profile's teacher is served on a GPU machine, see
    :func:`course_lib.drill.pipeline.teacher_endpoint`) or when the model cannot be fetched. Introduced in lesson 05."""
    P = resolve_profile(profile)
    if model is None:
        found = pretrained.get_pretrained_model(P, "teacher")
    elif model in pretrained.COURSE_MODELS:
        found = pretrained.build_course_model(model).path
    else:
        found = model
    if not Path(found).is_dir():
        raise RuntimeError(f"the teacher {found!r} is not a local model folder: a hub id is served on a GPU machine "
                           "(`python -m vllm.entrypoints.openai.api_server --model ...`, then COURSE_TEACHER_URL); "
                           "this serves the course's own models (ci: models.teacher)")
    return Path(found)


def teacher_unavailable(profile: ProfileLike = "ci", model: str | None = None) -> str | None:
    """None when :func:`serve_teacher` can run here; else why not (no vLLM environment and how to create
    it, a hub id, a model that cannot be fetched). Does not start vLLM. Introduced in lesson 05."""
    python, where = vllm_python()
    if python is None:
        return f"no vLLM to serve the teacher: {where}"
    try:
        teacher_model(profile, model)
    except (RuntimeError, ValueError, OSError) as exc:
        return f"no teacher model: {exc}"
    return None


def teacher_server(profile: ProfileLike = "ci", model: str | None = None, *, start_timeout_s: float = START_TIMEOUT_S,
                   log: Callable[[str], None] | None = print) -> VLLMServer:
    """The (not yet started) :class:`~course_lib.evaluation.vllm_engine.VLLMServer` of the teacher: the
    model of :func:`teacher_model`, the profile's vLLM knobs (``drill.vllm_*``: float32, the KV cache,
    ``max_num_seqs`` ...), greedy, ``models.teacher_max_new_tokens`` tokens per answer, served under the
    model's course name. Introduced in lesson 05."""
    P = resolve_profile(profile)
    folder = teacher_model(P, model)
    named = P.models.teacher if model is None else model
    name = named if named in pretrained.COURSE_MODELS else folder.name
    srv = VLLMServer(folder, knobs_from_profile(P), served_name=name, temperature=0.0,
                     max_tokens=int(P.models.teacher_max_new_tokens), start_timeout_s=start_timeout_s, log=log)
    srv.fingerprint = pretrained.model_fingerprint(folder)
    srv.description = (f"LLM teacher {name} (fingerprint {srv.fingerprint}) served by vLLM on 127.0.0.1 "
                       f"({srv.knobs.dtype}, greedy, <= {srv.max_tokens} tokens per answer)")
    return srv


@contextlib.contextmanager
def serve_teacher(profile: ProfileLike = "ci", model: str | None = None, *, start_timeout_s: float = START_TIMEOUT_S,
                  log: Callable[[str], None] | None = print) -> Iterator[VLLMServer]:
    """``with serve_teacher(P) as srv:`` — the profile's ``models.teacher`` (or ``model``) served by the
    course's vLLM on a free port of 127.0.0.1 for the block (:func:`teacher_server`); ``srv.url`` and
    ``srv.model_name`` are what OpenAI clients need. Raises
    :class:`~course_lib.evaluation.vllm_engine.VLLMUnavailable` saying why when vLLM cannot run or the server
    does not answer within ``start_timeout_s``. Introduced in lesson 05."""
    srv = teacher_server(profile, model, start_timeout_s=start_timeout_s, log=log)
    with srv:
        yield srv


@dataclass
class TeacherRun:
    """What :func:`run_teacher_pipeline` returns: the pipeline's kept rows and report (with every audited
    row in ``report.audited``), how it ran, and whether it came from the cache."""

    kept: list[dict]
    report: codegen.PipelineReport
    settings: dict[str, Any]
    engine: dict[str, Any]            # server start seconds, tokens written, load average, cpu count
    cached: bool
    path: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens_per_s(self) -> float | None:
        t, s = self.engine.get("tokens"), self.engine.get("pipeline_seconds")
        return t / s if t and s else None

    def summary(self) -> str:
        e = self.engine
        tps = self.tokens_per_s
        return (f"{self.report.n_input} rows through the pipeline with {self.settings['model']}: "
                f"{len(self.kept)} kept; server start {e.get('start_seconds')} s, pipeline {e.get('pipeline_seconds')} s"
                + (f", {e['tokens']} tokens written = {tps:.1f} tokens/s" if tps else "")
                + (f" (load average {e['loadavg_1min']:.1f} on {e.get('cpu_count')} cores)"
                   if e.get("loadavg_1min") is not None else "")
                + ("; read back from the cache" if self.cached else ""))


def pipeline_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict]:
    """``rows`` cut to the columns the pipeline reads (:data:`PIPELINE_KEYS`): what the teacher may see.
    Introduced in lesson 05."""
    return [{k: r[k] for k in PIPELINE_KEYS if k in r} if isinstance(r, Mapping) else r for r in rows]


def _key(payload: dict) -> str:
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def run_teacher_pipeline(rows: Sequence[Mapping[str, Any]], *, profile: ProfileLike = "ci", model: str | None = None,
                         timeout_s: float | None = None, min_score: int | None = None, max_score: int | None = None,
                         max_workers: int | None = None, cache: bool = True, name: str = "teacher",
                         start_timeout_s: float = START_TIMEOUT_S,
                         log: Callable[[str], None] | None = print) -> TeacherRun:
    """The lesson's LazyLLM codegen pipeline over ``rows`` with the LLM teacher of :func:`serve_teacher` as the
    model of its three LLM operators — from ``<course cache>/codegen_llm/<name>-<key>.json`` when the same
    model (fingerprint), rows (:func:`pipeline_rows`) and settings ran before, without starting vLLM.

    Only the pipeline's columns reach it (:func:`pipeline_rows`: never a hidden test). ``timeout_s`` (per
    request) None: the profile's ``models.teacher_timeout_s`` (a CPU server answers a full batch slowly);
    ``max_workers`` (requests in flight per operator) None: the server's ``max_num_seqs``, so vLLM batches
    them; ``min_score`` / ``max_score`` None: the profile's ``pipeline`` section. Raises
    :class:`~course_lib.evaluation.vllm_engine.VLLMUnavailable` / ``RuntimeError`` saying why when the teacher
    cannot run (check first with :func:`teacher_unavailable`). Introduced in lesson 05."""
    P = resolve_profile(profile)
    srv = teacher_server(P, model, start_timeout_s=start_timeout_s, log=log)
    items = pipeline_rows(rows)
    lo = P.pipeline.min_score if min_score is None else min_score
    hi = P.pipeline.max_score if max_score is None else max_score
    timeout_s = float(P.models.teacher_timeout_s if timeout_s is None else timeout_s)
    workers = int(max_workers or srv.knobs.max_num_seqs)
    try:
        from importlib.metadata import version

        lazyllm_version = version("lazyllm")
    except Exception:  # noqa: BLE001 - a source checkout has no metadata
        lazyllm_version = None
    settings = {"model": srv.model_name, "fingerprint": srv.fingerprint, "server": srv.settings(),
                "min_score": lo, "max_score": hi, "timeout_s": timeout_s, "max_workers": workers,
                "lazyllm": lazyllm_version}
    key = _key({"rows": items, "settings": settings})
    path = cache_dir("codegen_llm") / f"{name}-{key}.json"
    if cache and path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        report = codegen.PipelineReport(**data["report"])
        run = TeacherRun(data["kept"], report, data["settings"], data["engine"], cached=True, path=path)
        if log is not None:
            log(run.summary())
        return run
    with srv:
        tokens_before = srv.generated_tokens() or 0
        t0 = time.monotonic()
        kept, report = codegen.run_codegen_pipeline(items, profile=P, teacher=srv, timeout_s=timeout_s,
                                                    min_score=lo, max_score=hi, max_workers=workers, verbose=False)
        seconds = time.monotonic() - t0
        tokens_after = srv.generated_tokens()
        start_seconds = srv.start_seconds
    engine = {"start_seconds": start_seconds, "pipeline_seconds": round(seconds, 1),
              "tokens": None if tokens_after is None else tokens_after - tokens_before,
              "loadavg_1min": round(os.getloadavg()[0], 2), "cpu_count": os.cpu_count(),
              "vllm_python": srv.python}
    run = TeacherRun(list(kept), report, settings, engine, cached=False, path=path if cache else None)
    # a run the server did not finish (down, crashed, a request timed out) says nothing about the model: not cached
    failed = [d for d in report.dropped if d.get("stage") in ("teacher", "pipeline")
              or str(d.get("reason", "")).startswith("teacher unreachable or timed out")]
    run.extra["not_cached_because"] = failed[0]["reason"] if failed else None
    if cache and not failed:
        report_data = {**report.to_dict(), "audited": report.audited}
        report_data.pop("n_kept", None)
        store.atomic_write_text(path, json.dumps({"kept": run.kept, "report": report_data, "settings": settings,
                                                  "engine": engine, "model": display_path(srv.model)},
                                                 ensure_ascii=False, default=str))
    if log is not None:
        log(run.summary())
    return run


__all__ = ["PIPELINE_KEYS", "START_TIMEOUT_S", "TeacherRun", "VLLMUnavailable",
           "pipeline_rows", "run_teacher_pipeline", "serve_teacher", "teacher_model", "teacher_server",
           "teacher_unavailable"]
