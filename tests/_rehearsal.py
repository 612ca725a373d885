"""The full-profile rehearsal's stand-ins: the full profile's own code path end to end on CPU at toy size.

Everything a rehearsal changes lives in this file (a test helper, not part of ``course_lib``):

* :data:`REHEARSAL` — the profile settings it overrides (toy sizes; bf16 off on CPU; the GPU memory check
  off, ``drill.gpu_memory_check``; the base model is the course's tiny model; the dataset id is a local
  folder laid out like the hub dataset). :func:`prepare` writes them (with the folder-dependent values)
  into the rehearsal folder's :data:`SETTINGS_FILE` in the format of
  :data:`course_lib.profiles.OVERRIDES_ENV`, the course's one switch for changing a profile's values from
  outside; :func:`environment` points that variable at it, so ``get_profile("full")`` carries them —
  in this process and in every process a run starts (spawned SFT workers, the notebook's kernel);
* :func:`environment` — the variables of a rehearsal run: the overrides file, a course cache of its
  own, and the full profile's own teacher variables (``COURSE_TEACHER_URL``/``COURSE_TEACHER_MODEL``)
  pointed at the stand-in teacher.

The stand-ins are real programs, not mocks: :func:`write_hub_folder` writes the committed tiny-codes sample
as parquet shards under ``data/`` (the hub dataset's layout and columns), which the drill's download
step reads with ``datasets.load_dataset(<folder>, streaming=True)`` exactly as it reads
``nampdn-ai/tiny-codes``; :func:`teacher_server` is an OpenAI-compatible HTTP server on 127.0.0.1
(``/v1/models``, ``/v1/chat/completions``) answering with lesson 07's :class:`RuleTeacher` rules,
which the full profile's LazyLLM ``OnlineChatModule`` client reaches by URL.

``tests/test_full_rehearsal.py`` runs it (pytest marker ``full_rehearsal``); docs/drill.md,
"Full-profile rehearsal", says what it covers.
"""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from course_lib.profiles import OVERRIDES_ENV  # names the file of profile overrides

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
        # the one prerequisite check a CPU rehearsal skips: a GPU with free memory (logged when skipped)
        "gpu_memory_check": False,
    },
    # the full YAML with bf16 switched off (no bf16 kernels on CPU) and rows cut to toy size; the base
    # model (the course's tiny model) is filled in by rehearsal_overrides()
    "sft": {"bf16": False, "max_samples": 40},
    "pipeline": {"max_rows": 24},
    # step 6 (lesson 10) at toy size: 2 GRPO steps x 2 prompts x the full profile's K = 8, short answers;
    # fp32 on the CPU and TRL's own (transformers) generation: TRL's colocated vLLM generation needs a GPU
    # and vLLM 0.22-0.31 in the TRL environment (the full profile's `trl[vllm]` extra), which a CPU
    # rehearsal cannot run. Everything else (the reward, the judge in Docker, the learning rate) is full's.
    "rl": {"steps": 2, "prompts_per_step": 2, "max_completion_length": 48, "bf16": False, "use_cpu": True,
           "use_vllm": False, "threads": 2, "worker_timeout_s": 600.0},
}
"""Profile overrides of the rehearsal (section → key → value), applied to ``full`` only."""


def active() -> Path | None:
    """The rehearsal folder while :data:`OVERRIDES_ENV` names its settings file, else None."""
    value = os.environ.get(OVERRIDES_ENV)
    return Path(value).parent if value and Path(value).name == SETTINGS_FILE else None


def rehearsal_overrides() -> dict[str, dict[str, Any]]:
    """:data:`REHEARSAL` plus the folder-dependent values (the local hub folder as the dataset id, the
    base model path), read from the active rehearsal folder; empty when no rehearsal is active."""
    root = active()
    if root is None:
        return {}
    settings = json.loads((root / SETTINGS_FILE).read_text(encoding="utf-8"))
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
    exactly the hub's columns (:data:`course_lib.drill.taskgen.HUB_COLUMNS`). Returns the folder."""
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
    ``COURSE_TEACHER_MODEL`` names."""
    from course_lib.training.rule_teacher import RULE_TEACHER_NAME, RuleTeacher
    from course_lib.training.teacher import TeacherServer

    return TeacherServer(RuleTeacher(run_code=run_code), model_name=RULE_TEACHER_NAME)


def prepare(folder: str | Path, base_model: str | Path | None = None) -> Path:
    """Lay out a rehearsal folder: the hub-shaped tiny-codes folder and :data:`SETTINGS_FILE` (dataset
    path, base model: default the course's tiny model from lesson 04, built on first use)."""
    folder = Path(folder).resolve()
    hub = write_hub_folder(folder / HUB_FOLDER)
    if base_model is None:
        from course_lib.training.tinymodel import get_tiny_model

        base_model = get_tiny_model("base", profile="ci")
    settings = {"profile": "full", "sections": _overrides(str(hub), str(base_model)),   # read by get_profile("full")
                "dataset": str(hub), "base_model": str(base_model)}
    (folder / SETTINGS_FILE).write_text(json.dumps(settings, indent=1), encoding="utf-8")
    return folder


def environment(folder: str | Path, teacher_url: str, teacher_model: str) -> dict[str, str]:
    """The variables of a rehearsal run: the rehearsal folder, a course cache inside it (the drill's
    outputs never mix with a real full run's), the full profile's teacher variables, offline hub."""
    folder = Path(folder).resolve()
    return {OVERRIDES_ENV: str(folder / SETTINGS_FILE), "COURSE_CACHE_DIR": str(folder / "cache"),
            "COURSE_TEACHER_URL": teacher_url, "COURSE_TEACHER_MODEL": teacher_model, "HF_HUB_OFFLINE": "1"}


def hub_rows(folder: str | Path) -> list[dict]:
    """The rows of a hub-shaped folder (for the teacher's reference table)."""
    import pyarrow.parquet as pq

    rows: list[dict] = []
    for shard in sorted((Path(folder) / "data").glob("*.parquet")):
        rows += pq.read_table(shard).to_pylist()
    return rows
