"""Step 3 of the drill — SFT: fine-tune the base model on each variant's rows, side by side where it pays.

:func:`step_sft` fine-tunes every variant the ``sft`` step trains (``raw_sft`` on the raw training rows,
``pipeline_sft`` on the pipeline's ``codegen.json``) through lesson 05's
:func:`course_lib.training.sft.finetune` (LazyLLM → LLaMA-Factory), and writes
``<model-dir>/<variant>/sft_result.json`` (where step 4 finds the model) and ``loss.png``.

Side by side: in ci both runs train at once, each in its own spawned process with half the threads
(:func:`sft_side_by_side`, :func:`sft_executor`): two runs of the tiny model share the CPU better than one
run uses two threads. The rest of this module is what a process pool needs to be safe in a notebook: the
parent's ``__main__`` hidden from the spawned workers, and SIGINT sent to them when the run is stopped.

Introduced in lesson 07.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
from concurrent.futures import Executor
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from course_lib.drill.config import (
    DrillConfig,
    Need,
    RunState,
    Step,
    base_model_path,
    base_model_problems,
    use_lazyllm_path,
)
from course_lib.drill.outputs import (
    StepOutputError,
    has_weights,
    log,
    read_json_output,
    sha_or_none,
    up_to_date,
    write_json_output,
)
from course_lib.drill.pipeline import fence_if_bare
from course_lib.profiles import Profile

# --- the training rows -----------------------------------------------------------------------------


def _to_sft_rows(records: list[dict], language: str = "python") -> list[dict]:
    """Training rows ``{"instruction", "input", "output"}`` from tiny-codes rows or pipeline records.

    Accepts ``prompt``/``response`` (tiny-codes), ``instruction``/``output`` (alpaca), or ``messages``
    (chat). Pipeline outputs (bare code) are wrapped in a python fence (a ``language`` fence,
    :func:`fence_if_bare`). A
    record with neither raises, naming it. Introduced in lesson 07.
    """
    out = []
    for i, r in enumerate(records):
        if "instruction" in r and "output" in r:
            out.append({"instruction": r["instruction"], "input": r.get("input", "") or "",
                        "output": fence_if_bare(r["output"], language)})
        elif "prompt" in r and "response" in r:
            out.append({"instruction": r["prompt"], "input": "", "output": r["response"]})
        elif "messages" in r:
            user = next((m["content"] for m in r["messages"] if m.get("role") == "user"), None)
            answer = next((m["content"] for m in reversed(r["messages"]) if m.get("role") == "assistant"), None)
            if user is None or answer is None:
                raise ValueError(f"training record {i} has messages without a user and an assistant turn")
            out.append({"instruction": user, "input": "", "output": answer})
        else:
            raise ValueError(f"training record {i} has none of prompt/response, instruction/output, "
                             f"messages: keys {sorted(r)}")
    return out


def _data_of(cfg: DrillConfig, variant: str) -> tuple[Path, str]:
    """The rows ``variant`` trains on and the step that makes them (an ablation's: step 2,
    :mod:`course_lib.drill.ablations`)."""
    from course_lib.drill.config import ABLATIONS

    if variant == "pipeline_sft":
        return cfg.paths.codegen_json, "pipeline"
    if variant in ABLATIONS:
        return cfg.paths.ablation_json(variant), "pipeline"
    return cfg.paths.train_json, "download"


def _train_settings(cfg: DrillConfig) -> dict:
    """The LLaMA-Factory settings step 3 trains with: the profile's ``sft`` section (with ``bf16`` resolved
    for this CPU) under the drill's ``sft_overrides``, so that a change of either (e.g. ``sft.bf16`` through
    ``COURSE_PROFILE_OVERRIDES``) retrains instead of reusing a model trained otherwise."""
    from course_lib.training.sft import llamafactory_config

    return llamafactory_config(cfg.profile, **{k: v for k, v in cfg.sft_overrides.items()
                                               if k not in ("launcher", "launcher_options")})


def _sft_config(cfg: DrillConfig, variant: str) -> dict:
    return {"variant": variant, "data": sha_or_none(_data_of(cfg, variant)[0]), "base": cfg.sft_model or "profile",
            "profile": cfg.profile.name, "overrides": cfg.sft_overrides, "settings": _train_settings(cfg)}


def _save_loss_png(history: list[dict], path: Path, title: str) -> Path:
    """The loss curve as a PNG (atomically; a bare Figure, so no pyplot state or backend is touched)."""
    import io

    from matplotlib.figure import Figure

    from course_lib.training.sft import plot_loss

    fig = Figure(figsize=(6, 3.2))
    plot_loss([(h["step"], h["loss"]) for h in history], fig.subplots(), title=title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(buf.getvalue())
    tmp.replace(path)
    return path


# --- side by side: a pool of spawned processes -----------------------------------------------------

def sft_side_by_side(cfg: DrillConfig, jobs: int) -> int:
    """How many processes step 3 fine-tunes ``jobs`` variants in: all of them at once, up to one per training
    thread (:func:`course_lib.training.sft.train_threads`, at least 2; the ablations add variants, which then wait
    for a free process), when the profile's ``sft_parallel`` is on (ci: two SFT runs of the tiny model share the CPU better
    than one run uses two threads), else 1 (full: one GPU, one run after the other). Introduced in lesson 07."""
    from course_lib.training import sft

    return max(1, min(jobs, max(2, sft.train_threads(cfg.profile)))) if cfg.sft_parallel else 1


def sft_executor(jobs: int, threads: int, lazyllm_path: str | None = None) -> Executor:
    """The pool that fine-tunes ``jobs`` variants side by side: one spawned process each, with ``threads``
    CPU threads (LazyLLM's settings and ``OMP_NUM_THREADS`` are per process). Introduced in lesson 07."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_sft_process_setup, initargs=(threads, lazyllm_path))


def _sft_process_setup(threads: int, lazyllm_path: str | None) -> None:
    import signal

    # SIGINT means KeyboardInterrupt here (it is how step 3 stops a run), even when this process inherited
    # it ignored, as commands started in the background by a shell do
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    if lazyllm_path and lazyllm_path not in sys.path:
        sys.path.insert(0, lazyllm_path)


def _finetune(base: str, rows: list[dict], out_dir: Path, profile: Profile, overrides: dict):
    from course_lib.training import sft

    return sft.finetune(base, rows, out_dir, profile=profile, **overrides)


@contextlib.contextmanager
def _main_module_hidden():
    """While the pool spawns its workers: a spawned process runs the parent's ``__main__`` script again
    unless it is guarded by ``if __name__ == "__main__":`` (multiprocessing's rule), and a short script
    that calls :func:`run_drill` often is not. The workers need nothing from it, so they do not get it."""
    import types

    main = sys.modules.get("__main__")
    # kept on purpose: multiprocessing's spawn has no option to skip re-running the parent's __main__ script
    sys.modules["__main__"] = types.ModuleType("__main__")      # no __file__, no __spec__: nothing to rerun
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


def _interrupt_workers(pool: Executor) -> None:
    """Send SIGINT to a process pool's workers: finetune's ``finally`` then stops its LLaMA-Factory run."""
    import signal

    for pid in list(getattr(pool, "_processes", None) or {}):   # pid → process; a thread pool has none
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGINT)


