"""The drill's five steps (the lesson's ``run.py``): download → pipeline → SFT → inference → evaluation.

Each step skips itself when its outputs are whole and were made with the same configuration (``force``
redoes it), writes atomically, and logs with timestamps. Missing prerequisites are found *before*
anything runs, with a sentence naming the step to run. The same functions drive the CLI
(``python -m course_lib.drill``), the notebook ``07_tiny_codes_drill`` and the tests.

Model variants: ``base`` (the model before SFT), ``pipeline_sft`` (SFT on the lesson 05 pipeline's
``codegen.json``, the lesson's one-click run) and ``raw_sft`` (SFT straight on ``train_python.json``,
the lesson's ``run_sft.py``, selected by ``--no-pipeline`` or compared with ``compare_raw``).

Introduced in lesson 07.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from concurrent.futures import Executor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable

from course_lib.drill.store import (
    DrillPaths,
    StepOutputError,
    atomic_write_text,
    check_weights,
    clear_done,
    log,
    mark_done,
    output_state,
    read_json_output,
    sha256_file,
    up_to_date,
    write_json_output,
)
from course_lib.drill.vllm_engine import VLLMKnobs, knobs_from_profile
from course_lib.evaluation import sandbox

STEPS = ("download", "pipeline", "sft", "inference", "evaluation")


class PrerequisiteError(RuntimeError):
    """Something a selected step needs is missing; the message names the step to run."""


@dataclass
class DrillConfig:
    """Everything one drill run needs; :func:`config_from_profile` fills it from a profile.

    Introduced in lesson 07.
    """

    # settings of the profile's ``drill`` and ``sandbox`` sections (no defaults here: the profile is the
    # one source of their values; config_from_profile fills them)
    profile: str
    train_size: int
    eval_size: int
    humaneval_subset: int
    seed: int
    source: str                                 # "assets" (ci sample) | "hub" | "local"
    dataset: str
    compare_raw: bool
    vllm: VLLMKnobs
    inference_backend: str                      # "vllm" (both profiles) | "transformers"
    inference_fallback: str | None              # "transformers" (ci) | None (full: vLLM or an error)
    inference_timeout_s: float
    batch_size: int
    inference_workers: int
    eval_workers: int
    sandbox_backend: str | None
    timeout_s: float
    memory_mb: int
    ppl_samples: int | None
    sft_overrides: dict[str, Any]
    sft_parallel: bool                          # step 3 trains the SFT variants side by side
    # settings of one run (command-line options)
    paths: DrillPaths | None = None
    data_files: list[str] | None = None         # local files for source="local"/"assets"
    hidden_tests: str | None = None             # hidden_tests.jsonl (ci sample): evaluation (and RL) only
    eval_split: str | None = None               # eval_split.json (ci sample): which rows are eval rows
    lazyllm_path: str | None = None
    pipeline_model: str | None = None           # the teacher of the lesson 05 pipeline
    sft_model: str | None = None                # the base model that SFT starts from
    use_pipeline: bool = True
    max_new_tokens: int | None = None           # answer budget (--max-new-tokens); None: vllm.response_max_tokens
    evaluate_base: bool = True
    force: bool = False
    # what each step of the current run did per variant ("ran" / "cached", plus the SFT settings used);
    # filled by the steps, read by course_lib.drill.manifest; not a setting
    run_notes: dict[str, dict] = field(default_factory=dict)

    def variants(self) -> list[str]:
        """The models this run trains and evaluates, in table order."""
        out = ["base"] if self.evaluate_base else []
        if self.compare_raw or not self.use_pipeline:
            out.append("raw_sft")
        if self.use_pipeline:
            out.append("pipeline_sft")
        return out

    def trained_variants(self) -> list[str]:
        return [v for v in self.variants() if v != "base"]


def default_root(profile: str) -> Path:
    """The drill's folder in the course cache (shared by the CLI, the notebook and the tests)."""
    from course_lib.paths import cache_dir

    return cache_dir("drill", profile)


def config_from_profile(profile: str = "ci", **overrides: Any) -> DrillConfig:
    """A :class:`DrillConfig` from ``get_profile(profile).drill`` plus ``overrides``.

    Introduced in lesson 07.
    """
    from course_lib.profiles import get_profile

    P = get_profile(profile)
    d = P.drill
    knobs = knobs_from_profile(profile)
    cfg = DrillConfig(
        profile=profile, train_size=d.train_size, eval_size=d.eval_size,
        humaneval_subset=d.humaneval_subset, seed=P.seed, source=d.source, dataset=d.dataset,
        compare_raw=d.compare_raw, vllm=knobs, inference_backend=d.inference_backend,
        inference_fallback=d.inference_fallback, inference_timeout_s=float(d.inference_timeout_s),
        batch_size=d.batch_size, inference_workers=d.inference_workers,
        eval_workers=d.eval_workers, sandbox_backend=d.sandbox_backend or None, timeout_s=P.sandbox.timeout_s,
        memory_mb=P.sandbox.memory_mb, ppl_samples=d.ppl_samples, sft_overrides=dict(d.sft_overrides),
        sft_parallel=bool(d.sft_parallel),
    )
    for k, v in overrides.items():
        if v is None:
            continue
        if not hasattr(cfg, k):
            raise TypeError(f"DrillConfig has no setting {k!r}")
        setattr(cfg, k, v)
    if cfg.paths is None:
        cfg.paths = DrillPaths.under(default_root(profile))
    if cfg.source == "assets" and cfg.data_files is None:
        from course_lib.paths import assets_dir

        cfg.data_files = [str(assets_dir("tiny_codes", "tiny_codes_sample.jsonl"))]
        cfg.hidden_tests = cfg.hidden_tests or str(assets_dir("tiny_codes", "hidden_tests.jsonl"))
        cfg.eval_split = cfg.eval_split or str(assets_dir("tiny_codes", "eval_split.json"))
    return cfg


