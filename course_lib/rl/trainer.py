"""The RL step: TRL's GRPOTrainer on the drill's model, rewards from the course sandbox.

:func:`train_grpo` is the one entry point (the drill's ``rl`` step, lesson 10 and the benchmark call it):

1. the prompts — the training rows with hidden tests, in the drill's test pass@1 protocol
   (:func:`course_lib.rl.rollouts.build_rl_prompts`);
2. the trainer — ``course_lib/rl/scripts/grpo_worker.py`` in the TRL environment
   (:mod:`course_lib.rl.trl_env`), TRL's ``GRPOTrainer`` with the settings' ``GRPOConfig``
   (:func:`course_lib.rl.settings.trl_config`), generation inside the trainer (transformers) or with vLLM;
3. the rewards — each batch of completions comes back to this process over the worker's standard output,
   :class:`~course_lib.rl.rollouts.RolloutJudge` runs them in the sandbox and writes the rewards to the
   worker's standard input. Why here and not in the worker: the judge is the course's (its backend
   policy and limits, the same code as the drill's evaluation), the worker's environment has no course
   package, and the only thing that crosses from the policy's side is text — the tests, the programs
   and the verdicts never leave this process;
4. the outputs — ``<out_dir>/train_log.json`` (one record per optimisation step,
   :func:`~course_lib.rl.rollouts.step_record`), ``<out_dir>/rl_result.json`` (settings, timings,
   versions), ``<out_dir>/rollouts.jsonl`` (every rewarded rollout: step, prompt key, program, reward,
   status — what :mod:`course_lib.rl.audit` re-judges on fresh inputs) and the trained model as a
   Hugging Face folder ``<out_dir>/model`` (weights and config from
   TRL, tokenizer and generation config copied from the starting model: the layout of the SFT variants'
   ``lazyllm_merge``, so the drill's inference step loads it as it loads them).

Introduced in lesson 10.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from course_lib import store
from course_lib.rl.audit import ROLLOUTS_FILE, save_rollouts
from course_lib.rl.rollouts import RolloutJudge, build_rl_prompts, step_record
from course_lib.rl.settings import RLSettings, rl_settings, trl_config
from course_lib.rl.trl_env import clean_env, trl_python

WORKER = Path(__file__).resolve().parent / "scripts" / "grpo_worker.py"
IMPORT_ERROR_EXIT = 3
# files of a model folder other than the weights: copied from the starting model. RL changes weights only;
# the config TRL's transformers 5 writes differs in ways transformers 4.57 misreads (``rope_parameters`` for
# ``rope_theta``, ``use_cache: false`` left from training), so the starting model's config is kept.
START_MODEL_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                     "special_tokens_map.json", "chat_template.jinja", "vocab.json", "merges.txt", "added_tokens.json")


class RLUnavailable(RuntimeError):
    """The RL trainer cannot run here (no TRL environment, ``import trl`` fails), or it failed; the
    message says why and what to do."""


def _say(log: logging.Logger | Callable[[str], Any] | None, msg: str) -> None:
    if log is None:
        print(msg, flush=True)
    elif isinstance(log, logging.Logger):
        log.info(msg)
    else:
        log(msg)


def _tensor_shapes(folder: Path) -> dict[str, tuple[int, ...]]:
    """Tensor name → shape of every ``*.safetensors`` file in ``folder``, from the files' JSON headers
    (8 bytes of little-endian header length, then the header)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for f in sorted(Path(folder).glob("*.safetensors")):
        with open(f, "rb") as fh:
            size = int.from_bytes(fh.read(8), "little")
            header = json.loads(fh.read(size))
        shapes.update({k: tuple(v["shape"]) for k, v in header.items() if k != "__metadata__"})
    return shapes


def finish_model_folder(trained: Path, start_model: Path) -> list[str]:
    """Complete the folder TRL saved (weights) with the starting model's config, generation config and
    tokenizer files (:data:`START_MODEL_FILES`), after checking that the saved tensors have the starting
    model's names and shapes; returns the names copied. Introduced in lesson 10."""
    before, after = _tensor_shapes(start_model), _tensor_shapes(trained)
    if not after:
        raise RLUnavailable(f"the trainer saved no weights in {trained}")
    if before and before != after:
        diff = sorted(set(before) ^ set(after))[:5] or [k for k in before if before[k] != after.get(k)][:5]
        raise RLUnavailable(f"the trained model's tensors differ from the starting model's ({diff}); "
                            f"{trained} cannot take {start_model}'s config")
    copied = []
    for name in START_MODEL_FILES:
        src = Path(start_model) / name
        if src.exists():
            shutil.copy2(src, Path(trained) / name)
            copied.append(name)
    return copied