# --- the step -------------------------------------------------------------------------------------

def _record_sft(cfg: DrillConfig, state: RunState, variant: str, job: tuple, result: Any, processes: int,
                threads: int) -> dict:
    """Check one variant's fine-tuned model and write its ``sft_result.json``, ``loss.png`` and run notes."""
    base, rows = job[0], job[1]
    out_dir = cfg.paths.model_for(variant)
    model_path = Path(result.merged_model)
    if not has_weights(model_path):
        raise StepOutputError(f"sft[{variant}]: no weights in {model_path} after fine-tuning (LazyLLM swallows "
                              "failures: check the log above and that llamafactory-cli is installed)")
    history = [{"step": int(st), "loss": float(lo)} for st, lo in result.loss_curve]
    _save_loss_png(history, out_dir / "loss.png", title=f"SFT loss ({variant})")
    write_json_output(cfg.paths.model_record(variant), {"model_path": str(model_path), "base_model": base,
                                                      "rows": len(rows), "loss_history": history},
                      _sft_config(cfg, variant))
    first, last = (history[0]["loss"], history[-1]["loss"]) if history else (None, None)
    state.notes.setdefault("sft", {})[variant] = {
        "status": "ran", "base_model": base, "rows": len(rows),
        "finetune": json.loads(json.dumps(dict(result.config or {}), default=str)),
        "train_runtime_s": getattr(result, "train_runtime", None), "processes": processes, "threads": threads}
    log().info("sft[%s]: done, loss %s → %s, model %s", variant, first, last, model_path)
    return {"rows": len(rows), "first_loss": first, "last_loss": last}