# --- small helpers -------------------------------------------------------------------------------

def _sha_or_none(path: str | Path | None) -> str | None:
    return sha256_file(path) if path and Path(path).exists() else None


def _use_lazyllm_path(cfg: DrillConfig) -> None:
    if cfg.lazyllm_path:
        p = str(Path(cfg.lazyllm_path).resolve())
        if not Path(p).exists():
            raise PrerequisiteError(f"--lazyllm-path {cfg.lazyllm_path} does not exist")
        if p not in sys.path:
            sys.path.insert(0, p)


def _skip(path: Path, config: dict, force: bool, what: str) -> bool:
    return up_to_date([path], config, force, what)


# --- step 1: download ----------------------------------------------------------------------------

def _download_config(cfg: DrillConfig) -> dict:
    files = cfg.data_files if cfg.source != "hub" else None
    return {"source": cfg.source, "dataset": cfg.dataset if cfg.source == "hub" else None,
            "files": {Path(f).name: _sha_or_none(f) for f in files} if files else None,
            "hidden_tests": _sha_or_none(cfg.hidden_tests), "eval_split": _sha_or_none(cfg.eval_split),
            "train_size": cfg.train_size,
            "eval_size": cfg.eval_size, "seed": cfg.seed}


def step_download(cfg: DrillConfig) -> dict:
    """Step 1: stream tiny-codes, keep Python rows, write ``train_python.json`` and ``eval_python.json``.

    Introduced in lesson 07.
    """
    from course_lib.drill import data

    p, conf = cfg.paths, _download_config(cfg)
    if up_to_date([p.train_json, p.eval_json], conf, cfg.force, "download"):
        return {"skipped": True}
    stream = data.stream_tiny_codes(cfg.dataset, data_files=cfg.data_files if cfg.source != "hub" else None)
    # the sample's split file, never the hidden tests: the training rows are the same without them
    is_eval = data.eval_split_predicate(cfg.eval_split) if cfg.eval_split else None
    stats: dict[str, int] = {}
    train, evals = data.split_python_rows(stream, cfg.train_size, cfg.eval_size, seed=cfg.seed,
                                          is_eval=is_eval, stats=stats)
    for r in evals if is_eval else []:
        r["eval_part"] = is_eval(r)
    n_tests = data.attach_hidden_tests(evals, cfg.hidden_tests)
    data.attach_hidden_tests(train, cfg.hidden_tests)   # for RL rewards (never given to the pipeline)
    if not train or not evals:
        raise StepOutputError(f"download: got {len(train)} train and {len(evals)} eval Python rows from "
                              f"{cfg.source}; check the data files / dataset name")
    if stats.get("short"):
        log().warning("download: wanted %d train + %d eval rows, the source has %d + %d Python rows",
                      cfg.train_size, cfg.eval_size, len(train), len(evals))
    write_json_output(p.train_json, train, conf)
    write_json_output(p.eval_json, evals, conf)
    log().info("download: streamed %d rows, %d Python, %d other languages dropped → %d train, %d eval "
               "(%d eval rows carry hidden tests)", stats["seen"], stats["python"], stats["other_language"],
               len(train), len(evals), n_tests)
    return {"train": len(train), "eval": len(evals), "with_tests": n_tests, **stats}


# --- step 2: pipeline ----------------------------------------------------------------------------

def _pipeline_timeout(cfg: DrillConfig) -> float:
    from course_lib.profiles import get_profile

    return float(get_profile(cfg.profile).pipeline.timeout_s)


def _pipeline_config(cfg: DrillConfig) -> dict:
    return {"train": _sha_or_none(cfg.paths.train_json), "teacher": cfg.pipeline_model,
            "profile": cfg.profile, "timeout_s": _pipeline_timeout(cfg),
            "ci_teacher": "rules: new code and own tests from the instruction, no hidden tests"}


