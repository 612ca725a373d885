"""The full-profile rehearsal: the full profile's own code path end to end on CPU at toy size.

Everything a rehearsal changes lives in this module and nowhere else:

* :data:`REHEARSAL` — the profile settings it overrides (toy sizes; bf16 off on CPU; the base model is
  the course's tiny model; the dataset id is a local folder laid out like the hub dataset);
  :func:`prepare` writes them (with the folder-dependent values, :func:`rehearsal_overrides`) into the
  rehearsal folder's ``rehearsal.json``, and :func:`course_lib.profiles.get_profile` applies them to the
  ``full`` profile while the environment variable ``COURSE_FULL_REHEARSAL`` names that folder;
* :data:`BYPASSED_CHECKS` — the one prerequisite check a CPU rehearsal skips: the free GPU memory
  (``course_lib.drill.preflight`` asks :func:`bypassed`);
* :func:`environment` — the variables a rehearsal run sets: the rehearsal folder, a course cache of its
  own, and the full profile's own teacher variables (``COURSE_TEACHER_URL``/``COURSE_TEACHER_MODEL``)
  pointed at the stand-in teacher.

The stand-ins are real programs, not mocks: :func:`write_hub_folder` writes the committed tiny-codes sample
as parquet shards under ``data/`` (the hub dataset's layout and columns), which the drill's download
step reads with ``datasets.load_dataset(<folder>, streaming=True)`` exactly as it reads
``nampdn-ai/tiny-codes``; :func:`teacher_server` is an OpenAI-compatible HTTP server on 127.0.0.1
(``/v1/models``, ``/v1/chat/completions``) answering with lesson 07's :class:`RuleTeacher` rules,
which the full profile's LazyLLM ``OnlineChatModule`` client reaches by URL.

``tests/test_full_rehearsal.py`` runs it (pytest marker ``full_rehearsal``); docs/drill.md,
"Full-profile rehearsal", says what it covers. Introduced in lesson 07.
"""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from course_lib.profiles import REHEARSAL_ENV  # names the prepared rehearsal folder

SETTINGS_FILE = "rehearsal.json"
HUB_FOLDER = "tiny-codes"
SHARDS = 2

REHEARSAL: dict[str, dict[str, Any]] = {
    # toy sizes of the drill; everything else (backends, the vLLM engine, the Docker sandbox) stays full
    "drill": {
        "train_size": 24, "eval_size": 6, "humaneval_subset": 2, "ppl_samples": 4,
        # one SFT variant (pipeline_sft) and the base model: raw_sft runs the same code on other rows and
        # would add ~80 s (one LLaMA-Factory start-up, one vLLM engine) to the 5-minute budget
        "compare_raw": False,
        "vllm_max_model_len": 1024,          # the tiny model's answers are short; its context is 2,048
        "vllm_response_max_tokens": 96,
        # step 4's vLLM engine on CPU: a 1 GiB KV cache, no graph compilation (start-up), and a
        # time limit that fails a stuck engine within the rehearsal's budget
        "vllm_kv_cache_gib": 1, "vllm_enforce_eager": True, "inference_timeout_s": 600,
        "eval_workers": 2,
        # SFT steps cut to toy size; 10 steps = one logged loss (the full YAML logs every 10 steps)
        "sft_overrides": {"max_steps": 10},
    },
    # the full YAML with bf16 switched off (no bf16 kernels on CPU) and rows cut to toy size; the base
    # model (the course's tiny model) is filled in by rehearsal_overrides()
    "sft": {"bf16": False, "max_samples": 40},
    "pipeline": {"max_rows": 24},
}
"""Profile overrides of the rehearsal (section → key → value), applied to ``full`` only."""

BYPASSED_CHECKS: dict[str, str] = {
    "gpu_memory": "full-profile rehearsal on CPU: the GPU and free-GPU-memory check is bypassed",
}
"""Prerequisite checks a CPU rehearsal skips, with the sentence logged when one is skipped."""


def active() -> Path | None:
    """The rehearsal folder while :data:`REHEARSAL_ENV` is set, else None. Introduced in lesson 07."""
    value = os.environ.get(REHEARSAL_ENV)
    return Path(value) if value else None


def bypassed(check: str) -> str | None:
    """Why ``check`` is skipped (a rehearsal is active and lists it in :data:`BYPASSED_CHECKS`), else None. Introduced in lesson 07."""
    return BYPASSED_CHECKS.get(check) if active() is not None else None


