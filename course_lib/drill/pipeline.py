"""Step 2 of the drill — pipeline: lesson 05's LazyLLM codegen pipeline over the training rows.

:func:`step_pipeline` writes ``<data-dir>/codegen.json`` (the kept rows) and ``codegen_funnel.json`` (what
each stage kept and why it dropped the rest). Its teacher: in ci the course's rule teacher
(:class:`~course_lib.training.rule_teacher.RuleTeacher`, NOT an LLM), which the pipeline starts itself and
which writes each row's code and its own tests from the instruction alone (the rows reach it without their
hidden tests); in the full profile a vLLM server serving the lecture's Qwen3-30B-A3B, found by
:func:`teacher_endpoint` and checked by :func:`teacher_problem` before the step starts. ``--teacher smollm2``
(:data:`~course_lib.drill.config.TEACHERS`) serves SmolLM2-135M-Instruct with the course's vLLM for the step
instead (:mod:`course_lib.training.llm_teacher`, cached), in its own drill folder, and measures what it kept
against the training rows' hidden tests afterwards (``codegen_teacher_report.json``); so does ``--teacher
noisy-rules``, the rule teacher misreading at the rate ``drill.teacher_noise`` (a teacher that can fail).
With ``--ablations`` step 2 also writes the ablations' training sets (:mod:`course_lib.drill.ablations`). The pipeline's
answer format (code in one python fence, :func:`fence_if_bare`) is also what step 3 trains on and what
step 4 scores PPL on.

Introduced in lesson 07.
"""
from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from functools import partial
from typing import Sequence

from course_lib.drill.config import (
    TEACHER_MODELS,
    TEACHERS,
    DrillConfig,
    Need,
    PrerequisiteError,
    RunState,
    Step,
    use_lazyllm_path,
)
from course_lib.drill.outputs import (
    StepOutputError,
    atomic_write_text,
    clear_done,
    log,
    output_state,
    read_json_output,
    sha_or_none,
    up_to_date,
    write_json_output,
)
from course_lib.evaluation import sandbox

# --- the pipeline's answer format ---------------------------------------------------------------


def fence_if_bare(answer: str, language: str = "python") -> str:
    """``answer`` as is when it has a fenced block, else the bare code wrapped in a python fence (a
    ```` ```cpp ```` fence with ``language="cpp"``).

    LazyLLM's ``CodeFeedbackFormatter`` outputs bare code; the drill's answer format (and FCR) is code
    in a fence, so both SFT variants learn the same format. Introduced in lesson 07; ``language`` for issue 38.
    """
    from course_lib.drill.taskgen import FENCE_TAGS
    from course_lib.evaluation.extract import find_code_blocks

    if find_code_blocks(answer):
        return answer
    return f"```{FENCE_TAGS[language]}\n" + answer.strip("\n") + "\n```"


def reference_in_pipeline_format(response: str, prompt: str | None = None, language: str = "python") -> str:
    """The reference answer as the pipeline's SFT rows hold it, for PPL on the pipeline's format: when
    ``prompt`` is given and the ci rule teacher reads it, exactly what the pipeline writes for it (the
    teacher's code in one python fence, :mod:`course_lib.training.rule_teacher`); else the reference's
    Python code in one python fence (a reference without Python code as it is). ``language="cpp"``: the
    same with the C++ rule teacher (:mod:`course_lib.training.rule_teacher_cpp`) and a ```` ```cpp ```` fence.
    Introduced in lesson 07; ``language`` for issue 38.
    """
    from course_lib.evaluation.extract import extract_code

    if language != "python":
        if prompt is not None:
            from course_lib.training.rule_teacher_cpp import read_cpp_instruction, write_cpp_code

            found = read_cpp_instruction(prompt)
            code = write_cpp_code(found[0]) if found else None
            if code is not None:
                return fence_if_bare(code.strip(), language)
        code = extract_code(response, language)
        return response if code is None else fence_if_bare(code, language)
    if prompt is not None:
        from course_lib.training.rule_teacher import read_instruction, write_code

        spec = read_instruction(prompt)
        if spec is not None:
            return fence_if_bare(write_code(spec).strip())
    code = extract_code(response)
    return response if code is None else fence_if_bare(code)


# --- the full profile's teacher ------------------------------------------------------------------

@dataclass(frozen=True)
class TeacherEndpoint:
    """Where step 2's pipeline finds its teacher in the full profile, and how to start it."""

    url: str
    model: str
    command: str          # the vLLM server command line (shell-quoted)

    @property
    def local(self) -> bool:
        """True when the teacher is served on this machine (so it shares this machine's GPU)."""
        return any(h in self.url for h in ("127.0.0.1", "localhost", "0.0.0.0", "[::1]"))