class _Worker:
    """The trainer's process: read its messages, answer its score requests, within a deadline."""

    def __init__(self, proc: subprocess.Popen, err_path: Path, deadline: float, python: str):
        self.proc, self.err_path, self.deadline, self.python = proc, err_path, deadline, python
        self.sel = selectors.DefaultSelector()
        self.sel.register(proc.stdout, selectors.EVENT_READ)
        self.buf = b""

    def stderr_tail(self, lines: int = 25) -> str:
        try:
            text = self.err_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        keep = [ln for ln in text.strip().splitlines() if ln.strip()]
        return "\n".join(keep[-lines:])

    def failed(self, what: str) -> RLUnavailable:
        code = self.proc.poll()
        if code == IMPORT_ERROR_EXIT:
            return RLUnavailable(f"`import trl` fails in {self.python}:\n{self.stderr_tail(8)}\nrebuild the TRL "
                                 "environment with `python -m course_lib.rl setup --force`")
        return RLUnavailable(f"the GRPO trainer ({self.python}) {what} (exit code {code}); last lines of its "
                             f"stderr:\n{self.stderr_tail()}")

    def messages(self):
        """Yield the worker's messages (dicts) until it closes its output."""
        fd = self.proc.stdout.fileno()
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                if line.strip():
                    yield json.loads(line)
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise self.failed("ran past its time limit (settings.worker_timeout_s)")
            if not self.sel.select(timeout=min(left, 5.0)):
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return
            self.buf += chunk

    def answer(self, reply: dict) -> None:
        try:
            self.proc.stdin.write((json.dumps(reply) + "\n").encode("utf-8"))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self.failed("stopped while its rewards were being sent") from None

    def close(self) -> None:
        self.sel.close()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()


