"""Trajectory quality: rule filters, hint-assisted recovery (KAT-Coder-V2.5) and reference-guided RFT
(KAT-Coder V1), each at toy size.

* **Process rule filters** (V2.5 过程评分): before a trajectory is scored, rules drop the ones that
  cheat or cannot be trusted — invalid tool calls, edits to the tests (test tampering), expected
  answers written into the code (hard-coding), results that change between runs (unstable execution).
* **Hint-assisted recovery** (V2.5 提示辅助恢复): a failed task gets a hint; once a hinted run yields a
  verified patch, the trajectory is regenerated from the original context *without* the hint, and kept
  only when it carries no trace of the hint, passes the tests and ends in the same patch.
* **Reference-guided RFT** (V1 参考引导的强化微调): rollouts are compared step by step with correct
  reference trajectories; a rollout that strays is corrected online, one that strays too far is stopped
  early and resampled (saving rollout compute); the reward still comes from the rule tests, never from
  the similarity to a reference.

Introduced in lesson 08 (filters, recovery) and lesson 09 (reference-guided RFT).
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from course_lib.agentic.harness import ToolCall, malformed_calls

TEST_FILE_PATTERNS = ("test_*.py", "*_test.py", "conftest.py", "tests/*", "*/tests/*", "pytest.ini", "tox.ini")


def patch_files(patch: str) -> list[str]:
    """The files a unified diff touches (from its ``+++``/``---`` lines, ``a/``/``b/`` stripped).
    Introduced in lesson 08."""
    files = []
    for line in patch.splitlines():
        if line.startswith(("+++ ", "--- ")):
            path = line[4:].split("\t")[0].strip()
            if path == "/dev/null":
                continue
            path = path[2:] if path.startswith(("a/", "b/")) else path
            if path not in files:
                files.append(path)
    return files


def added_lines(patch: str) -> list[str]:
    """The lines a unified diff adds (without the leading ``+``). Introduced in lesson 08."""
    return [ln[1:] for ln in patch.splitlines() if ln.startswith("+") and not ln.startswith("+++")]


def is_test_file(path: str, test_files: Sequence[str] = ()) -> bool:
    """A declared test file, or a path that looks like one (``test_*.py``, ``*_test.py``, ``conftest.py``,
    anything under ``tests/``, pytest's config files). Introduced in lesson 08."""
    name = path.rsplit("/", 1)[-1]
    return path in test_files or any(fnmatch.fnmatch(path, p) or fnmatch.fnmatch(name, p)
                                     for p in TEST_FILE_PATTERNS)


def process_flags(calls: Sequence[ToolCall], patch: str, *, schemas: Mapping[str, Sequence[str]],
                  test_files: Sequence[str] = (), expected_literals: Sequence[str] = (),
                  runs: Sequence[Mapping[str, bool]] = ()) -> list[str]:
    """Why a trajectory must not be trained on (empty: keep it). ``expected_literals`` are the
    expected outputs the tests assert (a patch that writes them into the code is hard-coding the
    answer); ``runs`` are the test results of repeated runs of the final patch (they must agree).
    Introduced in lesson 08."""
    reasons = []
    bad = malformed_calls(calls, schemas)
    if bad:
        reasons.append(f"invalid calls: {bad} malformed or unknown tool call(s)")
    tampered = [f for f in patch_files(patch) if is_test_file(f, test_files)]
    if tampered:
        reasons.append(f"test tampering: the patch edits {', '.join(tampered)}")
    code_added = [ln for f_ok, ln in _added_by_file(patch) if not is_test_file(f_ok, test_files)]
    hard = sorted({lit for lit in expected_literals if lit and any(lit in ln for ln in code_added)})
    if hard:
        reasons.append(f"hard-coding: the patch writes the tests' expected value(s) {', '.join(hard)} into the code")
    if runs and any(dict(r) != dict(runs[0]) for r in runs[1:]):
        flaky = sorted(t for t in runs[0] if len({bool(r.get(t)) for r in runs}) > 1)
        reasons.append(f"unstable execution: {', '.join(flaky) or 'the test set'} changed between runs")
    return reasons


def _added_by_file(patch: str) -> list[tuple[str, str]]:
    out, current = [], ""
    for line in patch.splitlines():
        if line.startswith("+++ "):
            path = line[4:].split("\t")[0].strip()
            current = path[2:] if path.startswith("b/") else path
        elif line.startswith("+"):
            out.append((current, line[1:]))
    return out


# --- hint-assisted recovery ----------------------------------------------------------------------

@dataclass
class Attempt:
    """One run of the agent: the text of its trajectory and the patch it ends with."""

    trajectory: str
    patch: str


@dataclass
class Recovery:
    """What :func:`hint_recovery` did: the verified patch found with the hint, the kept trajectory (or
    None) and why each regenerated trajectory was rejected."""

    verified_patch: str | None
    kept: Attempt | None
    rejected: list[str] = field(default_factory=list)


def hint_recovery(context: str, hint: str, solve: Callable[[str, int], Attempt],
                  regenerate: Callable[[str, str, int], Attempt], verify: Callable[[str], bool], *,
                  attempts: int = 4) -> Recovery:
    """Hint-assisted recovery. ``solve(context_with_hint, seed)`` runs the agent with the hint until a
    patch passes ``verify``; then ``regenerate(context, verified_patch, seed)`` rewrites the trajectory
    from the original context; a regenerated trajectory is kept only when the hint does not appear in
    it, its patch passes ``verify`` and equals the verified patch. Introduced in lesson 08."""
    hinted = f"{context}\n\nHint: {hint}"
    verified = None
    for seed in range(attempts):
        run = solve(hinted, seed)
        if verify(run.patch):
            verified = run.patch
            break
    if verified is None:
        return Recovery(None, None, ["no hinted run passed the tests"])
    rejected = []
    for seed in range(attempts):
        cand = regenerate(context, verified, seed)
        if hint.lower() in cand.trajectory.lower() or "hint" in cand.trajectory.lower():
            rejected.append(f"seed {seed}: the trajectory leaks the hint")
        elif not verify(cand.patch):
            rejected.append(f"seed {seed}: its patch fails the tests")
        elif cand.patch.strip() != verified.strip():
            rejected.append(f"seed {seed}: its patch differs from the verified one")
        else:
            return Recovery(verified, cand, rejected)
    return Recovery(verified, None, rejected)


# --- reference-guided RFT ------------------------------------------------------------------------

def reference_deviation(steps: Sequence[str], references: Sequence[Sequence[str]]) -> int:
    """How many of the last steps of ``steps`` no reference trajectory shares: ``len(steps)`` minus the
    longest common prefix with any reference. Introduced in lesson 09."""
    if not references:
        raise ValueError("reference-guided rollouts need at least one correct reference trajectory")
    best = 0
    for ref in references:
        n = 0
        for a, b in zip(steps, ref):
            if a != b:
                break
            n += 1
        best = max(best, n)
    return len(steps) - best


@dataclass
class GuidedRollout:
    """A reference-guided rollout: its steps, how many steps were generated in all (aborted tries
    included), how many steps were corrected, how many times it was aborted and resampled, and the
    rule-test reward."""

    steps: list[str]
    generated: int
    corrected: int
    restarts: int
    reward: float


def guided_rollout(policy: Callable[[list[str], np.random.Generator], str | None],
                   references: Sequence[Sequence[str]], verify: Callable[[list[str]], bool], *,
                   rng: np.random.Generator, correct_after: int | None = 2, max_corrections: int = 1,
                   abort_after: int | None = 3, max_steps: int = 12, max_restarts: int = 3) -> GuidedRollout:
    """Roll out ``policy`` (next step, or None to stop) under reference guidance. Online correction:
    when the rollout has strayed ``correct_after`` steps from every reference, it is cut back to its
    longest on-reference prefix and continued with that reference's next step (at most
    ``max_corrections`` times per try; None: never). Early stop: past ``abort_after`` steps of deviation
    the try is stopped and resampled (None: never), at most ``max_restarts`` times. The reward is
    ``verify(steps)`` (the rule tests), whatever the references say. Introduced in lesson 09."""
    generated = corrected = restarts = 0
    while True:
        steps: list[str] = []
        aborted, fixes = False, 0
        while len(steps) < max_steps:
            nxt = policy(steps, rng)
            if nxt is None:
                break
            steps.append(nxt)
            generated += 1
            dev = reference_deviation(steps, references)
            keep = len(steps) - dev
            ref = next((r for r in references if len(r) > keep and list(r[:keep]) == steps[:keep]), None)
            if correct_after is not None and dev >= correct_after and fixes < max_corrections and ref:
                steps = steps[:keep] + [ref[keep]]
                corrected += 1
                fixes += 1
            elif abort_after is not None and dev >= abort_after and restarts < max_restarts:
                aborted = True
                break
        if not aborted:
            return GuidedRollout(steps, generated, corrected, restarts, float(bool(verify(steps))))
        restarts += 1


# --- lesson 09's toy for reference-guided RFT ------------------------------------------------------
TOY_REFERENCES = (("locate", "read", "edit", "test"), ("locate", "grep", "edit", "test"))
"""Two correct reference trajectories of lesson 09's toy task."""
TOY_OFF_PATH = ("ls", "cat", "bisect", "delete", "retry", "edit", "test")
"""Steps the toy policy takes when it leaves the references."""
GUIDANCE_MODES = {"plain sampling": dict(correct_after=None, abort_after=None),
                  "stop + resample": dict(correct_after=None, abort_after=3),
                  "correct, then stop": dict(correct_after=2, abort_after=3)}
"""The three ways lesson 09 samples: no guidance; stop after 3 off-reference steps and resample; correct
once after 2, then stop."""


def toy_step_policy(steps: list[str], rng: np.random.Generator) -> str | None:
    """Lesson 09's toy policy: stop after ``edit, test`` or 8 steps; otherwise follow a reference's next step
    with probability 0.7 while on a reference prefix, else pick an off-path step. Introduced in lesson 09."""
    if len(steps) >= 8 or steps[-2:] == ["edit", "test"]:
        return None
    on_ref = [r[len(steps)] for r in TOY_REFERENCES if len(r) > len(steps) and list(r[:len(steps)]) == steps]
    return str(rng.choice(on_ref)) if on_ref and rng.random() < 0.7 else str(rng.choice(TOY_OFF_PATH))


def toy_rule_test(steps: Sequence[str]) -> bool:
    """The toy's rule test: the last two steps are ``edit``, ``test`` and nothing was deleted."""
    return list(steps[-2:]) == ["edit", "test"] and "delete" not in steps


def guidance_experiment(seed: int = 0, n: int = 400) -> dict[str, dict[str, float]]:
    """``n`` rollouts of :func:`toy_step_policy` in each of :data:`GUIDANCE_MODES` (each mode from the same
    seed): the success rate, the steps generated per success and the successes unlike both references.
    Introduced in lesson 09."""
    out = {}
    for name, kw in GUIDANCE_MODES.items():
        rng = np.random.default_rng(seed)
        rolls = [guided_rollout(toy_step_policy, TOY_REFERENCES, toy_rule_test, rng=rng, max_steps=8, **kw)
                 for _ in range(n)]
        solved = sum(r.reward for r in rolls)
        out[name] = {"success": solved / n, "steps_per_success": sum(r.generated for r in rolls) / max(solved, 1),
                     "novel_successes": int(sum(r.reward > 0 and all(r.steps != list(ref) for ref in TOY_REFERENCES)
                                                for r in rolls))}
    return out