def teacher_endpoint(cfg: DrillConfig) -> TeacherEndpoint:
    """The full profile's teacher: ``$COURSE_TEACHER_URL`` (default vLLM on 127.0.0.1:8000) serving
    ``--pipeline-model`` (default ``$COURSE_TEACHER_MODEL`` or the lesson's Qwen3-30B-A3B-Instruct), the
    same choice ``course_lib.training.codegen.run_codegen_pipeline`` makes. Introduced in lesson 07."""
    from course_lib.training.teacher import VLLMTeacher

    vt = VLLMTeacher()
    model = cfg.pipeline_model or os.environ.get("COURSE_TEACHER_MODEL") or vt.model
    vt = VLLMTeacher(model=model)
    return TeacherEndpoint(url=os.environ.get("COURSE_TEACHER_URL", vt.base_url), model=model,
                           command=shlex.join(["python"] + vt.command()[1:]))


def teacher_answers(url: str) -> tuple[bool, str]:
    """(reachable, served model ids or the error) of an OpenAI-compatible server (a probe that tests
    replace). Introduced in lesson 07."""
    from course_lib.training.teacher import teacher_is_up

    return teacher_is_up(url)


def teacher_problem(cfg: DrillConfig) -> str | None:
    """None when the full profile's teacher answers and serves the model step 2 asks for; else what to do
    (the command that starts it). Introduced in lesson 07."""
    t = teacher_endpoint(cfg)
    up, detail = teacher_answers(t.url)
    if not up:
        return (f"step 2's teacher does not answer at {t.url} ({detail}). Start it (on a GPU machine) with\n"
                f"      {t.command}\n    or point COURSE_TEACHER_URL at a running OpenAI-compatible server")
    served = [s.strip() for s in detail.split(",") if s.strip()]
    if served and t.model not in served:
        return (f"the teacher at {t.url} serves {served}, not {t.model!r}: pass --pipeline-model "
                f"{served[0]} (or serve {t.model})")
    return None


def teacher_needed(cfg: DrillConfig, steps: Sequence[str]) -> bool:
    """Step 2 will really call the server teacher (it is planned, its teacher is a server it does not start
    itself, and its output is not already up to date)."""
    if "pipeline" not in steps or cfg.pipeline_teacher() != "server":
        return False
    if cfg.force:
        return True
    return not (cfg.paths.train_json.exists() and output_state(cfg.paths.codegen_json, _pipeline_config(cfg))[0])


# --- the step -------------------------------------------------------------------------------------

def _pipeline_timeout(cfg: DrillConfig) -> float:
    return float(cfg.profile.pipeline.timeout_s)


def teacher_config(cfg: DrillConfig, teacher: str) -> dict:
    """The completion-marker settings of ``teacher``'s pipeline run over the training set (:data:`TEACHERS`):
    a change of any of them reruns it. Introduced in lesson 07."""
    conf = {"train": sha_or_none(cfg.paths.train_json), "teacher": cfg.pipeline_model,
            "profile": cfg.profile.name, "timeout_s": _pipeline_timeout(cfg),
            "ci_teacher": "rules: new code and own tests from the instruction, no hidden tests"}
    if cfg.language != "python":   # the C++ rule teacher (the Python key is unchanged)
        conf.update(language=cfg.language, ci_teacher="rules (C++): new code and own cases from the instruction, "
                                                      "audited through the C++ judge, no hidden tests")
    if teacher in TEACHER_MODELS:   # an LLM teacher served here: its own key (the others' is unchanged)
        conf.pop("ci_teacher")
        conf.update(llm_teacher=_llm_teacher_key(cfg, teacher), timeout_s=float(cfg.profile.models.teacher_timeout_s))
    elif teacher == "noisy-rules":
        conf.update(ci_teacher="noisy rules: the rule teacher misreading at a set rate, loop variables varied",
                    teacher_noise=cfg.teacher_noise, noise_seed=cfg.seed)
    return conf


def _pipeline_config(cfg: DrillConfig) -> dict:
    return teacher_config(cfg, cfg.pipeline_teacher())


def _llm_teacher_key(cfg: DrillConfig, teacher: str) -> dict:
    from course_lib.training import llm_teacher

    srv = llm_teacher.teacher_server(cfg.profile, TEACHER_MODELS[teacher], log=None)
    return {"model": srv.model_name, "fingerprint": srv.fingerprint, "server": srv.settings()}


