"""Prompts, rewards and per-step records of the RL step: the parts that do not need TRL.

* :func:`build_rl_prompts` — one prompt per training row with hidden tests, built with the drill's test
  pass@1 protocol: the instruction in the model's chat template, then ```` ```python ```` and the task's
  ``def`` line (:func:`course_lib.drill.inference.signature_prefix`); the rollout continues after the ``def``
  line and its program is the code of that answer (:func:`course_lib.evaluation.extract.extract_code`).
* :class:`RolloutJudge` — rewards of a batch of rollouts from the course sandbox (``run_many`` through the
  drill.s :func:`~course_lib.drill.evaluate.run_programs`), in this process. The only thing a rollout
  contributes is its text; the tests, the program and the verdict are built here, so a rollout can
  forge a reward only by forging the sandbox's verdict, which the judge of lesson 06 rules out.
* :func:`reward_of` — the three rewards compared (``pass``, ``fraction``, ``lecture``).
* :func:`group_stats` and :func:`step_record` — what ``rl/train_log.json`` holds per optimisation step.

Introduced in lesson 10.
"""
from __future__ import annotations

import ast
import math
import resource
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from course_lib.evaluation.rewards import reward_of_result
from course_lib.evaluation.sandbox.run import planned_tests
from course_lib.rl.settings import RLSettings

# the keys every record of train_log.json has (issue 25); more may follow them
LOG_KEYS = ("step", "reward_mean", "pass_rate", "groups_without_signal", "clip_low_fraction",
            "clip_high_fraction", "kl", "entropy", "seconds")


# --- prompts ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RLPrompt:
    """One training prompt: ``text`` is what the policy reads (chat prompt + ``prefix``), ``prefix`` the
    start of the answer it continues (```` ```python ```` and the ``def`` line), ``tests`` the hidden
    tests one statement each, ``key`` the row's ``idx`` as a string."""

    key: str
    instruction: str
    prefix: str
    text: str
    tests: tuple[str, ...]
    entry_point: str


def split_tests(tests: str) -> list[str]:
    """The hidden tests as one source string per top-level statement (so the sandbox reports one
    outcome per test and the ``fraction`` reward can count them). Raises ``ValueError`` naming the
    problem when the text does not parse or holds no statement. Introduced in lesson 10."""
    try:
        tree = ast.parse(tests)
    except SyntaxError as exc:
        raise ValueError(f"hidden tests do not parse ({exc}): {tests[:120]!r}") from None
    parts = [ast.get_source_segment(tests, node) for node in tree.body]
    parts = [p for p in parts if p and p.strip()]
    if not parts:
        raise ValueError(f"hidden tests hold no statement: {tests[:120]!r}")
    return parts


def _row_key(row: Mapping[str, Any]) -> int | None:
    for name in ("idx", "row_id"):
        v = row.get(name)
        if v is not None and str(v).lstrip("-").isdigit():
            return int(v)
    return None


def _instruction(row: Mapping[str, Any]) -> str | None:
    if row.get("instruction"):
        extra = row.get("input") or ""
        return row["instruction"] + ("\n" + extra if extra else "")
    return row.get("prompt")


def build_rl_prompts(rows: Iterable[Mapping[str, Any]], hidden_tests: Mapping[int, Mapping[str, Any]],
                     tokenizer) -> tuple[list[RLPrompt], dict[str, int]]:
    """RL prompts for ``rows`` (the pipeline's ``codegen.json`` records — ``row_id`` + ``instruction`` —
    or tiny-codes rows — ``idx`` + ``prompt``) joined with their hidden-test records (``idx`` →
    ``{"tests", "signature", "entry_point"}``; :func:`course_lib.drill.taskgen.load_hidden_tests` or the
    drill's ``train_python.json`` rows).

    Returns (prompts, dropped) where ``dropped`` counts the rows left out and why (``no idx``, ``no
    instruction``, ``no hidden tests``, ``no signature``, ``no planned test``: setup lines only) — nothing
    is left out silently. Introduced in
    lesson 10.
    """
    from course_lib.drill.inference import signature_prefix
    from course_lib.training.instructions import chat_prompt

    out: list[RLPrompt] = []
    dropped = {"no idx": 0, "no instruction": 0, "no hidden tests": 0, "no signature": 0, "no planned test": 0}
    for row in rows:
        key = _row_key(row)
        if key is None:
            dropped["no idx"] += 1
            continue
        instruction = _instruction(row)
        if not instruction:
            dropped["no instruction"] += 1
            continue
        rec = hidden_tests.get(key)
        if not rec or not rec.get("tests"):
            dropped["no hidden tests"] += 1
            continue
        prefix = signature_prefix({"signature": rec.get("signature"), "tests": rec["tests"]})
        if prefix is None:
            dropped["no signature"] += 1
            continue
        tests = tuple(split_tests(rec["tests"]))
        if not any(planned_tests(list(tests))):   # setup lines only: nothing a reward could count
            dropped["no planned test"] += 1
            continue
        out.append(RLPrompt(key=str(key), instruction=instruction, prefix=prefix,
                            text=chat_prompt(tokenizer, instruction) + prefix,
                            tests=tests, entry_point=rec.get("entry_point") or ""))
    return out, dropped


