"""The three-layer rule reward of KAT-Coder-V2.5 for coding-agent trajectories.

1. **Task success** (highest weight): every Fail-to-Pass test now passes and no Pass-to-Pass test
   broke.
2. **Behaviour penalties**: repeated text, malformed tool arguments, identical tool calls repeated
   within one turn.
3. **Progress** (failed trajectories only): file localisation scored with F2 (recall counts more
   than precision: missing the file to edit is worse than opening one too many) and the share of
   Fail-to-Pass tests that pass — capped so that no failure ever outscores a success.

Introduced in lesson 09.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from course_lib.agentic.harness import ToolCall, malformed_calls  # lesson 08's, used by the rewards


def f_beta(predicted: Iterable[str], gold: Iterable[str], beta: float = 2.0) -> float:
    """F-beta of a set of predicted files against the gold files (F2 by default; 0 when either is
    empty, 1 when both are). Introduced in lesson 09."""
    pred, gold = set(predicted), set(gold)
    if not pred and not gold:
        return 1.0
    tp = len(pred & gold)
    if tp == 0:
        return 0.0
    precision, recall = tp / len(pred), tp / len(gold)
    b2 = beta * beta
    return (1 + b2) * precision * recall / (b2 * precision + recall)


def repeated_text_ratio(text: str, n: int = 8) -> float:
    """Share of word n-grams that repeat an earlier n-gram (0 = no repetition). Introduced in lesson 09."""
    words = text.split()
    grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
    if not grams:
        return 0.0
    return 1.0 - len(set(grams)) / len(grams)


def repeated_calls(calls: Sequence[ToolCall]) -> int:
    """Identical calls (same tool, same normalised arguments) repeated *inside one turn*, beyond their
    first occurrence in that turn (KAT-Coder-V2.5: 单轮重复调用). The same call in a later turn is not
    counted: re-running the tests after an edit verifies the fix. Introduced in lesson 09."""
    seen, repeats = set(), 0
    for call in calls:
        try:
            args = json.dumps(json.loads(call.arguments), sort_keys=True)
        except (json.JSONDecodeError, TypeError):
            args = call.arguments
        key = (call.turn, call.name, args)
        repeats += key in seen
        seen.add(key)
    return repeats


@dataclass
class RewardConfig:
    """Weights of the three layers. Penalties are capped at ``max_penalty`` and progress at
    ``progress_cap``; ``success - max_penalty > progress_cap`` keeps every failure below every success
    (:func:`rule_reward` refuses a config that breaks it)."""

    success: float = 1.0
    repeated_text: float = 0.2          # × repeated-text ratio
    repeated_text_min: float = 0.3      # ratios below this are normal prose
    malformed_call: float = 0.1         # per malformed call
    repeated_call: float = 0.05         # per identical call repeated within one turn
    max_penalty: float = 0.5
    localisation: float = 0.2           # × F2 of the files touched
    partial_tests: float = 0.2          # × share of Fail-to-Pass tests passing
    progress_cap: float = 0.4


@dataclass
class Trajectory:
    """What the reward reads from one rollout: its text, tool calls, files it edited, and the test
    results of the environment after its patch (test id → passed)."""

    text: str
    calls: list[ToolCall] = field(default_factory=list)
    edited_files: list[str] = field(default_factory=list)
    test_results: dict[str, bool] = field(default_factory=dict)


def rule_reward(traj: Trajectory, fail_to_pass: Sequence[str], pass_to_pass: Sequence[str],
                gold_files: Sequence[str], schemas: Mapping[str, Sequence[str]],
                cfg: RewardConfig | None = None) -> dict[str, float]:
    """The three-layer reward and its parts. A test missing from ``test_results`` counts as failed.
    Partial Fail-to-Pass credit counts only while every Pass-to-Pass test still passes (a patch that
    breaks a working test gets no credit for half a fix). A config under which some failure could
    outscore some success (``success - max_penalty <= progress_cap``) is refused.
    Introduced in lesson 09."""
    cfg = cfg or RewardConfig()
    if cfg.success - cfg.max_penalty <= cfg.progress_cap:
        raise ValueError(f"RewardConfig lets a failure outscore a success: the worst success scores "
                         f"success - max_penalty = {cfg.success - cfg.max_penalty:g}, a failure up to "
                         f"progress_cap = {cfg.progress_cap:g}; lower max_penalty or progress_cap")
    if not fail_to_pass:
        raise ValueError("an environment without Fail-to-Pass tests cannot tell a fix from a no-op; "
                         "reject it when building the environment")
    res = traj.test_results
    f2p_passed = sum(bool(res.get(t, False)) for t in fail_to_pass)
    p2p_ok = all(res.get(t, False) for t in pass_to_pass)
    success = f2p_passed == len(fail_to_pass) and p2p_ok
    rep = repeated_text_ratio(traj.text)
    penalty = min(cfg.max_penalty,
                  (cfg.repeated_text * rep if rep >= cfg.repeated_text_min else 0.0)
                  + cfg.malformed_call * malformed_calls(traj.calls, schemas)
                  + cfg.repeated_call * repeated_calls(traj.calls))
    loc = f_beta(traj.edited_files, gold_files)
    partial = f2p_passed / len(fail_to_pass) if p2p_ok else 0.0
    progress = 0.0 if success else min(cfg.progress_cap, cfg.localisation * loc + cfg.partial_tests * partial)
    total = (cfg.success if success else 0.0) + progress - penalty
    return {"reward": total, "success": float(success), "progress": progress, "penalty": penalty,
            "localisation_f2": loc, "f2p_share": f2p_passed / len(fail_to_pass), "p2p_ok": float(p2p_ok)}


@dataclass
class Rollout:
    """One sampled answer for rejection-sampling fine-tuning (RFT): whether the final answer is right,
    its tool calls, and for each call whether the harness reported it failed."""

    correct: bool
    calls: list[ToolCall] = field(default_factory=list)
    call_failed: list[bool] = field(default_factory=list)


def repeated_queries(calls: Sequence[ToolCall]) -> int:
    """Identical calls anywhere in the trajectory (any turn) beyond their first occurrence: a search
    agent that asks the same query twice. Introduced in lesson 09."""
    return repeated_calls([ToolCall(c.name, c.arguments, turn=0) for c in calls])


def rft_select(rollouts: Sequence[Rollout]) -> list[int]:
    """Indices of the rollouts RFT keeps (KAT-Coder-V2 WebSearch expert): the answer is correct, no tool
    call failed, and no query was repeated. Introduced in lesson 09."""
    keep = []
    for i, r in enumerate(rollouts):
        if len(r.call_failed) != len(r.calls):
            raise ValueError(f"rollout {i}: {len(r.calls)} calls but {len(r.call_failed)} failure flags")
        if r.correct and not any(r.call_failed) and repeated_queries(r.calls) == 0:
            keep.append(i)
    return keep
