"""What the full profile needs before any GPU work: model paths, the teacher, Docker, free GPU memory.

:func:`check_full_prerequisites` runs at the start of a full-profile drill (``run.check_prerequisites``
calls it; the ci profile has no GPU, no external teacher and no Docker requirement, so it is skipped
there). Each problem is one sentence naming what is missing and how to provide it. The probes are small
module-level functions (:func:`gpu_memory_mib`, :func:`docker_state`, and step 2's
:func:`course_lib.drill.pipeline.teacher_answers`), so tests replace them with ``monkeypatch``.

One GPU: the teacher of step 2 (a vLLM server, tens of GiB for Qwen3-30B-A3B) and the SFT / vLLM
inference of steps 3–4 do not fit on it together. Run steps 1–2 with the teacher up, stop it, then run
steps 3–5; :func:`gpu_memory_problems` (called right before the first GPU step) says so when the teacher
still answers on this machine.

Introduced in lesson 07.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Sequence

from course_lib.drill import pipeline
from course_lib.drill.config import DrillConfig, base_model_path
from course_lib.drill.outputs import has_weights, log

_GPU_QUERY = ["nvidia-smi", "--query-gpu=memory.free,memory.total", "--format=csv,noheader,nounits"]
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_GPU_STEPS = ("sft", "inference")


# --- probes (replaced in tests) ------------------------------------------------------------------

def gpu_memory_mib() -> list[tuple[int, int]] | None:
    """(free, total) MiB per visible NVIDIA GPU, from ``nvidia-smi`` or else ``torch.cuda.mem_get_info``;
    None when no GPU is visible. Introduced in lesson 07."""
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(_GPU_QUERY, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            out = None
        if out is not None and out.returncode == 0:
            rows = []
            for line in out.stdout.strip().splitlines():
                parts = [p.strip() for p in line.split(",")]
                if len(parts) == 2 and all(p.isdigit() for p in parts):
                    rows.append((int(parts[0]), int(parts[1])))
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            if rows and visible and all(v.strip().isdigit() for v in visible.split(",")):
                rows = [rows[int(v)] for v in visible.split(",") if int(v) < len(rows)]
            if rows:
                return rows
    try:
        import torch

        if torch.cuda.is_available():
            return [tuple(x // (1 << 20) for x in torch.cuda.mem_get_info(i))  # type: ignore[misc]
                    for i in range(torch.cuda.device_count())]
    except Exception:  # a broken CUDA install reads as "no GPU"; the problem text says what to check
        pass
    return None


def docker_state() -> tuple[bool, bool]:
    """(the Docker daemon answers, the ``python-sandbox`` image exists). Introduced in lesson 07."""
    from course_lib.evaluation.sandbox import docker as d

    up = d.daemon_answers()
    return up, (d.image_exists() if up else False)


def _gpu_check_off(cfg: DrillConfig) -> bool:
    """True (and logged) when the profile's ``drill.gpu_memory_check`` is off: the full-profile rehearsal
    on CPU (``tests/``) turns it off, the one check it skips."""
    if cfg.profile.drill.gpu_memory_check:
        return False
    log().warning("prerequisites: the GPU and free-GPU-memory check is off in this profile "
                  "(drill.gpu_memory_check: the full-profile rehearsal on CPU)")
    return True


# --- the checks ----------------------------------------------------------------------------------

def model_location(name: str) -> str:
    """``"local"`` (a folder on this machine), ``"hub"`` (a hub id such as ``Qwen/Qwen2.5-0.5B-Instruct``,
    downloaded on first use) or ``"missing"`` (a path that does not exist). Introduced in lesson 07."""
    p = Path(name).expanduser()
    if p.exists():
        return "local"
    if not p.is_absolute() and not name.startswith((".", "~")) and _HUB_ID.match(name):
        return "hub"
    return "missing"


def _model_problems(name: str, what: str, option: str, notes: list[str]) -> list[str]:
    where = model_location(name)
    if where == "missing":
        return [f"{what} {name} does not exist (give a local folder with {option} /path/to/model)"]
    if where == "local":
        if not has_weights(Path(name).expanduser()):
            return [f"{what} {name} has no config.json and *.safetensors/*.bin weights"]
        notes.append(f"{what}: local folder {name}")
        return []
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        return [f"{what} {name} is a hub id but HF_HUB_OFFLINE=1: give a local folder with {option}"]
    notes.append(f"{what}: hub id {name} (downloaded on first use; needs internet)")
    return []


def gpu_memory_problems(cfg: DrillConfig, steps: Sequence[str]) -> list[str]:
    """Problems with the GPU for the planned ``steps`` (empty: fine). No GPU is a problem; vLLM inference
    needs ``gpu_memory_utilization`` x total memory free on the first GPU (vLLM's own start-up check);
    SFT on a machine whose only GPU still serves the teacher is a problem (stop the teacher first).
    Introduced in lesson 07."""
    gpu_steps = [s for s in steps if s in _GPU_STEPS]
    if not gpu_steps or _gpu_check_off(cfg):
        return []
    gpus = gpu_memory_mib()
    if not gpus:
        return [f"no NVIDIA GPU is visible (nvidia-smi / torch.cuda): the full profile's {' and '.join(gpu_steps)} "
                "need one (run --profile ci on a CPU machine)"]
    problems = []
    free, total = gpus[0]
    if "sft" in steps and len(gpus) == 1:
        t = pipeline.teacher_endpoint(cfg)
        if t.local and pipeline.teacher_answers(t.url)[0]:
            problems.append(f"the teacher at {t.url} still runs on this machine's only GPU ({free} of {total} MiB "
                            "free): stop it before SFT, then rerun (steps 1-2 are kept and skipped as cached)")
    if "inference" in steps and cfg.inference_backend == "vllm":
        need = cfg.vllm.gpu_memory_utilization * total
        if free < need:
            problems.append(f"vLLM needs gpu_memory_utilization {cfg.vllm.gpu_memory_utilization} x {total} MiB = "
                            f"{need:.0f} MiB free on the first GPU, {free} MiB are free: stop what holds it "
                            "(nvidia-smi lists it) or lower --vllm-gpu-memory-utilization")
    return problems


def _sandbox_backend(cfg: DrillConfig) -> str:
    """The backend step 5 uses when it works (the sandbox's rule before probing)."""
    from course_lib.evaluation.sandbox import named_backend

    try:
        return named_backend(cfg.sandbox_backend, configured=cfg.profile.sandbox.backend)
    except ValueError:      # an unknown name: step 5's own check says so
        return ""


def check_full_prerequisites(cfg: DrillConfig, steps: Sequence[str]) -> list[str]:
    """Problems (empty list: ready) that would stop the full profile's planned ``steps``, before any GPU work.

    Covers: the base model (``--sft-model`` or the profile's; a local folder with weights, or a hub id
    — which one is logged) and the teacher's model when it is a path; the teacher answering (when step 2
    will call it); the Docker daemon and the ``python-sandbox`` image (step 5 with the Docker backend);
    a visible GPU and its free memory (steps 3–4; the memory check waits until after step 2 when the
    teacher has to run first). Introduced in lesson 07.
    """
    problems: list[str] = []
    notes: list[str] = []
    if any(s in steps for s in _GPU_STEPS) and ("sft" in steps or "base" in cfg.variants()):
        problems += _model_problems(base_model_path(cfg), "the base model", "--sft-model", notes)
    teacher_runs = pipeline.teacher_needed(cfg, steps)
    if teacher_runs:
        t = pipeline.teacher_endpoint(cfg)
        if model_location(t.model) == "local" or Path(t.model).is_absolute():
            problems += _model_problems(t.model, "the teacher model", "--pipeline-model", notes)
        why = pipeline.teacher_problem(cfg)
        if why:
            problems.append(why)
    if "evaluation" in steps and _sandbox_backend(cfg) == "docker":
        up, image = docker_state()
        if not up:
            problems.append("no Docker daemon answers: start it (`sudo systemctl start docker`, or "
                            "`python -m course_lib.evaluation.sandbox daemon`)")
        elif not image:
            from course_lib.evaluation.sandbox.backends import IMAGE

            problems.append(f"the Docker image {IMAGE!r} is missing: build it with "
                            "`python -m course_lib.evaluation.sandbox image`")
    if teacher_runs:   # the teacher holds the GPU during step 2: only check that a GPU exists now
        if any(s in steps for s in _GPU_STEPS) and not _gpu_check_off(cfg) and not gpu_memory_mib():
            problems.append("no NVIDIA GPU is visible (nvidia-smi / torch.cuda): the full profile's SFT and "
                            "inference need one (run --profile ci on a CPU machine)")
    else:
        problems += gpu_memory_problems(cfg, steps)
    for n in notes:
        log().info("prerequisites: %s", n)
    return problems
