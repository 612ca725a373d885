"""An audit that can disagree with the judge: passing programs re-judged on **fresh inputs** drawn from
each task's specification, on the **other** sandbox backend.

Re-running the same judge on the same hidden tests proves nothing: a forgery that fooled it once fools
it again, and a program that memorised the hidden tests' answers passes again. The course's tasks are
generated (:mod:`course_lib.drill.taskgen`): every row knows its family, operation and filter, so the
audit draws new random inputs of the family's type, computes the reference answer without running any
code (:func:`~course_lib.drill.taskgen.expected_value`) and asks the program for each. An answer agrees
when the program passes every fresh test on the other backend (bwrap ↔ docker).

* :func:`save_rollouts` / :func:`load_rollouts` — the rewarded training rollouts (``rollouts.jsonl`` in
  the RL output folder: step, prompt key, program, reward, status), written by the trainer;
* :func:`fresh_tests` — assert lines on new inputs for one task;
* :func:`audit_programs` — the audit of many (key, program, task) items; :func:`passing_rollouts` picks
  the rollouts to audit.

Introduced in lesson 10.
"""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from course_lib.drill.taskgen import FAMILIES, expected_value

ROLLOUTS_FILE = "rollouts.jsonl"
_TEXT_CHARS = "abcdefghijklmnopqrstuvwxyzAEIOUXYZ0123456789  _-!"