def _run_llm_teacher(cfg: DrillConfig, teacher: str, rows: list[dict], timeout_s: float):
    """Step 2 with an LLM teacher served here (``--teacher smollm2``): the cached LLM pipeline run."""
    from course_lib.training import llm_teacher

    model = TEACHER_MODELS[teacher]
    why = llm_teacher.teacher_unavailable(cfg.profile, model)
    if why:
        raise PrerequisiteError(f"pipeline: --teacher {teacher}: {why}")
    log().info("pipeline: teacher %s", TEACHERS[teacher])
    run = llm_teacher.run_teacher_pipeline(rows, profile=cfg.profile, model=model, timeout_s=timeout_s,
                                           name=f"drill-{cfg.profile.name}", log=log().info)
    if run.extra.get("not_cached_because"):
        raise StepOutputError(f"pipeline: the LLM teacher did not answer every request "
                              f"({run.extra['not_cached_because'][:300]}); nothing was cached. Rerun step 2 on a "
                              "quieter machine or raise models.teacher_timeout_s")
    return run.kept, run.report


def run_teacher(cfg: DrillConfig, teacher: str, with_tests: list[dict], *, measure: bool):
    """``teacher``'s pipeline run (:data:`TEACHERS`: ``rules``, ``noisy-rules``, an LLM teacher served here, or the
    full profile's server) over the training rows ``with_tests`` — given to the pipeline WITHOUT their hidden tests
    (:func:`course_lib.drill.download.without_hidden_tests`). Returns (kept rows, the pipeline's report, and with
    ``measure`` the :class:`~course_lib.training.codegen.TeacherReport` measured afterwards with the hidden tests —
    keep rate, kept rows that pass, the auditor's AUC — or None). Step 2 and the ablations' pipeline variants
    (:mod:`course_lib.drill.ablations`) both run their teacher here. Introduced in lesson 07."""
    from course_lib.drill.download import without_hidden_tests
    from course_lib.training import codegen
    from course_lib.training.rule_teacher import RuleTeacher, noisy_rule_teacher

    # hidden tests are for evaluation and RL rewards only: the pipeline (its teacher) never sees them
    rows = [without_hidden_tests(r) for r in with_tests]
    run_code = partial(sandbox.run_code, backend=cfg.sandbox_backend or sandbox.preferred_backend(cfg.profile.sandbox.backend))
    timeout_s = teacher_config(cfg, teacher)["timeout_s"]
    if teacher in TEACHER_MODELS:
        kept, report = _run_llm_teacher(cfg, teacher, rows, timeout_s)
    else:
        offline = noisy_rule_teacher(cfg.teacher_noise, cfg.seed) if teacher == "noisy-rules" else RuleTeacher
        if cfg.language != "python":   # issue 38: the C++ rule teacher (the only teacher of the C++ drill)
            from course_lib.training.rule_teacher_cpp import CppRuleTeacher

            offline = CppRuleTeacher
        kept, report = codegen.run_codegen_pipeline(rows, profile=cfg.profile, model_name=cfg.pipeline_model,
                                                    run_code=run_code, timeout_s=timeout_s, offline_teacher=offline)
    measured = None
    if measure and any(r.get("tests") for r in with_tests):
        # what the teacher's data is worth: the kept rows and the auditor's score against the hidden tests
        # (measured after the pipeline ran, never shown to the teacher); measured even when nothing was kept
        measured = codegen.teacher_report(with_tests, kept, report, run_many=partial(
            sandbox.run_many, backend=run_code.keywords["backend"], workers=cfg.eval_workers), run_code=run_code,
            profile=cfg.profile)
    return list(kept), report, measured


def step_pipeline(cfg: DrillConfig, state: RunState | None = None) -> dict:
    """Step 2: lesson 05's LazyLLM codegen pipeline over the training rows → ``codegen.json`` + funnel
    (``state``: the run's :class:`~course_lib.drill.config.RunState`; the ablations' note which of them have
    no row to train on). With ``cfg.ablations`` it then writes each ablation's training set
    (:func:`course_lib.drill.ablations.build_ablation_data`).

    Introduced in lesson 07.
    """
    info = _main_pipeline(cfg)
    if cfg.ablations:
        from course_lib.drill.ablations import build_ablation_data

        info["ablations"] = build_ablation_data(cfg, run_teacher=run_teacher, teacher_config=teacher_config,
                                                state=state)
    return info