def rehearsal_overrides() -> dict[str, dict[str, Any]]:
    """:data:`REHEARSAL` plus the folder-dependent values (the local hub folder as the dataset id, the
    base model path), read from the active rehearsal folder; empty when no rehearsal is active. Introduced in lesson 07."""
    root = active()
    if root is None:
        return {}
    settings_path = root / SETTINGS_FILE
    if not settings_path.exists():
        raise FileNotFoundError(f"${REHEARSAL_ENV}={root} has no {SETTINGS_FILE}: prepare the folder with "
                                "course_lib.drill.rehearsal.prepare(folder) first")
    settings = json.loads(settings_path.read_text(encoding="utf-8"))
    return _overrides(settings["dataset"], settings["base_model"])


def _overrides(dataset: str, base_model: str) -> dict[str, dict[str, Any]]:
    out = copy.deepcopy(REHEARSAL)
    out["drill"]["dataset"] = dataset
    out["sft"]["base_model"] = base_model
    return out


# --- the stand-ins -------------------------------------------------------------------------------

def write_hub_folder(folder: str | Path, rows: Iterable[Mapping[str, Any]] | None = None, *,
                     shards: int = SHARDS) -> Path:
    """Write tiny-codes rows (default: the committed ``assets/tiny_codes`` sample) as a folder laid out
    like the hub dataset ``nampdn-ai/tiny-codes``: ``data/train-0000i-of-0000n.parquet`` shards with
    exactly the hub's columns (:data:`course_lib.drill.taskgen.HUB_COLUMNS`). Returns the folder. Introduced in lesson 07."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from course_lib.drill.taskgen import HUB_COLUMNS

    if rows is None:
        from course_lib.paths import assets_dir

        sample = assets_dir("tiny_codes", "tiny_codes_sample.jsonl")
        rows = [json.loads(line) for line in sample.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = list(rows)
    for i, r in enumerate(rows):
        missing = [c for c in HUB_COLUMNS if c not in r]
        if missing:
            raise ValueError(f"tiny-codes row {i} lacks the hub column(s) {missing}")
    folder = Path(folder)
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    per = -(-len(rows) // shards)
    for k in range(shards):
        part = rows[k * per:(k + 1) * per]
        table = pa.table({c: [r[c] for r in part] for c in HUB_COLUMNS})
        pq.write_table(table, data / f"train-{k:05d}-of-{shards:05d}.parquet")
    return folder


def teacher_server(rows: Iterable[Mapping[str, Any]], *, run_code=None):
    """An OpenAI-compatible server on 127.0.0.1 answering with the drill's ci teacher
    (:class:`course_lib.training.rule_teacher.RuleTeacher`: code and tests written from each instruction
    alone, as the full profile's LLM teacher does; ``rows`` are not told to it). Not started: use it as
    a context manager; ``.url`` is what ``COURSE_TEACHER_URL`` points at, ``.model_name`` what
    ``COURSE_TEACHER_MODEL`` names. Introduced in lesson 07."""
    from course_lib.training.rule_teacher import RULE_TEACHER_NAME, RuleTeacher
    from course_lib.training.teacher import TeacherServer

    return TeacherServer(RuleTeacher(run_code=run_code), model_name=RULE_TEACHER_NAME)


def prepare(folder: str | Path, base_model: str | Path | None = None) -> Path:
    """Lay out a rehearsal folder: the hub-shaped tiny-codes folder and :data:`SETTINGS_FILE` (dataset
    path, base model: default the course's tiny model from lesson 04, built on first use). Introduced in lesson 07."""
    folder = Path(folder).resolve()
    hub = write_hub_folder(folder / HUB_FOLDER)
    if base_model is None:
        from course_lib.training.tinymodel import get_tiny_model

        base_model = get_tiny_model("base", profile="ci")
    settings = {"dataset": str(hub), "base_model": str(base_model),
                "profile_overrides": _overrides(str(hub), str(base_model))}   # read by get_profile("full")
    (folder / SETTINGS_FILE).write_text(json.dumps(settings, indent=1), encoding="utf-8")
    return folder


def environment(folder: str | Path, teacher_url: str, teacher_model: str) -> dict[str, str]:
    """The variables of a rehearsal run: the rehearsal folder, a course cache inside it (the drill's
    outputs never mix with a real full run's), the full profile's teacher variables, offline hub. Introduced in lesson 07."""
    folder = Path(folder).resolve()
    return {REHEARSAL_ENV: str(folder), "COURSE_CACHE_DIR": str(folder / "cache"),
            "COURSE_TEACHER_URL": teacher_url, "COURSE_TEACHER_MODEL": teacher_model, "HF_HUB_OFFLINE": "1"}


def hub_rows(folder: str | Path) -> list[dict]:
    """The rows of a hub-shaped folder (for the teacher's reference table). Introduced in lesson 07."""
    import pyarrow.parquet as pq

    rows: list[dict] = []
    for shard in sorted((Path(folder) / "data").glob("*.parquet")):
        rows += pq.read_table(shard).to_pylist()
    return rows