def step_sft(cfg: DrillConfig, state: RunState | None = None) -> dict:
    """Step 3: fine-tune the base model through lesson 05's ``course_lib.training.sft.finetune`` for each variant.

    In ci both variants train at once, each in its own process with half the threads
    (:func:`sft_side_by_side`). Writes ``<model-dir>/<variant>/sft_result.json`` (where step 4 finds the
    model) and ``loss.png``; notes each variant in ``state.notes["sft"]`` (the run's
    :class:`~course_lib.drill.config.RunState`). Introduced in lesson 07.
    """
    state = RunState() if state is None else state
    info: dict[str, Any] = {}
    notes = state.notes.setdefault("sft", {})
    jobs: dict[str, tuple] = {}
    for variant in cfg.trained_variants("sft"):
        res_path, conf = cfg.paths.model_record(variant), _sft_config(cfg, variant)
        if up_to_date([res_path], conf, cfg.force, f"sft[{variant}]"):
            info[variant] = {"skipped": True}
            notes[variant] = {"status": "cached"}
            continue
        use_lazyllm_path(cfg)
        data_path, made_by = _data_of(cfg, variant)
        rows = _to_sft_rows(read_json_output(data_path, made_by), cfg.language)
        out_dir = cfg.paths.model_for(variant)
        out_dir.mkdir(parents=True, exist_ok=True)
        jobs[variant] = (base_model_path(cfg), rows, out_dir / "run", cfg.profile, dict(cfg.sft_overrides))
    if not jobs:
        return info
    from course_lib.training import sft

    processes = sft_side_by_side(cfg, len(jobs))
    threads = max(1, sft.train_threads(cfg.profile) // processes)
    for variant, (base, rows, out, *_rest) in jobs.items():
        log().info("sft[%s]: fine-tuning %s on %d rows → %s%s", variant, base, len(rows), out.parent,
                   f" (side by side with {processes - 1} other, {threads} thread(s) each)" if processes > 1 else "")
    failed: Exception | None = None

    def done(variant: str, result: Any) -> None:     # record each model as soon as its run ends
        nonlocal failed
        try:
            if isinstance(result, BaseException):     # a KeyboardInterrupt goes on up
                raise result
            info[variant] = _record_sft(cfg, state, variant, jobs[variant], result, processes, threads)
        except Exception as e:
            log().error("sft[%s]: failed: %s", variant, e)
            failed = failed or e

    if processes > 1:
        from concurrent.futures import as_completed

        lazyllm_path = str(Path(cfg.lazyllm_path).resolve()) if cfg.lazyllm_path else None
        pool = sft_executor(processes, threads, lazyllm_path)
        try:
            with _main_module_hidden():
                futures = {pool.submit(_finetune, *job): v for v, job in jobs.items()}
            answered: set[str] = set()
            for fut in as_completed(futures):
                done(futures[fut], fut.exception() or fut.result())
                training = [futures[f] for f in futures if not f.done()]
                if failed is None and training:
                    # variants still queued for a process keep every process busy: no core is free then
                    answered |= answer_while_training(cfg, training, threads * min(len(training), processes),
                                                      answered, state=state)
        except BaseException:            # e.g. an interrupted notebook: stop the runs, not wait for them
            _interrupt_workers(pool)
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    else:
        for v, job in jobs.items():
            try:
                result = _finetune(*job)
            except Exception as e:
                done(v, e)
                break
            done(v, result)
    for variant in cfg.trained_variants("sft"):       # table order, not the order the runs ended in
        for d in (info, notes):
            if variant in d:
                d[variant] = d.pop(variant)
    if failed is not None:
        raise failed
    return info


def answer_while_training(cfg: DrillConfig, training: Sequence[str], busy_threads: int,
                          answered: set[str] = frozenset(), *, state: RunState | None = None) -> set[str]:
    """Step 4's work, done early: while the SFT runs in ``training`` still train (on ``busy_threads``
    threads), the models that are ready — the base model and the variants whose SFT has finished — answer
    on the cores the finished runs left free (ci, ``drill.answer_while_training``): vLLM bound to those
    cores, the PPL pass on as many threads. Step 4 then finds their answers done (its notes say
    ``answered_during``). Only when step 4 follows (``run_drill`` plans it, or the steps are called one by
    one; ``state``: the run's :class:`~course_lib.drill.config.RunState`, which says what is planned and gets
    step 4's notes). A failure here is logged and left to step 4. Returns the variants answered.
    Introduced in lesson 07."""
    from course_lib.drill import inference
    from course_lib.drill.outputs import output_state
    from course_lib.training import sft

    state = RunState() if state is None else state
    if not cfg.answer_while_training or (state.planned_steps and "inference" not in state.planned_steps):
        return set()
    free = sft.train_threads(cfg.profile) - busy_threads
    ready = [v for v in cfg.core_variants() if v not in answered and v not in training
             and (v == "base" or output_state(cfg.paths.model_record(v))[0])]
    if free < 1 or not ready:
        return set()
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    bind = ",".join(str(c) for c in cpus[-free:])
    log().info("inference[%s]: answering now, while %s trains, on %d free core(s) (CPU %s); step 4 finds these done",
               ", ".join(ready), ", ".join(training), free, bind)
    saved_bind = os.environ.get("VLLM_CPU_OMP_THREADS_BIND")
    os.environ["VLLM_CPU_OMP_THREADS_BIND"] = bind          # the engine's process inherits it (its threads, its cores)
    try:          # a copy of the settings with the free cores' threads: cfg itself is not changed
        inference.step_inference(replace(cfg, inference_workers=free), ready, state=state)
    except Exception as exc:           # step 4 answers them instead
        log().warning("inference[%s] while %s trains failed (%s: %s); step 4 will answer them",
                      ", ".join(ready), ", ".join(training), type(exc).__name__, exc)
        return set()
    finally:
        if saved_bind is None:
            os.environ.pop("VLLM_CPU_OMP_THREADS_BIND", None)
        else:
            os.environ["VLLM_CPU_OMP_THREADS_BIND"] = saved_bind
    notes = state.notes.setdefault("inference", {})
    for v in ready:
        if notes.get(v, {}).get("status") == "ran":
            notes[v]["answered_during"] = f"step 3 (sft), while {', '.join(training)} trained, on {free} core(s)"
    return set(ready)


def _needs(cfg: DrillConfig) -> list[Need]:
    out = []
    for v in cfg.trained_variants("sft"):
        path, made_by = _data_of(cfg, v)
        out.append(Need(path, made_by, "the training set" if made_by == "download" else
                        "the pipeline's codegen.json" if v == "pipeline_sft" else f"the ablation {v}'s training set"))
    return out


def _check(cfg: DrillConfig, steps: Sequence[str]) -> list[str]:
    return base_model_problems(cfg)


def _engine(cfg: DrillConfig) -> dict:
    return {"name": "LazyLLM → LLaMA-Factory (course_lib.training.sft.finetune)",
            "base_model": base_model_path(cfg), "sft_overrides": dict(cfg.sft_overrides)}


STEP = Step("sft", run=step_sft, needs=_needs, check=_check, engine=_engine, uses_gpu=True)