def program_of(prefix: str, completion: str) -> str | None:
    """The program a rollout is judged by: the code of ``prefix + completion`` as the drill's evaluation
    extracts it (the ``def`` line and the body up to the closing fence); None when there is none.
    Introduced in lesson 10."""
    from course_lib.evaluation.extract import extract_code

    return extract_code(prefix + completion)


# --- rewards ---------------------------------------------------------------------------------------

def reward_of(kind: str, result: Any | None) -> float:
    """The reward of one sandbox result (``None``: the rollout has no code) under reward ``kind``, from the
    one reward module (:func:`course_lib.evaluation.rewards.reward_of_result`), over the prompt's
    planned tests:

    * ``pass`` — 1.0 when the run passed and every planned test passed, else 0.0;
    * ``fraction`` — the share of the planned tests that passed, 0.0 for a syntax or runtime error (the
      lecture's shaping with its penalties set to 0);
    * ``lecture`` — the lecture's ``calculate_reward``: -1 syntax error (and no code), -0.5 runtime error
      (also an exit at load, timeout, memory or output limit), else the share of tests passed.

    A ``sandbox_error`` is not the rollout's fault and raises (the caller leaves it unscored).
    Introduced in lesson 10.
    """
    return reward_of_result(kind, result)


def group_stats(keys: Sequence[str], rewards: Sequence[float | None], passed: Sequence[bool]) -> dict[str, Any]:
    """Statistics of one generation round: rollouts grouped by prompt ``key`` (K per prompt).

    ``groups_without_signal`` counts groups whose scored rewards are all equal (their group-relative
    advantage is 0 everywhere: what DAPO's dynamic sampling would drop and resample), split into all
    passing and all failing; ``pass_rate`` is the share of rollouts whose tests all pass. Unscored
    rollouts (``None``: the sandbox failed) are counted apart and left out of the means.
    Introduced in lesson 10.
    """
    if not (len(keys) == len(rewards) == len(passed)):
        raise ValueError(f"{len(keys)} keys, {len(rewards)} rewards and {len(passed)} pass flags")
    groups: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        groups.setdefault(k, []).append(i)
    scored = [r for r in rewards if r is not None]
    flat = no_signal = all_pass = all_fail = 0
    for idx in groups.values():
        rs = [rewards[i] for i in idx if rewards[i] is not None]
        if rs and max(rs) - min(rs) <= 1e-12:
            no_signal += 1
            if all(passed[i] for i in idx):
                all_pass += 1
            elif not any(passed[i] for i in idx):
                all_fail += 1
            else:
                flat += 1
    mean = sum(scored) / len(scored) if scored else None
    std = math.sqrt(sum((r - mean) ** 2 for r in scored) / len(scored)) if scored else None
    return {"rollouts": len(keys), "groups": len(groups), "reward_mean": mean, "reward_std": std,
            "pass_rate": sum(map(bool, passed)) / len(passed) if passed else None,
            "groups_without_signal": no_signal, "groups_all_pass": all_pass, "groups_all_fail": all_fail,
            "groups_flat_mixed": flat, "unscored": sum(r is None for r in rewards)}


# --- one record per optimisation step --------------------------------------------------------------

# TRL's log names → train_log.json's names
TRL_LOG_NAMES = {"clip_ratio/low_mean": "clip_low_fraction", "clip_ratio/high_mean": "clip_high_fraction",
                 "clip_ratio/region_mean": "clip_fraction", "kl": "kl", "entropy": "entropy", "loss": "loss",
                 "grad_norm": "grad_norm", "learning_rate": "learning_rate",
                 "completions/mean_length": "completion_mean_tokens",
                 "completions/clipped_ratio": "truncated_fraction", "reward": "trl_reward_mean",
                 "frac_reward_zero_std": "trl_frac_reward_zero_std",
                 "sampling/sampling_logp_difference/mean": "train_inference_logp_diff_mean",
                 "sampling/sampling_logp_difference/max": "train_inference_logp_diff_max",
                 "sampling/importance_sampling_ratio/min": "is_ratio_min",
                 "sampling/importance_sampling_ratio/mean": "is_ratio_mean",
                 "sampling/importance_sampling_ratio/max": "is_ratio_max"}