def step_pipeline(cfg: DrillConfig) -> dict:
    """Step 2: lesson 05's LazyLLM codegen pipeline over the training rows → ``codegen.json`` + funnel.

    Introduced in lesson 07.
    """
    p, conf = cfg.paths, _pipeline_config(cfg)
    funnel_path = p.data_dir / "codegen_funnel.json"
    if _skip(p.codegen_json, conf, cfg.force, "pipeline"):
        return {"skipped": True}
    _use_lazyllm_path(cfg)
    if cfg.profile != "ci":   # ci starts its own offline teacher; full needs a running server
        from course_lib.drill import preflight

        why = preflight.teacher_problem(cfg)
        if why:
            raise PrerequisiteError(f"pipeline: {why}")
    from course_lib.drill.data import without_hidden_tests
    from course_lib.training import codegen

    # hidden tests are for evaluation and RL rewards only: the pipeline (its teacher) never sees them
    rows = [without_hidden_tests(r) for r in read_json_output(p.train_json, "download")]
    run_code = partial(sandbox.run_code, backend=cfg.sandbox_backend or sandbox.preferred_backend())
    kept, report = codegen.run_codegen_pipeline(rows, profile=cfg.profile, model_name=cfg.pipeline_model,
                                                run_code=run_code, timeout_s=conf["timeout_s"],
                                                offline_teacher="rules")
    kept = list(kept)
    log().info("pipeline funnel:\n%s", report.summary())
    report_dict = report.to_dict()
    atomic_write_text(funnel_path, json.dumps({"input": len(rows), "kept": len(kept), "report": report_dict},
                                              indent=1, default=str, ensure_ascii=False))
    failed = [d for d in report_dict.get("dropped", []) if d.get("stage") in ("teacher", "pipeline")]
    if failed or not kept:
        clear_done(p.codegen_json)   # an earlier codegen.json must not be taken for this run's output
        why = failed[0]["reason"] if failed else "every row was dropped (see the funnel's drop reasons)"
        raise StepOutputError(f"pipeline: kept {len(kept)} of {len(rows)} training rows — {why}. Nothing was "
                              f"cached; the funnel is in {funnel_path}. Fix the teacher and rerun step 2 "
                              "(`--only-step pipeline`)")
    write_json_output(p.codegen_json, kept, conf)
    log().info("pipeline: kept %d of %d training rows → %s", len(kept), len(rows), p.codegen_json)
    return {"input": len(rows), "kept": len(kept)}


def fence_if_bare(answer: str) -> str:
    """``answer`` as is when it has a fenced block, else the bare code wrapped in a python fence.

    LazyLLM's ``CodeFeedbackFormatter`` outputs bare code; the drill's answer format (and FCR) is code
    in a fence, so both SFT variants learn the same format. Introduced in lesson 07.
    """
    from course_lib.drill.extract import find_code_blocks

    if find_code_blocks(answer):
        return answer
    return "```python\n" + answer.strip("\n") + "\n```"


def reference_in_pipeline_format(response: str, prompt: str | None = None) -> str:
    """The reference answer as the pipeline's SFT rows hold it, for PPL on the pipeline's format: when
    ``prompt`` is given and the ci rule teacher reads it, exactly what the pipeline writes for it (the
    teacher's code in one python fence, :mod:`course_lib.training.rule_teacher`); else the reference's
    Python code in one python fence (a reference without Python code as it is). Introduced in lesson 07.
    """
    from course_lib.drill.extract import extract_code

    if prompt is not None:
        from course_lib.training.rule_teacher import read_instruction, write_code

        spec = read_instruction(prompt)
        if spec is not None:
            return fence_if_bare(write_code(spec).strip())
    code = extract_code(response)
    return response if code is None else fence_if_bare(code)


def to_sft_rows(records: list[dict]) -> list[dict]:
    """Training rows ``{"instruction", "input", "output"}`` from tiny-codes rows or pipeline records.

    Accepts ``prompt``/``response`` (tiny-codes), ``instruction``/``output`` (alpaca), or ``messages``
    (chat). Pipeline outputs (bare code) are wrapped in a python fence (:func:`fence_if_bare`). A
    record with neither raises, naming it. Introduced in lesson 07.
    """
    out = []
    for i, r in enumerate(records):
        if "instruction" in r and "output" in r:
            out.append({"instruction": r["instruction"], "input": r.get("input", "") or "",
                        "output": fence_if_bare(r["output"])})
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


# --- step 3: SFT ---------------------------------------------------------------------------------

def base_model_path(cfg: DrillConfig) -> str:
    """The model SFT starts from: ``--sft-model`` or the profile's (the course's tiny model in ci)."""
    if cfg.sft_model:
        return str(cfg.sft_model)
    if cfg.profile == "ci":
        from course_lib.training.tinymodel import get_tiny_model

        return str(get_tiny_model("base", profile="ci"))
    from course_lib.profiles import get_profile

    return str(get_profile(cfg.profile).sft.base_model)


def _sft_result_path(cfg: DrillConfig, variant: str) -> Path:
    return cfg.paths.model_for(variant) / "sft_result.json"


