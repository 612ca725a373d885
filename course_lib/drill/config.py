"""What one drill run is made of: its settings (:class:`DrillConfig`), what the run records as it goes
(:class:`RunState`), its models (:data:`VARIANTS`) and the shape every step has (:class:`Step`).

Read this module first: every step module (``download``, ``pipeline``, ``finetune``, ``inference``,
``evaluate``) takes a :class:`DrillConfig` (set once, then only read) and the run's :class:`RunState`, and
ends with its ``STEP = Step(...)``; ``orchestrate`` lists the steps in order and runs them.

Introduced in lesson 07.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from course_lib.drill.outputs import DrillPaths
from course_lib.evaluation.vllm_engine import VLLMKnobs, knobs_from_profile
from course_lib.profiles import Profile, ProfileLike, resolve_profile


class PrerequisiteError(RuntimeError):
    """Something a selected step needs is missing; the message names the step to run."""


# --- the models a run trains and evaluates ------------------------------------------------------

@dataclass(frozen=True)
class Variant:
    """One model of the drill's tables: ``name`` is its folder under ``models/`` and ``output/`` and its
    key in ``drill_metrics.json``; ``label`` its column in the lesson's tables; ``trained_by`` the step
    that makes it (None: the base model, used as it is); ``wanted`` whether a run has it;
    ``own_evaluation``: its step comes after step 5 and runs steps 4-5 on it itself (the ``rl`` step
    starts from ``pipeline_sft``), so steps 4-5 of the run leave it out."""

    name: str
    label: str
    trained_by: str | None
    wanted: Callable[["DrillConfig"], bool]
    own_evaluation: bool = False


# The ablations of raw vs pipeline SFT (issue 35; ``--ablations``, off by default): each one more SFT variant,
# trained on the same training rows with the same SFT steps, whose training set step 2 writes
# (course_lib.drill.ablations). name -> (label, what it trains on)
ABLATIONS: dict[str, tuple[str, str]] = {
    "raw_clean": ("raw SFT, no defects", "the raw rows without their simulated defects (the generator's clean answers "
                                         "to the same prompts)"),
    "raw_code": ("raw SFT, code only", "the raw answers reduced to their Python code in one python fence (extract + "
                                       "fence: the lecture's formatting without the teacher); rows with no Python code "
                                       "left out, counted"),
    "raw_filter": ("raw SFT, cheap filter", "the raw rows whose answer has a closed Python fence that compiles and "
                                            "defines the function the prompt names (removed rows counted by reason)"),
    "pipeline_noisy": ("pipeline SFT, noisy teacher", "the pipeline with the noisy rule teacher "
                                                      "(rule_teacher.NoisyRuleTeacher, drill.teacher_noise)"),
    "pipeline_llm": ("pipeline SFT, LLM teacher", "the pipeline with the LLM teacher (SmolLM2-135M-Instruct, "
                                                  "--teacher smollm2's; hours on 2 cores the first time, then cached); "
                                                  "left out, with the count, when it keeps no row"),
}


def ablation_left_out(cfg: "DrillConfig", name: str) -> str | None:
    """Why the ablation ``name`` has no model in this run (its training set, written whole by step 2, holds no
    row; the reason is its report's), else None."""
    import json

    from course_lib.drill.outputs import output_state

    data = cfg.paths.ablation_json(name)
    if not data.exists() or not output_state(data)[0]:
        return None
    try:
        if json.loads(data.read_text(encoding="utf-8")):
            return None
        report = json.loads(cfg.paths.ablation_report(name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"its training set {data.name} holds no row"
    return report.get("left_out") or f"its training set {data.name} holds no row"


def _ablation(name: str) -> Variant:
    return Variant(name, ABLATIONS[name][0], "sft",
                   lambda cfg: name in cfg.ablations and ablation_left_out(cfg, name) is None)


VARIANTS: tuple[Variant, ...] = (
    Variant("base", "base model", None, lambda cfg: cfg.evaluate_base),
    Variant("raw_sft", "raw SFT", "sft", lambda cfg: cfg.compare_raw or not cfg.use_pipeline),
    Variant("pipeline_sft", "pipeline SFT", "sft", lambda cfg: cfg.use_pipeline),
    *(_ablation(name) for name in ABLATIONS),
    Variant("rl", "RL (GRPO)", "rl", lambda cfg: cfg.use_rl and cfg.use_pipeline, own_evaluation=True),
)
"""Every model variant, in table order. A step that trains a new model adds one entry here."""

VARIANT_LABELS: dict[str, str] = {v.name: v.label for v in VARIANTS}


def trained_by(variant: str) -> str | None:
    """The step that trains ``variant`` (None for the base model)."""
    for v in VARIANTS:
        if v.name == variant:
            return v.trained_by
    raise ValueError(f"unknown model variant {variant!r}; variants are {', '.join(VARIANT_LABELS)}")


# --- the settings of one run ---------------------------------------------------------------------

@dataclass
class DrillConfig:
    """Everything one drill run needs; :func:`config_from_profile` fills it from a profile.

    Introduced in lesson 07.
    """

    # the profile, resolved once (config_from_profile), and settings of its ``drill`` and ``sandbox``
    # sections (no defaults here: the profile is the one source of their values; the sandbox backend is
    # read from profile.sandbox.backend where it is chosen, see sandbox_backend below)
    profile: Profile
    train_size: int
    eval_size: int
    humaneval_subset: int
    seed: int
    source: str                                 # "assets" (ci sample) | "hub" | "local"
    dataset: str
    compare_raw: bool
    vllm: VLLMKnobs
    inference_backend: str                      # "vllm" (both profiles) | "transformers"
    inference_fallback: str | None              # "transformers" (ci) | None (full: vLLM or an error)
    inference_timeout_s: float
    batch_size: int
    inference_workers: int
    eval_workers: int
    timeout_s: float
    memory_mb: int
    ppl_samples: int | None
    sft_overrides: dict[str, Any]
    sft_parallel: bool                          # step 3 trains the SFT variants side by side
    # while the longest SFT run still trains, step 3 answers (step 4's work) with the models already there
    # on the core the finished runs left free (ci: drill.answer_while_training; see finetune.step_sft)
    answer_while_training: bool = False
    # settings of one run (command-line options)
    # --sandbox-backend: a backend named for this run, used as named (None: none named; steps 2, 5 and 6 then
    # follow the sandbox's rule: $SANDBOX_BACKEND, else profile.sandbox.backend when it works, else bwrap,
    # else docker — course_lib.evaluation.sandbox.policy)
    sandbox_backend: str | None = None
    paths: DrillPaths | None = None
    data_files: list[str] | None = None         # local files for source="local"/"assets"
    hidden_tests: str | None = None             # hidden_tests.jsonl (ci sample): evaluation (and RL) only
    eval_split: str | None = None               # eval_split.json (ci sample): which rows are eval rows
    lazyllm_path: str | None = None
    pipeline_model: str | None = None           # the teacher of the lesson 05 pipeline
    teacher: str | None = None                  # step 2's teacher (--teacher, TEACHERS); None: drill.teacher
    # the noisy rule teacher's misreading rate (--teacher noisy-rules, the pipeline_noisy ablation): the profile's
    # drill.teacher_noise unless set (--teacher-noise)
    teacher_noise: float | None = None
    # the ablations of raw vs pipeline SFT this run trains (--ablations, ABLATIONS; off by default)
    ablations: tuple[str, ...] = ()
    sft_model: str | None = None                # the base model that SFT starts from
    use_pipeline: bool = True
    max_new_tokens: int | None = None           # answer budget (--max-new-tokens); None: vllm.response_max_tokens
    evaluate_base: bool = True
    use_rl: bool = False                        # step 6 (lesson 10): the CLI turns it on (profile rl.in_drill)
    rl_overrides: dict[str, Any] = field(default_factory=dict)   # RLSettings over the profile's rl section
    force: bool = False
    # the language the drill trains and judges (issue 38; --language, profile drill.language): "python" or "cpp"
    # (the C++ rendering of the same tasks, the C++ judge; steps 1-5, no HumanEval, no step 6)
    language: str = "python"

    def pipeline_teacher(self) -> str:
        """Step 2's teacher: ``--teacher`` when given, else the profile's ``drill.teacher`` (a key of
        :data:`TEACHERS`)."""
        return self.teacher or str(self.profile.drill.teacher)

    def variants(self) -> list[str]:
        """The models this run trains and evaluates, in table order (:data:`VARIANTS`)."""
        return [v.name for v in VARIANTS if v.wanted(self)]

    def trained_variants(self, step: str | None = None) -> list[str]:
        """The variants a step trains (``step`` None: every trained variant), in table order."""
        return [n for n in self.variants() if trained_by(n) is not None and (step is None or trained_by(n) == step)]

    def core_variants(self) -> list[str]:
        """The variants steps 4-5 answer and evaluate: all of :meth:`variants` but those whose own step
        evaluates them (:attr:`Variant.own_evaluation`)."""
        own = {v.name for v in VARIANTS if v.own_evaluation}
        return [n for n in self.variants() if n not in own]


@dataclass
class RunState:
    """What one run of the drill's steps records as it goes (never a setting: :class:`DrillConfig` stays as
    the run's entry point made it). :func:`~course_lib.drill.orchestrate.run_drill` makes one per run, or
    fills the caller's; a notebook that calls the steps one by one makes one and passes it to each step
    (``state=``), then reads :attr:`notes`. A step called without one records into a state of its own.

    Introduced in lesson 07.
    """

    # step -> variant -> what it did ("ran" / "cached", the SFT settings used, the engine that answered ...):
    # filled by the steps, read by course_lib.drill.manifest and the lesson
    notes: dict[str, dict] = field(default_factory=dict)
    # the steps run_drill is running (empty: the steps are called one by one, as lesson 07 does)
    planned_steps: tuple[str, ...] = ()
    # variant -> why this run has no row for it (step 6 skipped: no TRL environment, no hidden tests)
    left_out: dict[str, str] = field(default_factory=dict)

    def variants(self, cfg: DrillConfig) -> list[str]:
        """``cfg``'s variants (:meth:`DrillConfig.variants`) but those this run left out."""
        return [v for v in cfg.variants() if v not in self.left_out]


TEACHERS: dict[str, str] = {
    "rules": "the course's rule teacher (course_lib.training.rule_teacher: code and tests from the instruction "
             "alone; rules, NOT an LLM) — needs pipeline.teacher 'offline' (ci)",
    "noisy-rules": "the rule teacher misreading each instruction it reads at the rate drill.teacher_noise "
                   "(rule_teacher.NoisyRuleTeacher: a teacher that can fail, seeded by the run's seed; loop variables "
                   "varied; NOT an LLM) — needs pipeline.teacher 'offline' (ci)",
    "smollm2": "SmolLM2-135M-Instruct served by the course's vLLM on 127.0.0.1 for the step "
               "(course_lib.training.llm_teacher; its output cached by model fingerprint, rows and settings)",
    "server": "an OpenAI-compatible server at $COURSE_TEACHER_URL (the full profile's Qwen3-30B-A3B) — needs "
              "pipeline.teacher 'server' (full)",
}
"""Step 2's teachers (``--teacher``, the profile's ``drill.teacher``), with what each is."""

TEACHER_MODELS = {"smollm2": "smollm2-135m-instruct"}
"""The course model (:data:`course_lib.training.pretrained.COURSE_MODELS`) each LLM teacher serves."""


def default_root(profile: ProfileLike, teacher: str | None = None, language: str = "python", *,
                 seed: int | None = None, train_size: int | None = None, eval_size: int | None = None,
                 sft_steps: int | None = None) -> Path:
    """The drill's folder in the course cache (shared by the CLI, the notebook and the tests):
    ``<cache>/drill/<profile>`` for a run at the profile's own settings. A ``language`` other than Python adds
    ``-<language>`` after the profile (``<cache>/drill/ci-cpp``): the C++ drill's data, models and outputs never
    meet Python's. A ``seed`` or size that differs from the profile's adds it (``-seed1``, ``-train<N>``,
    ``-eval<N>``, ``-sft<N>``: ``<cache>/drill/ci-seed1``, ``ci-eval200-sft400``), and a teacher other than the
    profile's ``drill.teacher`` adds ``-teacher-<teacher>``: a run at other settings (the test suite's smaller
    drill, ``./course run --seed 1``, another teacher) never replaces the data and models of the profile's run.
    None: the profile's value."""
    from course_lib.paths import cache_dir

    P = resolve_profile(profile)
    d = P.drill
    name = P.name if language == "python" else f"{P.name}-{language}"
    for tag, value, own in (("seed", seed, P.seed), ("train", train_size, d.train_size),
                            ("eval", eval_size, d.eval_size),
                            ("sft", sft_steps, (d.sft_overrides or {}).get("max_steps"))):
        if value is not None and value != own:
            name += f"-{tag}{value}"
    if teacher is not None and teacher != d.teacher:
        name += f"-teacher-{teacher}"
    return cache_dir("drill", name)


CPP_LEAVES_OUT = ("step 6 (RL) is Python-only: the C++ drill (--language cpp) runs steps 1-5; its RL rewards "
                  "would need the C++ judge in lesson 10's reward path")
"""Why ``--language cpp`` has no step 6 (the CLI's message)."""


def check_teacher(profile: ProfileLike, teacher: str) -> None:
    """Raise ``ValueError`` saying why when ``teacher`` (:data:`TEACHERS`) cannot be step 2's teacher in
    ``profile``: the rule teacher needs ``pipeline.teacher`` "offline", a server "server"."""
    P = resolve_profile(profile)
    if teacher not in TEACHERS:
        raise ValueError(f"unknown teacher {teacher!r}; choose one of {', '.join(TEACHERS)}")
    need = {"rules": "offline", "noisy-rules": "offline", "server": "server"}.get(teacher)
    if need is not None and P.pipeline.teacher != need:
        raise ValueError(f"--teacher {teacher} needs a profile whose pipeline.teacher is {need!r}; profile "
                         f"{P.name!r} has {P.pipeline.teacher!r} (its own teacher is {P.drill.teacher!r})")


def config_from_profile(profile: ProfileLike = "ci", *, sft_steps: int | None = None,
                        **overrides: Any) -> DrillConfig:
    """A :class:`DrillConfig` from the profile's ``drill`` section plus ``overrides`` (settings of
    :class:`DrillConfig`; None values are ignored). ``sft_steps``: SFT optimizer steps per variant (the
    ``max_steps`` of the SFT settings; the CLI's ``--sft-steps``, the notebook's ``SFT_STEPS``).

    Introduced in lesson 07.
    """
    P = resolve_profile(profile)
    d = P.drill
    knobs = knobs_from_profile(P)
    cfg = DrillConfig(
        profile=P, train_size=d.train_size, eval_size=d.eval_size,
        humaneval_subset=d.humaneval_subset, seed=P.seed, source=d.source, dataset=d.dataset,
        compare_raw=d.compare_raw, vllm=knobs, inference_backend=d.inference_backend,
        inference_fallback=d.inference_fallback, inference_timeout_s=float(d.inference_timeout_s),
        batch_size=d.batch_size, inference_workers=d.inference_workers,
        eval_workers=d.eval_workers, timeout_s=P.sandbox.timeout_s,
        memory_mb=P.sandbox.memory_mb, ppl_samples=d.ppl_samples, sft_overrides=dict(d.sft_overrides),
        sft_parallel=bool(d.sft_parallel), answer_while_training=bool(d.get("answer_while_training", False)),
        language=str(d.get("language", "python")),
    )
    for k, v in overrides.items():
        if v is None:
            continue
        if not hasattr(cfg, k):
            raise TypeError(f"DrillConfig has no setting {k!r}")
        setattr(cfg, k, v)
    check_teacher(P, cfg.pipeline_teacher())
    if cfg.teacher_noise is None:
        cfg.teacher_noise = float(d.teacher_noise)
    if not 0.0 <= cfg.teacher_noise <= 1.0:
        raise ValueError(f"the noisy teacher's rate is a probability: 0 to 1, got {cfg.teacher_noise}")
    cfg.ablations = tuple(cfg.ablations)
    unknown = [a for a in cfg.ablations if a not in ABLATIONS]
    if unknown:
        raise ValueError(f"unknown ablation(s) {', '.join(unknown)}; choose from {', '.join(ABLATIONS)}")
    if cfg.ablations and cfg.source != "assets":
        raise ValueError("the ablations need the course's ci sample (drill.source 'assets': its defect labels and "
                         "clean answers); this run reads " + repr(cfg.source))
    if cfg.ablations and not (cfg.use_pipeline and cfg.compare_raw):
        raise ValueError("the ablations are compared with raw SFT and pipeline SFT: run with the pipeline and "
                         "--compare-raw")
    if cfg.language != "python":
        _check_language(cfg, explicit_humaneval=overrides.get("humaneval_subset"))
    if sft_steps:
        cfg.sft_overrides = {**cfg.sft_overrides, "max_steps": int(sft_steps)}
    if cfg.paths is None:
        cfg.paths = DrillPaths.under(default_root(P, cfg.teacher, cfg.language, seed=cfg.seed, train_size=cfg.train_size,
                                                  eval_size=cfg.eval_size,
                                                  sft_steps=cfg.sft_overrides.get("max_steps")),
                                     language=cfg.language)
    elif cfg.paths.language != cfg.language:
        from dataclasses import replace

        cfg.paths = replace(cfg.paths, language=cfg.language)
    if cfg.source == "assets" and cfg.data_files is None:
        from course_lib.drill.taskgen import SAMPLE_DIRS
        from course_lib.paths import assets_dir

        sample = SAMPLE_DIRS[cfg.language]
        cfg.data_files = [str(assets_dir(sample, "tiny_codes_sample.jsonl"))]
        cfg.hidden_tests = cfg.hidden_tests or str(assets_dir(sample, "hidden_tests.jsonl"))
        cfg.eval_split = cfg.eval_split or str(assets_dir(sample, "eval_split.json"))
    return cfg


def _check_language(cfg: DrillConfig, *, explicit_humaneval: int | None) -> None:
    """What a non-Python drill cannot do, said before anything runs: an unknown language, HumanEval (a
    Python benchmark: the profile's subset is set to 0, a subset asked for explicitly is an error), step 6."""
    from course_lib.drill.taskgen import LANGUAGES

    if cfg.language not in LANGUAGES:
        raise ValueError(f"unknown drill language {cfg.language!r}; choose one of {', '.join(LANGUAGES)}")
    if explicit_humaneval:
        raise ValueError(f"--humaneval-subset {explicit_humaneval}: HumanEval is a Python benchmark; the "
                         f"{cfg.language} drill has no HumanEval column (pass --humaneval-subset 0 or leave it out)")
    cfg.humaneval_subset = 0
    if cfg.use_rl:
        raise ValueError(CPP_LEAVES_OUT + " (pass --no-rl)")
    if cfg.ablations:
        raise ValueError(f"the ablations are Python-only (they read the Python sample's defect labels and clean "
                         f"answers); the {cfg.language} drill has none")
    if cfg.use_pipeline and cfg.pipeline_teacher() != "rules":
        raise ValueError(f"the {cfg.language} drill's step 2 has the rule teacher only (--teacher rules, ci); lesson 05's "
                         f"LazyLLM prompts ask {cfg.pipeline_teacher()!r} for Python. Train on the raw rows instead: "
                         "--no-pipeline")


def base_model_problems(cfg: DrillConfig) -> list[str]:
    """A ``--sft-model`` folder without a config and weights (where the profile runs the preflight checks,
    ``drill.preflight``, they check, and log, the models: :mod:`course_lib.drill.preflight`); checked by
    steps 3 and 4."""
    from course_lib.drill.outputs import has_weights

    if cfg.profile.drill.preflight or not cfg.sft_model:
        return []
    sm = Path(cfg.sft_model)
    if (sm.is_absolute() or sm.exists()) and not has_weights(sm):
        return [f"--sft-model {cfg.sft_model} has no config.json and weights"]
    return []


def base_model_path(cfg: DrillConfig) -> str:
    """The model SFT starts from: ``--sft-model`` as given, else the profile's ``sft.base_model`` through
    lesson 05's resolver (the course's tiny model in ci; a hub id in full, not downloaded here)."""
    if cfg.sft_model:
        return str(cfg.sft_model)
    from course_lib.training.sft import resolve_base_model

    return str(resolve_base_model(None, cfg.profile, download=False))


def use_lazyllm_path(cfg: DrillConfig) -> None:
    """Put ``--lazyllm-path`` (a LazyLLM source checkout) first on ``sys.path``."""
    if cfg.lazyllm_path:
        p = str(Path(cfg.lazyllm_path).resolve())
        if not Path(p).exists():
            raise PrerequisiteError(f"--lazyllm-path {cfg.lazyllm_path} does not exist")
        if p not in sys.path:
            sys.path.insert(0, p)


# --- the shape of a step ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Need:
    """An input a step reads: the file, the step that makes it, and what it is (for the message)."""

    path: Path
    made_by: str
    what: str


@dataclass(frozen=True)
class Step:
    """One step of the drill, as its module declares it (``STEP = Step(...)`` at the module's end).

    ``run(cfg, state)`` does the work (skipping outputs that are up to date), notes what it did per
    variant in the run's :class:`RunState` and returns what it did;
    ``needs(cfg)`` lists the files it reads that earlier steps make (:class:`Need`): when such a step is
    not planned and its output is not whole, the run stops before it starts, naming the step to run;
    ``check(cfg, steps)`` lists any other problem that would stop it (a missing tool, data file or
    model); ``engine(cfg)`` describes the engine and settings it runs with (the run manifest's
    ``engine`` entry); ``uses_gpu``: where the profile checks the GPU, its free memory is checked right
    before the step starts.

    Introduced in lesson 07.
    """

    name: str
    run: Callable[[DrillConfig, RunState], dict]
    needs: Callable[[DrillConfig], list[Need]]
    check: Callable[[DrillConfig, Sequence[str]], list[str]]
    engine: Callable[[DrillConfig], dict]
    uses_gpu: bool = False
