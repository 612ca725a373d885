"""Lesson 07: the tiny-codes drill — one command from data to a sandbox-evaluated code model.

``python -m course_lib.drill`` (or ``./course drill``) runs the lesson's five steps: download → pipeline
→ SFT → inference → evaluation. Modules, in the order to read them:

- ``config``      a run's settings (:class:`DrillConfig`, set once), what the run records as it goes
  (:class:`RunState`), its models (``VARIANTS``), the shape of a step;
- ``download``, ``pipeline``, ``finetune`` (step ``sft``), ``inference``, ``evaluate`` (step
  ``evaluation``): one module per step, each ending with its ``STEP``;
- ``steps``       the steps in run order (``DRILL_STEPS``): the one place a step is registered;
- ``orchestrate`` the plan, the prerequisite check, :func:`run_drill`, reading results back;
- ``command``     the command line; ``manifest`` the run manifest; ``preflight`` the full profile's
  machine checks (GPU, Docker, model folders);
- ``outputs``     the drill's files: folders, atomic writes, completion markers, the log;
- ``scoreboard``  Pass@1, PPL, FCR, SER, RSR per model and the lecture's tables;
- ``taskgen``     the tiny-codes-shaped ci sample.

How a model answers (vLLM or transformers) and its PPL, and code out of an answer, live in lesson 06's
:mod:`course_lib.evaluation.generation`, :mod:`course_lib.evaluation.vllm_engine` and
:mod:`course_lib.evaluation.extract` (lesson 06 samples a real model to judge it).

Introduced in lesson 07.
"""
from course_lib.drill.config import DrillConfig, PrerequisiteError, RunState, config_from_profile
from course_lib.drill.download import step_download
from course_lib.drill.evaluate import step_evaluation
from course_lib.drill.finetune import step_sft
from course_lib.drill.inference import inference_knobs, model_path_for, step_inference
from course_lib.drill.orchestrate import STEPS, check_prerequisites, load_metrics, load_report, run_drill
from course_lib.drill.pipeline import step_pipeline
from course_lib.evaluation.extract import extract_code, find_code_blocks, has_fenced_code


def main(argv: list[str] | None = None) -> int:
    """``./course drill`` entry point (see :mod:`course_lib.drill.command`). Introduced in lesson 07."""
    from course_lib.drill.command import main as _main

    return _main(argv)


__all__ = ["STEPS", "DrillConfig", "PrerequisiteError", "RunState", "check_prerequisites", "config_from_profile",
           "extract_code", "find_code_blocks", "has_fenced_code", "inference_knobs", "load_metrics",
           "load_report", "main", "model_path_for", "run_drill", "step_download", "step_evaluation",
           "step_inference", "step_pipeline", "step_sft"]