def _number(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def step_record(step: int, trl_logs: Mapping[str, Any], round_stats: Mapping[str, Any] | None, *,
                seconds: float, cpu_seconds: float | None = None, judge_seconds: float | None = None,
                round_index: int | None = None) -> dict[str, Any]:
    """One record of ``train_log.json``: the keys of :data:`LOG_KEYS` first, then the rest.

    ``trl_logs``: what TRL logged for the step (its names are mapped by :data:`TRL_LOG_NAMES`; ``kl`` is
    None when the loss has no KL term, i.e. TRL logged none). ``round_stats``: :func:`group_stats` of the
    generation round whose rollouts the step trained on (computed here from the judge's own rewards,
    not taken from the trainer). ``seconds``: the step's wall time. Introduced in lesson 10.
    """
    rs = dict(round_stats or {})
    rec: dict[str, Any] = {"step": int(step), "reward_mean": rs.get("reward_mean"), "pass_rate": rs.get("pass_rate"),
                           "groups_without_signal": rs.get("groups_without_signal"),
                           "clip_low_fraction": _number(trl_logs.get("clip_ratio/low_mean")),
                           "clip_high_fraction": _number(trl_logs.get("clip_ratio/high_mean")),
                           "kl": _number(trl_logs.get("kl")), "entropy": _number(trl_logs.get("entropy")),
                           "seconds": round(float(seconds), 3)}
    for name, ours in TRL_LOG_NAMES.items():
        if ours not in rec and name in trl_logs:
            rec[ours] = _number(trl_logs[name])
    for k in ("reward_std", "groups", "groups_all_pass", "groups_all_fail", "groups_flat_mixed", "rollouts",
              "unscored", "unique_programs", "statuses"):
        if k in rs:
            rec[k] = rs[k]
    if round_index is not None:
        rec["round"] = round_index
    if cpu_seconds is not None:
        rec["cpu_seconds"] = round(float(cpu_seconds), 3)
    if judge_seconds is not None:
        rec["judge_seconds"] = round(float(judge_seconds), 3)
    return rec


# --- the judge -------------------------------------------------------------------------------------

class RolloutJudge:
    """Rewards of rollouts from the course sandbox, in the course's process (Introduced in lesson 10).

    ``prompts``: the :class:`RLPrompt` list the trainer was given; a rollout names its prompt by
    ``key`` and contributes only its completion text. :meth:`score` builds each program
    (:func:`program_of`), runs the unique (program, tests) pairs of the batch once each in the sandbox
    with the prompt's hidden tests, and returns one reward per rollout, the pass flags, and
    :func:`group_stats`, plus each rollout's ``programs`` and ``statuses`` (what the trainer saves for the
    audit, :mod:`course_lib.rl.audit`). Every call is kept in :attr:`rounds` (timings included).
    """

    def __init__(self, prompts: Sequence[RLPrompt], settings: RLSettings):
        self.by_key = {p.key: p for p in prompts}
        self.settings = settings
        self.rounds: list[dict[str, Any]] = []

    def _run(self, items: list[dict]) -> list[Any]:
        from course_lib.drill.evaluate import run_programs

        s = self.settings
        return run_programs(items, workers=s.judge_workers, timeout_s=s.judge_timeout_s, memory_mb=s.judge_memory_mb,
                            backend=s.sandbox_backend, configured=s.sandbox_configured)

    def score(self, keys: Sequence[str], completions: Sequence[str]) -> dict[str, Any]:
        if len(keys) != len(completions):
            raise ValueError(f"{len(keys)} keys but {len(completions)} completions")
        unknown = sorted({k for k in keys if k not in self.by_key})
        if unknown:
            raise KeyError(f"rollouts name prompts the judge was not given: {unknown[:5]}")
        t0, cpu0 = time.monotonic(), _cpu_now()
        programs = [program_of(self.by_key[k].prefix, c if isinstance(c, str) else "") for k, c in zip(keys, completions)]
        unique: dict[tuple[str, str], int] = {}
        items: list[dict] = []
        for k, prog in zip(keys, programs):
            if prog is not None and (k, prog) not in unique:
                unique[(k, prog)] = len(items)
                items.append({"code": prog, "tests": list(self.by_key[k].tests)})
        results = self._run(items) if items else []
        rewards: list[float | None] = []
        passed: list[bool] = []
        statuses: dict[str, int] = {}
        per_rollout: list[str] = []
        for k, prog in zip(keys, programs):
            res = None if prog is None else results[unique[(k, prog)]]
            status = "no_code" if res is None else res.status
            statuses[status] = statuses.get(status, 0) + 1
            per_rollout.append(status)
            if res is not None and res.status == "sandbox_error":
                rewards.append(None)
                passed.append(False)
                continue
            rewards.append(reward_of(self.settings.reward, res))
            passed.append(res is not None and res.status == "passed")
        stats = group_stats(keys, rewards, passed)
        stats.update(unique_programs=len(items), statuses=statuses, judge_seconds=round(time.monotonic() - t0, 3),
                     judge_cpu_seconds=round(_cpu_now() - cpu0, 3))
        self.rounds.append(stats)
        return {"rewards": rewards, "passed": passed, "stats": stats, "programs": programs, "statuses": per_rollout}


def _cpu_now() -> float:
    """CPU seconds of this process and of its finished children (the sandbox runs)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
