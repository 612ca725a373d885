"""The TRL environment: a side venv for TRL's ``GRPOTrainer``, like ``.venv-vllm`` for vLLM.

LLaMA-Factory pins ``trl 0.9.6`` (and transformers 4.57) in the course venv; ``GRPOTrainer`` with both
clip sides, ``loss_type`` and the train/inference importance-sampling correction needs TRL 1.x, which
needs transformers 5. So the RL step's trainer runs in its own environment, ``.venv-trl`` beside the
course (``$COURSE_TRL_VENV`` overrides), with the versions pinned in :data:`TRL_REQUIREMENTS` (checked
on these machines: TRL 1.16.0 offline on CPU). ``torch==2.13.0`` is installed first, on its own,
because that spec resolves to the local CPU build; any other torch spec pulls a multi-GB CUDA build.

Setup: :func:`ensure_trl_venv` (``python -m course_lib.rl setup``); status: :func:`trl_status`.
The environment is registered with the others in :data:`course_lib.tooling.environments.ENVIRONMENTS`
(``trl``), so ``./course setup`` builds it; :func:`ensure_trl_venv` adds the GPU extra.

Introduced in lesson 10.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from course_lib.paths import venv_python
from course_lib.tooling import environments

TORCH_REQUIREMENT = environments.ENVIRONMENTS["trl"].install_first[0]   # the local CPU build; installed first, alone
TRL_REQUIREMENTS = environments.ENVIRONMENTS["trl"].requirements
# on a GPU (full profile) TRL's vLLM generation needs vLLM 0.22.0-0.31.0 (trl 1.16.0's `vllm` extra);
# the course's full extra pins vllm 0.14.0 for inference, so the full profile's TRL venv gets its own
TRL_FULL_EXTRA = ("trl[vllm]==1.16.0",)
IMPORT_CHECK = "import trl, transformers, torch; print(trl.__version__, transformers.__version__, torch.__version__)"


def trl_venv_path() -> Path:
    """Where the TRL environment lives: ``$COURSE_TRL_VENV``, else ``<repo>/.venv-trl`` (else
    ``<course cache>/trl/venv`` without the repository). Introduced in lesson 10."""
    return environments.venv_path("trl")


def clean_env(base: Any = None) -> dict[str, str]:
    """The environment of a process of the TRL venv: no course venv paths, offline hub, no telemetry."""
    env = dict(os.environ if base is None else base)
    for k in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
        env.pop(k, None)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1",
               DO_NOT_TRACK="1", WANDB_DISABLED="true", WANDB_MODE="disabled", TOKENIZERS_PARALLELISM="false",
               TRL_EXPERIMENTAL_SILENCE="1")
    return env


def trl_status(venv: Path | None = None) -> dict[str, Any]:
    """``{"venv", "ready", "versions", "reason"}``: a quick import of trl/transformers/torch there,
    nothing installed. Introduced in lesson 10."""
    venv = Path(venv or trl_venv_path())
    py = venv_python(venv)
    if not py.exists():
        return {"venv": str(venv), "ready": False, "versions": None,
                "reason": f"no TRL environment at {venv}; create it with `python -m course_lib.rl setup`"}
    probe = subprocess.run([str(py), "-c", IMPORT_CHECK], capture_output=True, text=True, timeout=300,
                           env=clean_env(), cwd=tempfile.gettempdir())
    if probe.returncode != 0:
        tail = "\n".join(probe.stderr.strip().splitlines()[-5:])
        return {"venv": str(venv), "ready": False, "versions": None,
                "reason": f"{venv} exists but `import trl` fails:\n{tail}\nrebuild it with "
                          "`python -m course_lib.rl setup --force`"}
    trl_v, tf_v, torch_v = probe.stdout.split()[-3:]
    return {"venv": str(venv), "ready": True, "versions": {"trl": trl_v, "transformers": tf_v, "torch": torch_v},
            "reason": "ready"}


def trl_python() -> tuple[str | None, str]:
    """(the interpreter that runs the trainer, where it comes from), or (None, why there is none):
    the TRL environment's interpreter when it exists. Introduced in lesson 10."""
    venv = trl_venv_path()
    py = venv_python(venv)
    if py.exists():
        return str(py), f"the TRL environment {venv}"
    return None, (f"there is no TRL environment at {venv}: create it with `{Path(sys.executable).name} -m "
                  f"course_lib.rl setup` (pip installs {TORCH_REQUIREMENT} then {' '.join(TRL_REQUIREMENTS)}, "
                  "1.5 GB; 1-5 min)")


def _pip_install(venv: Path, reqs: tuple[str, ...], quiet: bool) -> None:
    """``pip install reqs`` into ``venv``; raises ``RuntimeError`` with pip's message when it fails."""
    pip = [str(venv_python(venv)), "-m", "pip", "--disable-pip-version-check", *(["-q"] if quiet else [])]
    done = subprocess.run([*pip, "install", *reqs], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"pip could not install {' '.join(reqs)} into {venv}:\n{done.stderr[-2000:]}\n"
                           "Check access to the package index, then run `python -m course_lib.rl setup --force`.")


def ensure_trl_venv(venv: Path | None = None, force: bool = False, quiet: bool = True,
                    extra: tuple[str, ...] = ()) -> Path:
    """Create the TRL environment when it is missing or broken: ``python -m venv``, ``pip install
    torch==2.13.0`` (alone: the local CPU build), then :data:`TRL_REQUIREMENTS` (and ``extra``, e.g.
    :data:`TRL_FULL_EXTRA` on a GPU machine). When it already imports TRL this is a quick check.
    Raises ``RuntimeError`` with pip's message when an install fails. Introduced in lesson 10."""
    venv = Path(venv or trl_venv_path())
    if not force:
        status = trl_status(venv)
        if status["ready"]:
            if extra:                            # ready for ci: add what the extra brings (vLLM for a GPU)
                _pip_install(venv, extra, quiet)
            print(f"TRL {status['versions']['trl']} ready in {venv}" + (f" (with {', '.join(extra)})" if extra else ""))
            return venv
    if venv.is_symlink():
        venv.unlink()
    elif venv.exists():
        shutil.rmtree(venv)
    base = getattr(sys, "_base_executable", None) or sys.executable
    print(f"creating the TRL environment at {venv} ({TORCH_REQUIREMENT}, {', '.join(TRL_REQUIREMENTS)}; its own "
          "venv because LLaMA-Factory pins trl 0.9.6 and transformers 4.57 in the course venv) ...", flush=True)
    subprocess.run([base, "-m", "venv", str(venv)], check=True)
    for reqs in ((TORCH_REQUIREMENT,), (*TRL_REQUIREMENTS, *extra)):
        _pip_install(venv, reqs, quiet)
    status = trl_status(venv)
    if not status["ready"]:
        raise RuntimeError(status["reason"])
    print(f"TRL {status['versions']['trl']} ready in {venv}")
    return venv