def train_grpo(model_dir: str | Path, rows: Sequence[Mapping[str, Any]], hidden_tests: Mapping[int, Mapping[str, Any]],
               out_dir: str | Path, settings: RLSettings | None = None, *,
               log: logging.Logger | Callable[[str], Any] | None = None,
               train_log_path: str | Path | None = None,
               prefilter_cache: str | Path | None = None) -> dict[str, Any]:
    """Train ``model_dir`` with group-relative policy optimisation on ``rows``' prompts; rewards from the
    course sandbox running each row's hidden tests (``hidden_tests``: ``idx`` → record with ``tests``,
    ``signature``). See the module docstring for the protocol and the outputs; ``train_log_path`` puts
    ``train_log.json`` elsewhere (the drill: ``output/rl/train_log.json`` beside the other variants'
    outputs, the model in ``models/rl``). With ``settings.prefilter_samples`` (K > 0) the prompts first go through
    :func:`course_lib.rl.prefilter.prefilter_prompts` (the KAT notes' all-pass/all-fail filter, K samples each from
    ``model_dir``), cached in ``prefilter_cache`` (default: ``<out_dir>/../rl_prefilter/<model>_k<K>_seed<seed>.json``).

    Returns ``{"model_path", "train_log", "steps", "prompts", "dropped", "prefilter", "rollouts", "seconds",
    "cpu_seconds", "steps_per_s", "worker", "versions", "settings", ...}`` (also written to
    ``<out_dir>/rl_result.json``). Raises :class:`RLUnavailable` when the TRL environment is missing or
    the trainer fails (with the end of its stderr). Introduced in lesson 10.
    """
    from course_lib.evaluation.generation import load_tokenizer

    settings = settings or rl_settings("ci")
    model_dir, out_dir = Path(model_dir).resolve(), Path(out_dir).resolve()   # the worker runs in a temp folder
    python, where = trl_python()
    if python is None:
        raise RLUnavailable(where)
    prompts, dropped = build_rl_prompts(rows, hidden_tests, load_tokenizer(model_dir))
    if len(prompts) < settings.prompts_per_step:
        raise ValueError(f"{len(prompts)} training rows have hidden tests and a signature (left out: {dropped}); "
                         f"one step needs {settings.prompts_per_step} prompts")
    prefilter: dict[str, Any] | None = None
    if settings.prefilter_samples:        # the KAT notes' filter: drop prompts whose K samples all pass or all fail
        from course_lib.rl.prefilter import model_fingerprint, prefilter_prompts

        pool = len(prompts)
        cache = Path(prefilter_cache) if prefilter_cache else (
            Path(out_dir).resolve().parent / "rl_prefilter" /
            f"{model_fingerprint(model_dir)}_k{settings.prefilter_samples}_seed{settings.seed}.json")
        prompts, prefilter = prefilter_prompts(model_dir, prompts, settings,
                                               needed=settings.steps * settings.prompts_per_step,
                                               cache_path=cache, log=lambda m: _say(log, m))
        if len(prompts) < settings.prompts_per_step:
            raise ValueError(f"the prefilter kept {len(prompts)} of {pool} prompts (all pass {prefilter['all_pass']}, "
                             f"all fail {prefilter['all_fail']}); one step needs {settings.prompts_per_step}: turn "
                             f"prefilter_samples off or start from a model whose samples are mixed")
    out_dir.mkdir(parents=True, exist_ok=True)
    model_out = out_dir / "model"
    if model_out.exists():
        shutil.rmtree(model_out)
    log_path = Path(train_log_path).resolve() if train_log_path else out_dir / "train_log.json"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    rollouts_path = out_dir / ROLLOUTS_FILE
    for stale in (log_path, out_dir / "rl_result.json", rollouts_path):
        stale.unlink(missing_ok=True)
    judge = RolloutJudge(prompts, settings)
    _say(log, f"rl: {len(prompts)} prompts ({sum(dropped.values())} rows left out: {dropped}), {settings.steps} steps "
              f"x {settings.prompts_per_step} prompts x K={settings.group_size}, reward {settings.reward!r}, {where}")

    t0 = time.monotonic()
    records: list[dict[str, Any]] = []
    summary_logs: dict[str, Any] = {}
    done: dict[str, Any] = {}
    ready: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="course-rl-") as tmp:
        job = {"model_dir": str(model_dir), "save_dir": str(model_out), "threads": settings.threads,
               "prompts": [{"text": p.text, "key": p.key} for p in prompts],
               "trl": trl_config(settings, str(Path(tmp) / "trainer"))}
        job_path, err_path = Path(tmp) / "job.json", out_dir / "worker_stderr.txt"
        job_path.write_text(json.dumps(job), encoding="utf-8")
        env = clean_env()
        env.update(OMP_NUM_THREADS=str(settings.threads), OMP_WAIT_POLICY=settings.omp_wait_policy, TMPDIR=tmp)
        with open(err_path, "w", encoding="utf-8") as err:
            try:   # -P: the worker's folder is not put first on sys.path
                proc = subprocess.Popen([python, "-P", str(WORKER), str(job_path)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=err, env=env, cwd=tmp)
            except OSError as exc:
                raise RLUnavailable(f"could not start {python}: {exc}") from exc
        worker = _Worker(proc, err_path, t0 + settings.worker_timeout_s, python)
        try:
            last_wall, last_cpu, judge_s = 0.0, 0.0, 0.0
            for msg in worker.messages():
                op = msg.get("op")
                if op == "ready":                       # model loaded, trainer built: step 1's clock starts
                    last_wall, last_cpu, ready = float(msg["wall_s"]), float(msg["cpu_s"]), msg
                elif op == "score":
                    try:
                        res = judge.score(msg["keys"], msg["completions"])
                    except Exception as exc:
                        worker.answer({"error": f"{type(exc).__name__}: {exc}"})
                        raise
                    judge_s += res["stats"]["judge_seconds"]
                    save_rollouts(rollouts_path, len(records) + 1, msg["keys"], res["programs"], res["rewards"],
                                  res["statuses"])   # the rewarded rollouts, for the audit (lesson 10)
                    worker.answer({"rewards": res["rewards"]})
                elif op == "log":
                    logs = msg.get("logs") or {}
                    if "train_runtime" in logs:          # the trainer's end-of-run summary, not a step
                        summary_logs = logs
                        continue
                    wall, cpu = float(msg["wall_s"]), float(msg["cpu_s"])
                    rec = step_record(msg["step"], logs, judge.rounds[-1] if judge.rounds else None,
                                      seconds=wall - last_wall, cpu_seconds=cpu - last_cpu,
                                      judge_seconds=judge_s, round_index=len(judge.rounds) - 1)
                    rec["generate_seconds"] = round(float(msg.get("generate_s") or 0.0), 3)
                    rec["generate_cpu_seconds"] = round(float(msg.get("generate_cpu_s") or 0.0), 3)
                    last_wall, last_cpu, judge_s = wall, cpu, 0.0
                    records.append(rec)
                    write_json_atomic(log_path, records)    # readable while it trains
                    _say(log, f"rl step {rec['step']}/{settings.steps} (round {rec['round']}): reward {_fmt(rec['reward_mean'])}, "
                              f"pass rate {_fmt(rec['pass_rate'])}, {rec['groups_without_signal']} groups without signal, "
                              f"clip low/high {_fmt(rec['clip_low_fraction'])}/{_fmt(rec['clip_high_fraction'])}, "
                              f"entropy {_fmt(rec['entropy'])}, {rec['seconds']:.1f} s ({rec['cpu_seconds']:.1f} CPU s in the "
                              f"trainer, {rec['generate_seconds']:.1f} s generating, {rec['judge_seconds']:.1f} s judging)")
                elif op == "done":
                    done = msg
            proc.wait(timeout=max(5.0, t0 + settings.worker_timeout_s - time.monotonic()))
            if proc.returncode != 0 or not done:
                raise worker.failed("did not finish")
        finally:
            worker.close()
    copied = finish_model_folder(model_out, model_dir)
    seconds = time.monotonic() - t0
    rounds = judge.rounds
    cpu_worker = float(done.get("cpu_s") or 0.0)
    cpu_judge = sum(r["judge_cpu_seconds"] for r in rounds)
    result = {
        "model_path": str(model_out), "start_model": str(model_dir), "train_log": str(log_path),
        "rollouts_file": str(rollouts_path),
        "steps": len(records), "prompts": len(prompts), "dropped": dropped,
        "prefilter": {k: v for k, v in prefilter.items() if k != "kept_keys"} if prefilter else None,
        "rollouts": sum(r["rollouts"] for r in rounds), "rounds": len(rounds),
        "sandbox_runs": sum(r["unique_programs"] for r in rounds),
        "seconds": round(seconds, 2), "cpu_seconds": round(cpu_worker + cpu_judge, 2),
        "cpu_seconds_trainer": round(cpu_worker, 2), "cpu_seconds_judge": round(cpu_judge, 2),
        "generate_seconds": round(sum(r.get("generate_seconds", 0.0) for r in records), 2),
        "generate_cpu_seconds": round(sum(r.get("generate_cpu_seconds", 0.0) for r in records), 2),
        "judge_seconds": round(sum(r["judge_seconds"] for r in rounds), 2),
        "steps_per_s": round(len(records) / seconds, 4) if seconds > 0 else None,
        "worker": {"python": python, "found": where, "seconds": done.get("seconds"), "threads": done.get("threads"),
                   "start_up_s": ready.get("wall_s")},
        "versions": done.get("versions"), "trainer_summary": summary_logs, "copied_from_start_model": copied,
        "settings": settings.as_dict(), "first": records[0] if records else None,
        "last": records[-1] if records else None,
    }
    write_json_atomic(log_path, records)
    write_json_atomic(out_dir / "rl_result.json", result)
    _say(log, f"rl: {len(records)} steps in {seconds:.0f} s ({result['cpu_seconds']:.0f} CPU s, "
              f"{result['steps_per_s']} steps/s; judge {result['judge_seconds']:.0f} s for {result['sandbox_runs']} "
              f"sandbox runs) → {model_out}")
    return result


def write_json_atomic(path: Path, data: Any) -> None:
    """``data`` as JSON at ``path`` through :func:`course_lib.store.atomic_write_text` (a reader never sees
    half a file)."""
    store.atomic_write_text(path, json.dumps(data, indent=1))


def _fmt(v: Any) -> str:
    return "-" if v is None else f"{v:.3f}"