def task_spec(record: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(family, operation, filter) of a hidden-test record (``family``/``operation``/``filter`` keys) or
    an evaluation record (``task`` = ``"family/operation/filter"``); None when it has none (a hub row).
    Introduced in lesson 10."""
    if all(record.get(k) for k in ("family", "operation", "filter")):
        spec = (str(record["family"]), str(record["operation"]), str(record["filter"]))
    else:
        parts = str(record.get("task") or "").split("/")
        spec = tuple(parts) if len(parts) == 3 else None   # type: ignore[assignment]
    if spec is None or spec[0] not in FAMILIES:
        return None
    try:
        expected_value(*spec, [] if spec[0] == "list" else (0 if spec[0] == "range" else ""))
    except (KeyError, StopIteration, ValueError, TypeError):
        return None
    return spec


def fresh_inputs(family: str, rng: random.Random, n: int = 8) -> list[Any]:
    """``n`` new random inputs of a family's type (lists of ints, a bound, a text), wider than the
    hidden tests' values. Introduced in lesson 10."""
    if family not in FAMILIES:
        raise ValueError(f"unknown task family {family!r}; the task generator has {sorted(FAMILIES)}")
    out: list[Any] = []
    for _ in range(n):
        if family == "list":
            out.append([rng.randint(-60, 60) for _ in range(rng.randint(0, 12))])
        elif family == "range":
            out.append(rng.randint(0, 40))
        else:
            out.append("".join(rng.choice(_TEXT_CHARS) for _ in range(rng.randint(0, 16))))
    return out


def fresh_tests(spec: Sequence[str], entry_point: str, seed: int, n: int = 8) -> list[str]:
    """Assert lines ``entry_point(input) == reference`` on ``n`` fresh inputs for the task ``spec``
    (family, operation, filter); the reference is computed here, never by running code. Introduced in
    lesson 10."""
    if not str(entry_point).isidentifier():
        raise ValueError(f"entry point {entry_point!r} is not a function name")
    family, op, flt = spec
    rng = random.Random(f"{seed}:{family}/{op}/{flt}:{entry_point}")
    return [f"assert {entry_point}({v!r}) == {expected_value(family, op, flt, v)!r}" for v in fresh_inputs(family, rng, n)]


def other_backend(backend: str) -> str:
    """The real sandbox backend that is not ``backend`` (bwrap ↔ docker). Introduced in lesson 10."""
    pair = {"bwrap": "docker", "docker": "bwrap"}
    if backend not in pair:
        raise ValueError(f"the audit runs on the other real backend; {backend!r} is not bwrap or docker")
    return pair[backend]


def audit_programs(items: Iterable[Mapping[str, Any]], *, backend: str, seed: int = 0, n_inputs: int = 8,
                   workers: int = 4, timeout_s: float | None = None, memory_mb: int | None = None) -> dict[str, Any]:
    """Re-judge passing programs on fresh inputs. ``items``: mappings with ``key``, ``program``,
    ``entry_point`` and the task (``family``/``operation``/``filter`` or ``task``); ``backend``: where to
    run them (the judge's other backend: :func:`other_backend`).

    Returns ``{"audited", "agree", "disagree" (keys), "no_spec", "unscored", "backend", "why", "rows"}``: an
    item without a task specification is counted in ``no_spec`` and not audited; a sandbox failure is
    ``unscored``; when ``backend`` does not work here (no Docker daemon answers, say) nothing runs, every
    item is ``unscored`` and ``why`` says what is missing and how to start it ("" otherwise). Introduced in
    lesson 10."""
    from course_lib.evaluation.sandbox import available_backends, run_many

    jobs, rows, no_spec = [], [], 0
    for item in items:
        spec = task_spec(item)
        if spec is None or not item.get("program") or not item.get("entry_point"):
            no_spec += 1
            continue
        jobs.append({"code": item["program"], "tests": fresh_tests(spec, item["entry_point"], seed, n_inputs)})
        rows.append({"key": str(item.get("key", "")), "task": "/".join(spec)})
    state = available_backends().get(backend, "ok") if jobs else "ok"    # "ok" or what is missing ("unsafe": no probe)
    works, why = state == "ok", state
    results = run_many(jobs, workers=workers, progress=False, timeout_s=timeout_s, memory_mb=memory_mb,
                       backend=backend) if jobs and works else []
    if not works:
        for row in rows:
            row.update(status="sandbox_error", passed=0, total=0, agrees=None)
    for row, res in zip(rows, results):
        row.update(status=res.status, passed=res.tests_passed, total=res.tests_total,
                   agrees=None if res.status == "sandbox_error" else res.status == "passed")
    scored = [r for r in rows if r["agrees"] is not None]
    return {"audited": len(scored), "agree": sum(r["agrees"] for r in scored),
            "disagree": [r["key"] for r in scored if not r["agrees"]], "no_spec": no_spec,
            "unscored": len(rows) - len(scored), "backend": backend, "why": "" if works else why, "rows": rows}


# --- the rewarded training rollouts ----------------------------------------------------------------------

def save_rollouts(path: str | Path, step: int, keys: Sequence[str], programs: Sequence[str | None],
                  rewards: Sequence[float | None], statuses: Sequence[str]) -> None:
    """Append one generation round's rollouts (one JSON line each: ``step``, ``key``, ``program``,
    ``reward``, ``status``) to ``path``. Introduced in lesson 10."""
    if not (len(keys) == len(programs) == len(rewards) == len(statuses)):
        raise ValueError("save_rollouts needs one key, program, reward and status per rollout")
    with open(path, "a", encoding="utf-8") as f:
        for k, prog, r, st in zip(keys, programs, rewards, statuses):
            f.write(json.dumps({"step": int(step), "key": str(k), "program": prog, "reward": r, "status": st}) + "\n")


def load_rollouts(path: str | Path) -> list[dict[str, Any]]:
    """The rollouts :func:`save_rollouts` wrote (``[]`` when the file does not exist). Introduced in lesson 10."""
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]


def passing_rollouts(rollouts: Iterable[Mapping[str, Any]], hidden_tests: Mapping[int, Mapping[str, Any]]) -> list[dict]:
    """The rollouts the judge passed (status ``passed``), one per (key, program), joined with their
    task's record from ``hidden_tests`` (``idx`` → record): the items :func:`audit_programs` takes.
    Introduced in lesson 10."""
    seen, out = set(), []
    for r in rollouts:
        if r.get("status") != "passed" or not r.get("program") or (r["key"], r["program"]) in seen:
            continue
        seen.add((r["key"], r["program"]))
        rec = hidden_tests.get(int(r["key"])) if str(r["key"]).lstrip("-").isdigit() else None
        out.append({**(dict(rec) if rec else {}), "key": r["key"], "program": r["program"], "step": r.get("step"),
                    "reward": r.get("reward")})
    return out