def _main_pipeline(cfg: DrillConfig) -> dict:
    p, conf = cfg.paths, _pipeline_config(cfg)
    funnel_path = p.data_dir / "codegen_funnel.json"
    if up_to_date([p.codegen_json], conf, cfg.force, "pipeline"):
        return {"skipped": True}
    use_lazyllm_path(cfg)
    teacher = cfg.pipeline_teacher()
    llm_served_here = teacher in TEACHER_MODELS
    if cfg.language != "python" and teacher != "rules":
        raise PrerequisiteError(f"pipeline: the {cfg.language} drill's step 2 has the rule teacher only (--teacher "
                                f"rules, ci); lesson 05's LazyLLM prompts ask {teacher!r} for Python. "
                                "Train on the raw rows instead: --no-pipeline")
    if cfg.profile.pipeline.teacher != "offline" and not llm_served_here:   # the others are started by step 2 itself
        why = teacher_problem(cfg)
        if why:
            raise PrerequisiteError(f"pipeline: {why}")
    with_tests = read_json_output(p.train_json, "download")
    measure = teacher in TEACHER_MODELS or teacher == "noisy-rules"    # the gold rule teacher is not measured here
    kept, report, measured = run_teacher(cfg, teacher, with_tests, measure=measure)
    log().info("pipeline funnel:\n%s", report.summary())
    report_dict = report.to_dict()
    atomic_write_text(funnel_path, json.dumps({"input": len(with_tests), "kept": len(kept), "report": report_dict},
                                              indent=1, default=str, ensure_ascii=False))
    if measured is not None:
        atomic_write_text(p.data_dir / "codegen_teacher_report.json",
                          json.dumps(measured.to_dict(), indent=1, ensure_ascii=False))
        log().info("pipeline: the teacher measured with the hidden tests:\n%s", measured.summary())
    failed = [d for d in report_dict.get("dropped", []) if d.get("stage") in ("teacher", "pipeline")]
    if failed or not kept:
        clear_done(p.codegen_json)   # an earlier codegen.json must not be taken for this run's output
        why = failed[0]["reason"] if failed else "every row was dropped (see the funnel's drop reasons)"
        if llm_served_here and not failed:
            raise StepOutputError(f"pipeline: kept {len(kept)} of {len(with_tests)} training rows — {why}: the LLM "
                                  f"teacher ({teacher}) gave no row a score in [{cfg.profile.pipeline.min_score}, "
                                  f"{cfg.profile.pipeline.max_score}]. Its answers are cached (a rerun gives the same); "
                                  f"the funnel is in {funnel_path}"
                                  + (f", the hidden-test report in {p.data_dir / 'codegen_teacher_report.json'}"
                                     if measured is not None else "")
                                  + ". Train on the raw rows instead (`--no-pipeline`) or use another teacher")
        raise StepOutputError(f"pipeline: kept {len(kept)} of {len(with_tests)} training rows — {why}. Nothing was "
                              f"cached; the funnel is in {funnel_path}. Fix the teacher and rerun step 2 "
                              "(`--only-step pipeline`)")
    write_json_output(p.codegen_json, kept, conf)
    log().info("pipeline: kept %d of %d training rows → %s", len(kept), len(with_tests), p.codegen_json)
    return {"input": len(with_tests), "kept": len(kept)}


def _needs(cfg: DrillConfig) -> list[Need]:
    return [Need(cfg.paths.train_json, "download", "the training set")]


def _check(cfg: DrillConfig, steps: Sequence[str]) -> list[str]:
    use_lazyllm_path(cfg)
    return []


def _engine(cfg: DrillConfig) -> dict:
    S = cfg.profile.pipeline
    out = {"name": "LazyLLM codegen pipeline (lesson 05)", "timeout_s": _pipeline_timeout(cfg),
           "min_score": S.min_score, "max_score": S.max_score}
    if cfg.pipeline_teacher() in TEACHER_MODELS:
        out["teacher"] = TEACHERS[cfg.pipeline_teacher()]
        out["timeout_s"] = float(cfg.profile.models.teacher_timeout_s)
    elif S.teacher == "offline" and cfg.language != "python":
        out["teacher"] = ("course rule teacher for C++ on 127.0.0.1 (course_lib.training.rule_teacher_cpp: C++ code and "
                          "own cases from the instruction, audited through the C++ judge; rules, not an LLM)")
    elif cfg.pipeline_teacher() == "noisy-rules":
        out["teacher"] = TEACHERS["noisy-rules"]
        out["teacher_noise"] = cfg.teacher_noise
    elif S.teacher == "offline":
        out["teacher"] = ("course rule teacher on 127.0.0.1 (course_lib.training.rule_teacher: code and tests "
                          "from the instruction alone; rules, not an LLM)")
    else:
        t = teacher_endpoint(cfg)
        out.update(teacher=t.model, teacher_url=t.url)
    return out


STEP = Step("pipeline", run=step_pipeline, needs=_needs, check=_check, engine=_engine)