def _sft_config(cfg: DrillConfig, variant: str) -> dict:
    data = cfg.paths.codegen_json if variant == "pipeline_sft" else cfg.paths.train_json
    return {"variant": variant, "data": _sha_or_none(data), "base": cfg.sft_model or "profile",
            "profile": cfg.profile, "overrides": cfg.sft_overrides}


def find_loss_history(folder: str | Path) -> list[dict]:
    """Training loss records ``{"step", "loss"}`` from LLaMA-Factory/transformers logs under ``folder``."""
    folder = Path(folder)
    hist: list[dict] = []
    for f in sorted(folder.rglob("trainer_log.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if "loss" in rec and rec.get("loss") is not None:
                hist.append({"step": rec.get("current_steps", len(hist) + 1), "loss": float(rec["loss"])})
        if hist:
            return hist
    for f in sorted(folder.rglob("trainer_state.json")):
        try:
            state = json.loads(f.read_text(encoding="utf-8"))
        except ValueError:
            continue
        hist = [{"step": r.get("step", i + 1), "loss": float(r["loss"])}
                for i, r in enumerate(state.get("log_history", [])) if "loss" in r]
        if hist:
            return hist
    return hist


def has_weights(model_path: str | Path) -> bool:
    """True when ``model_path`` holds a config and weights (``*.safetensors`` or ``*.bin``)."""
    p = Path(model_path)
    return (p / "config.json").exists() and (any(p.glob("*.safetensors")) or any(p.glob("*.bin")))


def plot_loss(history: list[dict], path: str | Path, title: str = "SFT loss") -> Path:
    """Save the loss curve as a PNG (atomically; a bare Figure, so no pyplot state or backend is touched)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3.2))
    ax = fig.subplots()
    if history:
        ax.plot([h["step"] for h in history], [h["loss"] for h in history], marker=".")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.set_title(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(buf.getvalue())
    tmp.replace(path)
    return path


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


def _finetune(base: str, rows: list[dict], out_dir: Path, profile: str, overrides: dict):
    from course_lib.training import sft

    return sft.finetune(base, rows, out_dir, profile=profile, **overrides)


def sft_side_by_side(cfg: DrillConfig, jobs: int) -> int:
    """How many processes step 3 fine-tunes ``jobs`` variants in: all of them at once when the profile's
    ``sft_parallel`` is on (ci: two SFT runs of the tiny model share the CPU better than one run uses
    two threads), else 1 (full: one GPU, one run after the other). Introduced in lesson 07."""
    return max(1, jobs) if cfg.sft_parallel else 1


@contextlib.contextmanager
def _main_module_hidden():
    """While the pool spawns its workers: a spawned process runs the parent's ``__main__`` script again
    unless it is guarded by ``if __name__ == "__main__":`` (multiprocessing's rule), and a short script
    that calls :func:`run_drill` often is not. The workers need nothing from it, so they do not get it."""
    import types

    main = sys.modules.get("__main__")
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


def _record_sft(cfg: DrillConfig, variant: str, job: tuple, result: Any, processes: int, threads: int) -> dict:
    """Check one variant's fine-tuned model and write its ``sft_result.json``, ``loss.png`` and run notes."""
    base, rows = job[0], job[1]
    out_dir = cfg.paths.model_for(variant)
    model_path = Path(result.merged_model)
    if not has_weights(model_path):
        raise StepOutputError(f"sft[{variant}]: no weights in {model_path} after fine-tuning (LazyLLM swallows "
                              "failures: check the log above and that llamafactory-cli is installed)")
    history = ([{"step": int(st), "loss": float(lo)} for st, lo in result.loss_curve]
               or find_loss_history(out_dir))
    plot_loss(history, out_dir / "loss.png", title=f"SFT loss ({variant})")
    write_json_output(_sft_result_path(cfg, variant), {"model_path": str(model_path), "base_model": base,
                                                       "rows": len(rows), "loss_history": history},
                      _sft_config(cfg, variant))
    first, last = (history[0]["loss"], history[-1]["loss"]) if history else (None, None)
    cfg.run_notes.setdefault("sft", {})[variant] = {
        "status": "ran", "base_model": base, "rows": len(rows),
        "finetune": json.loads(json.dumps(dict(result.config or {}), default=str)),
        "train_runtime_s": getattr(result, "train_runtime", None), "processes": processes, "threads": threads}
    log().info("sft[%s]: done, loss %s → %s, model %s", variant, first, last, model_path)
    return {"rows": len(rows), "first_loss": first, "last_loss": last}


def step_sft(cfg: DrillConfig) -> dict:
    """Step 3: fine-tune the base model through lesson 05's ``course_lib.training.sft.finetune`` for each variant.

    In ci both variants train at once, each in its own process with half the threads
    (:func:`sft_side_by_side`). Writes ``<model-dir>/<variant>/sft_result.json`` (where step 4 finds the
    model) and ``loss.png``. Introduced in lesson 07.
    """
    info: dict[str, Any] = {}
    notes = cfg.run_notes.setdefault("sft", {})
    jobs: dict[str, tuple] = {}
    for variant in cfg.trained_variants():
        res_path, conf = _sft_result_path(cfg, variant), _sft_config(cfg, variant)
        if _skip(res_path, conf, cfg.force, f"sft[{variant}]"):
            info[variant] = {"skipped": True}
            notes[variant] = {"status": "cached"}
            continue
        _use_lazyllm_path(cfg)
        data_path = cfg.paths.codegen_json if variant == "pipeline_sft" else cfg.paths.train_json
        rows = to_sft_rows(read_json_output(data_path, "pipeline" if variant == "pipeline_sft" else "download"))
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
            info[variant] = _record_sft(cfg, variant, jobs[variant], result, processes, threads)
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
            for fut in as_completed(futures):
                done(futures[fut], fut.exception() or fut.result())
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
    for variant in cfg.trained_variants():       # table order, not the order the runs ended in
        for d in (info, notes):
            if variant in d:
                d[variant] = d.pop(variant)
    if failed is not None:
        raise failed
    return info


def model_path_for(cfg: DrillConfig, variant: str) -> str:
    """Where step 4 finds the model of ``variant`` (raises naming the step to run when it is missing)."""
    if variant == "base":
        base = base_model_path(cfg)
        if Path(base).is_dir():
            check_weights(base, "copy or download the base model again (ci: delete lesson 04's tiny-model "
                                "folder in the course cache and rerun lesson 04)")
        return base
    res = read_json_output(_sft_result_path(cfg, variant), "sft")
    if not has_weights(res["model_path"]) and not str(res["model_path"]).startswith("hf://"):
        raise StepOutputError(f"no fine-tuned model at {res['model_path']}; run step 3 "
                              f"(`--only-step sft --force`)")
    check_weights(res["model_path"], "run step 3 again: `python -m course_lib.drill --only-step sft --force`")
    return res["model_path"]


# --- step 4: inference ---------------------------------------------------------------------------

def _model_fingerprint(cfg: DrillConfig, variant: str) -> str | None:
    if variant == "base":
        return cfg.sft_model or f"profile:{cfg.profile}"
    return _sha_or_none(_sft_result_path(cfg, variant))


def inference_knobs(cfg: DrillConfig) -> VLLMKnobs:
    """The vLLM knobs of step 4, with ``--max-new-tokens`` (when given) as the answer budget."""
    if cfg.max_new_tokens:
        from dataclasses import replace

        return replace(cfg.vllm, response_max_tokens=int(cfg.max_new_tokens))
    return cfg.vllm


def _inference_config(cfg: DrillConfig, variant: str) -> dict:
    return {"variant": variant, "model": _model_fingerprint(cfg, variant),
            "eval": _sha_or_none(cfg.paths.eval_json), "engine": cfg.inference_backend,
            "knobs": inference_knobs(cfg).as_dict(), "humaneval_subset": cfg.humaneval_subset,
            "ppl_samples": cfg.ppl_samples, "signature_given": "own lead-in + def line, v2",
            "ppl_formats": PPL_FORMATS}


# test pass@1's protocol: the model answers freely; its first `def` line is replaced by the one the task
# asks for, and the model writes the rest again from there (HumanEval gives the signature the same way)
DEFAULT_LEAD_IN = "```python\n"


def signature_prefix(row: dict, free_answer: str | None = None) -> str | None:
    """The start of the answer that test pass@1 gives the model for an eval row with hidden tests: the
    model's own free answer up to its first function definition (prose, the ```` ```python ```` fence;
    :func:`course_lib.drill.extract.answer_lead_in`), or ```` ```python ```` when it defined none,
    followed by the task's ``def`` line (``signature`` of the hidden-test record). So every model
    keeps its own answer format and only the name and argument of the function are given, as
    HumanEval's prompt ends with the signature. None for rows without a signature (hub rows)."""
    from course_lib.drill.extract import answer_lead_in

    sig = row.get("signature")
    if not (sig and row.get("tests")):
        return None
    lead = answer_lead_in(free_answer) if free_answer else None
    return (lead if lead is not None else DEFAULT_LEAD_IN) + sig + "\n"


def infer(cfg: DrillConfig, model_path: str, prompts: list[str], ppl_pairs: list[tuple[str, str]],
          answer_prefixes: list[str | None] | None = None, follow_up=None) -> dict:
    """One model's answers to ``prompts`` and its PPL on ``ppl_pairs`` with the configured engine
    (:func:`course_lib.drill.inference.run_model`: vLLM, or the transformers fallback saying why);
    ``follow_up`` builds a second round from the answers, for the same engine."""
    from course_lib.drill import inference

    return inference.run_model(model_path, prompts, ppl_pairs, profile=cfg.profile, knobs=inference_knobs(cfg),
                               engine=cfg.inference_backend, fallback=cfg.inference_fallback,
                               batch_size=cfg.batch_size, threads=cfg.inference_workers,
                               timeout_s=cfg.inference_timeout_s, log=log(), answer_prefixes=answer_prefixes,
                               follow_up=follow_up)


def step_inference(cfg: DrillConfig) -> dict:
    """Step 4: each model answers the eval prompts and a HumanEval subset; PPL on the references.

    One engine per model (:func:`infer`): the eval and HumanEval prompts go to it in one go, and it is
    shut down (its process exits) before the next model starts. Eval rows with hidden tests are then
    answered once more (a second round for the same engine), each from its free answer's lead-in and the task's
    ``def`` line (:func:`signature_prefix`): those answers are what test pass@1 runs. Writes
    ``<output-dir>/<variant>/inference_results.json``, ``humaneval_generations.json`` and ``ppl.json``;
    which engine answered, with which settings (and why it fell back, if it did), goes to the run
    manifest. Introduced in lesson 07.
    """
    from course_lib.drill import evaluate

    info: dict[str, Any] = {}
    notes = cfg.run_notes.setdefault("inference", {})
    evals = None
    for variant in cfg.variants():
        out, conf = cfg.paths.output_for(variant), _inference_config(cfg, variant)
        files = {"answers": out / "inference_results.json", "humaneval": out / "humaneval_generations.json",
                 "ppl": out / "ppl.json"}
        if up_to_date(list(files.values()), conf, cfg.force, f"inference[{variant}]"):
            info[variant] = {"skipped": True}
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
        pipeline_pairs = [(r["prompt"], reference_in_pipeline_format(r["response"], r["prompt"])) for r in refs]
        log().info("inference[%s]: %d eval + %d HumanEval prompts, PPL on %d references, %s (%s)", variant,
                   len(prompts), len(he_prompts), len(pairs), model_path, cfg.inference_backend)
        # test pass@1: each eval row with hidden tests again, its free answer's def line replaced by the
        # task's signature (signature_prefix): a second round for the same engine, built from the first's answers
        sig_rows = [i for i, r in enumerate(evals) if signature_prefix(r)]

        def signature_round(first: list[dict], evals=evals, sig_rows=sig_rows):
            if not sig_rows:
                return None
            return ([evals[i]["prompt"] for i in sig_rows],
                    [signature_prefix(evals[i], first[i]["response"]) for i in sig_rows])

        res, secs = timed(infer, cfg, model_path, prompts + he_prompts, pairs, follow_up=signature_round)
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


PPL_FORMATS = "raw (the eval answers as they are) + pipeline (as the pipeline writes them, v2)"


def pipeline_ppl(cfg: DrillConfig, model_path: str, pairs: list[tuple[str, str]]) -> dict:
    """PPL of a model on the references in the pipeline's format (after its engine has exited: one model
    in memory at a time). Introduced in lesson 07."""
    from course_lib.drill import inference

    if not pairs:
        return {"ppl": float("nan"), "nll": float("nan"), "tokens": 0, "samples": 0}
    return inference.teacher_forced_ppl(model_path, pairs, threads=cfg.inference_workers,
                                        max_length=inference.model_max_len(model_path, inference_knobs(cfg)))


def timed(fn, *args, **kwargs) -> tuple[Any, float]:
    import time

    t0 = time.monotonic()
    return fn(*args, **kwargs), time.monotonic() - t0


# --- step 5: evaluation --------------------------------------------------------------------------

def _evaluation_config(cfg: DrillConfig, variant: str) -> dict:
    out = cfg.paths.output_for(variant)
    return {"variant": variant, "answers": _sha_or_none(out / "inference_results.json"),
            "humaneval": _sha_or_none(out / "humaneval_generations.json"),
            "ppl": _sha_or_none(out / "ppl.json"), "timeout_s": cfg.timeout_s, "memory_mb": cfg.memory_mb,
            "backend": cfg.sandbox_backend, "columns": REPORT_COLUMNS}


REPORT_COLUMNS = ["id", "task", "eval_part", "category", "sandbox_status", "duration_s", "error", "has_fence",
                  "has_code", "has_tests", "correct", "test_status", "correct_free", "test_status_free",
                  "defines_entry_point", "answer_chars"]


def write_report_csv(rows: list[dict], path: Path, config: dict) -> None:
    """``evaluation_report.csv``: one row per eval sample (atomically, with a completion marker)."""
    import pandas as pd

    df = pd.DataFrame(rows, columns=REPORT_COLUMNS)
    atomic_write_text(path, df.to_csv(index=False))
    mark_done(path, config, len(df))


def step_evaluation(cfg: DrillConfig) -> dict:
    """Step 5: run every answer's code in the sandbox → ``evaluation_report.csv`` + ``summary.json``.

    Also scores the HumanEval subset and writes the metrics of all variants to
    ``<output-dir>/drill_metrics.json`` and ``metrics.png``. Introduced in lesson 07.
    """
    from course_lib.drill import evaluate, metrics

    info: dict[str, Any] = {}
    kw = {"workers": cfg.eval_workers, "timeout_s": cfg.timeout_s, "memory_mb": cfg.memory_mb,
          "backend": cfg.sandbox_backend}
    notes = cfg.run_notes.setdefault("evaluation", {})
    for variant in cfg.variants():
        out, conf = cfg.paths.output_for(variant), _evaluation_config(cfg, variant)
        report, summary_path = out / "evaluation_report.csv", out / "summary.json"
        if up_to_date([report, summary_path], conf, cfg.force, f"evaluation[{variant}]"):
            info[variant] = json.loads(summary_path.read_text(encoding="utf-8"))["metrics"]
            notes[variant] = {"status": "cached"}
            continue
        records = read_json_output(out / "inference_results.json", "inference")
        rows = evaluate.evaluate_answers(records, **kw)
        if len(rows) != len(records):  # never silently drop a sample
            raise StepOutputError(f"evaluation[{variant}]: {len(records)} answers but {len(rows)} report rows")
        summary = evaluate.summarize(rows)
        problems = {p["task_id"]: p for p in evaluate.humaneval_problems(None)} if cfg.humaneval_subset else {}
        gens = read_json_output(out / "humaneval_generations.json", "inference")
        he = evaluate.score_humaneval([problems[g["task_id"]] for g in gens], [g["response"] for g in gens],
                                      **kw) if gens else None
        ppl = read_json_output(out / "ppl.json", "inference")
        m = metrics.drill_metrics(summary, ppl, he)
        write_report_csv(rows, report, conf)
        write_json_output(summary_path, {"variant": variant, "summary": summary, "metrics": m,
                                         "humaneval": he, "ppl": ppl}, conf)
        c = summary["counts"]
        log().info("evaluation[%s]: %s | Pass@1 %.3f FCR %.3f SER %.3f RSR %.3f test pass@1 %.3f", variant,
                   " ".join(f"{k}={v}" for k, v in c.items()), m["Pass@1"], m["FCR"], m["SER"], m["RSR"],
                   m["test pass@1"])
        info[variant] = m
        notes[variant] = {"status": "ran", "samples": len(rows)}
    if info:
        atomic_write_text(cfg.paths.output_dir / "drill_metrics.json", json.dumps(info, indent=1, default=str))
        fig = metrics.plot_metrics(info, cfg.paths.output_dir / "metrics.png")
        import matplotlib.pyplot as plt

        plt.close(fig)
    return info


# --- the run -------------------------------------------------------------------------------------

STEP_FUNCS: dict[str, Callable[[DrillConfig], dict]] = {
    "download": step_download, "pipeline": step_pipeline, "sft": step_sft,
    "inference": step_inference, "evaluation": step_evaluation,
}


def parse_steps(text: str | list[str] | None) -> list[str]:
    """Step names from ``"1,3"``, ``"download,sft"`` or a list; raises on an unknown step."""
    if not text:
        return []
    items = text if isinstance(text, list) else str(text).replace(" ", ",").split(",")
    out = []
    for item in (s.strip().lower() for s in items):
        if not item:
            continue
        if item.isdigit() and 1 <= int(item) <= len(STEPS):
            item = STEPS[int(item) - 1]
        if item not in STEPS:
            raise ValueError(f"unknown step {item!r}; steps are 1-5 or {', '.join(STEPS)}")
        out.append(item)
    return out


def plan_steps(cfg: DrillConfig, skip_steps=None, only_step=None) -> list[str]:
    """The steps this run executes, in order (``only_step`` wins over ``skip_steps``)."""
    only, skip = parse_steps(only_step), set(parse_steps(skip_steps))
    steps = [s for s in STEPS if (s in only if only else s not in skip)]
    if not cfg.use_pipeline and "pipeline" in steps:
        steps.remove("pipeline")
    return steps


def check_prerequisites(cfg: DrillConfig, steps: list[str]) -> list[str]:
    """Problems that would stop ``steps``, each naming the step to run first (empty list: all good).

    Introduced in lesson 07.
    """
    problems: list[str] = []
    p = cfg.paths

    def have(path: Path, made_by: str) -> bool:
        return made_by in steps or output_state(path)[0]

    def need(path: Path, made_by: str, what: str) -> None:
        if not have(path, made_by):
            problems.append(f"{what} ({path}) is missing or incomplete: run step {STEPS.index(made_by) + 1} "
                            f"`--only-step {made_by}` first")

    if "download" in steps and cfg.source != "hub":
        for f in cfg.data_files or []:
            if not Path(f).exists():
                problems.append(f"tiny-codes file {f} not found (ci reads assets/tiny_codes/; regenerate it "
                                "with `python -m course_lib.drill.taskgen assets/tiny_codes`)")
        if not cfg.data_files:
            problems.append("no local data files given for the download step (--data-files)")
    if "download" in steps and cfg.source == "hub" and not (os.environ.get("HF_TOKEN") or _hf_token_file()):
        log().warning("no HF_TOKEN: %s is gated on the hub; the download needs a token whose account "
                      "accepted its conditions (HF_TOKEN=hf_... or `huggingface-cli login`)", cfg.dataset)
    if "pipeline" in steps:
        need(p.train_json, "download", "the training set")
        _use_lazyllm_path(cfg)
    if "sft" in steps:
        for v in cfg.trained_variants():
            need(p.codegen_json if v == "pipeline_sft" else p.train_json,
                 "pipeline" if v == "pipeline_sft" else "download",
                 "the pipeline's codegen.json" if v == "pipeline_sft" else "the training set")
        _need_base_model(cfg, problems)
    if "inference" in steps:
        need(p.eval_json, "download", "the eval set")
        for v in cfg.trained_variants():
            need(_sft_result_path(cfg, v), "sft", f"the fine-tuned model of {v}")
        if "base" in cfg.variants() and "sft" not in steps:
            _need_base_model(cfg, problems)
        if cfg.inference_backend == "vllm" and not cfg.inference_fallback:
            from course_lib.drill.vllm_engine import vllm_python

            python, why = vllm_python()
            if python is None:
                problems.append(f"step 4 needs vLLM (this profile has no transformers fallback): {why}")
    if "evaluation" in steps:
        for v in cfg.variants():
            need(p.output_for(v) / "inference_results.json", "inference", f"the answers of {v}")
        from course_lib.evaluation import sandbox

        try:
            sandbox.resolve_backend(cfg.sandbox_backend)
        except (RuntimeError, ValueError, OSError) as exc:
            problems.append(f"step 5 cannot run code: {exc}")
    if cfg.profile == "full":   # before any GPU work: models, teacher, Docker, GPU memory
        from course_lib.drill import preflight

        problems += preflight.check_full_prerequisites(cfg, steps)
    return problems


def _hf_token_file() -> bool:
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return os.path.exists(os.path.join(home, "token"))


def _need_base_model(cfg: DrillConfig, problems: list[str]) -> None:
    if cfg.profile == "full":   # preflight.check_full_prerequisites checks (and logs) the full models
        return
    if cfg.sft_model:
        sm = Path(cfg.sft_model)
        if sm.is_absolute() or sm.exists():
            if not has_weights(sm):
                problems.append(f"--sft-model {cfg.sft_model} has no config.json and weights")


def run_drill(cfg: DrillConfig, *, skip_steps=None, only_step=None) -> dict[str, Any]:
    """Run the planned steps in order; returns what each step did. Introduced in lesson 07."""
    import time

    cfg.paths.make()
    steps = plan_steps(cfg, skip_steps, only_step)
    problems = check_prerequisites(cfg, steps)
    if problems:
        raise PrerequisiteError("cannot start the drill:\n  - " + "\n  - ".join(problems))
    log().info("drill (%s profile): steps %s; variants %s; folders %s", cfg.profile, ", ".join(steps),
               ", ".join(cfg.variants()), cfg.paths.data_dir.parent)
    from course_lib.drill import manifest

    done: dict[str, Any] = {}
    gpu_checked = False
    for i, name in enumerate(steps):
        if cfg.profile == "full" and name in ("sft", "inference") and not gpu_checked:
            from course_lib.drill import preflight

            gpu_checked = True   # the teacher of step 2 may have held the GPU until now
            problems = preflight.gpu_memory_problems(cfg, steps[i:])
            if problems:
                raise PrerequisiteError(f"cannot start step {STEPS.index(name) + 1} ({name}):\n  - "
                                        + "\n  - ".join(problems))
        t0 = time.monotonic()
        started = manifest.now()
        log().info("step %d/5 %s: start", STEPS.index(name) + 1, name)
        cfg.run_notes[name] = {}
        try:
            done[name] = STEP_FUNCS[name](cfg)
        except BaseException as exc:
            manifest.record_step(cfg, name, started, time.monotonic() - t0, None, error=f"{type(exc).__name__}: {exc}")
            raise
        manifest.record_step(cfg, name, started, time.monotonic() - t0, done[name])
        log().info("step %d/5 %s: finished in %.1f s", STEPS.index(name) + 1, name, time.monotonic() - t0)
    return done


# --- reading results back (notebook, tests) -------------------------------------------------------

def load_metrics(cfg: DrillConfig) -> dict[str, dict]:
    """Metrics of every evaluated variant (from each ``summary.json``)."""
    out = {}
    for v in ("base", "raw_sft", "pipeline_sft"):
        path = cfg.paths.output_for(v) / "summary.json"
        if output_state(path)[0]:
            out[v] = json.loads(path.read_text(encoding="utf-8"))["metrics"]
    return out


def load_report(cfg: DrillConfig, variant: str):
    """The ``evaluation_report.csv`` of ``variant`` as a pandas DataFrame."""
    import pandas as pd

    path = cfg.paths.output_for(variant) / "evaluation_report.csv"
    ok, why = output_state(path)
    if not ok:
        raise StepOutputError(f"{why}; run step 5 (`--only-step evaluation`)")
    return pd.read_csv(path)
