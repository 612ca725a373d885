"""Supervised fine-tuning through LazyLLM → LLaMA-Factory: one code path in both profiles.

The lesson trains with::

    lazyllm.TrainableModule(base, target).mode('finetune').trainset(data)
        .finetune_method((lazyllm.finetune.llamafactory, {...}))

:func:`finetune` runs exactly that, on CPU in ``ci`` (the course's tiny model, full fine-tuning, a
few hundred steps) and on a GPU in ``full`` (Qwen2.5-0.5B-Instruct with the lesson's
hyperparameters). :func:`llamafactory_config` gives the settings of each profile so tests can check
the YAML that LazyLLM writes (:func:`render_train_yaml`) without training.

LazyLLM/LLaMA-Factory traps handled here (checked on this machine):

* ``update()`` trains and then deploys, and needs a deploy method: ``deploy.dummy`` starts a relay server
  on a port drawn from the global ``random`` (30000–40000, no check that it is free, three retries on
  the same port — a course that seeds ``random`` draws the same port every time), and
  ``deploy_method(None)`` fails in LazyLLM 1.4.0 → :func:`train_only_deploy`, a deployer that starts
  nothing (the course serves trained models itself: transformers, vLLM);
* CPU needs ``fp16=False, use_cpu=True``, and ``bf16=True`` only on a CPU with bf16 instructions
  (:func:`cpu_has_bf16`; the ci profile's ``bf16: "auto"``); ``report_to='none'`` (tensorboard is absent);
  ``preprocessing_num_workers=1``; ``val_size=0`` also needs ``eval_strategy='no'``;
* the launcher is a profile setting (``sft.launcher``): ``launchers.empty(sync=True)`` on this machine
  (LazyLLM's own default, ``remote``, resolves to its configured launcher), ``sco`` as in the
  lecture, ``slurm``;
* ``llamafactory-cli`` must be on ``PATH`` (the virtual environment's ``bin``);
* the chat template is guessed from the model *folder name*: the model is linked under a name that
  maps to ``qwen``; unknown keys are dropped silently, so the template is also passed explicitly;
* LoRA merges with ``export_legacy_format: true`` by default (``pytorch_model.bin``) → an export
  config with ``false``; full fine-tuning copies with ``rsync`` and a missing ``rsync`` leaves the
  merge folder empty silently → the files are copied here when that happens (and noted);
* failures are swallowed → after every run: merged weights exist, the log has ``train_runtime``,
  the loss fell; otherwise :class:`FinetuneError` with the log's last lines.

Introduced in lesson 05.
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from course_lib.profiles import Profile, ProfileLike, resolve_profile

TEMPLATE = "qwen"
LESSON_HYPERPARAMETERS = {
    "learning_rate": 1e-4, "cutoff_len": 4096, "max_samples": 5000, "val_size": 0.02,
    "optim": "adamw_torch_fused", "bf16": True, "fp16": False, "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 4, "num_train_epochs": 2.0, "template": "qwen", "stage": "sft",
    "save_steps": 10, "resume_from_checkpoint": None, "save_strategy": "steps", "save_total_limit": 3,
}
"""Every key of the lecture's ``finetune.llamafactory`` dictionary (§4) except its launcher, with the
lecture's values; the full profile renders all of them into the train YAML."""

LECTURE_LAUNCHER = ("sco", {"ngpus": 1, "partition": "a800", "resource": "N3lS.Ii.I60.1"})
"""The lecture's launcher: ``launchers.sco(ngpus=1, partition='a800', resource='N3lS.Ii.I60.1')``."""

LAUNCHERS = ("empty", "sco", "slurm", "remote")


class FinetuneError(RuntimeError):
    """LLaMA-Factory did not produce a trained, merged model (LazyLLM swallowed the failure)."""


@dataclass
class SFTResult:
    """What a fine-tuning run produced."""

    merged_model: Path                 # a Hugging Face folder (config, weights, tokenizer)
    adapter_dir: Path                  # LLaMA-Factory's output_dir (LoRA adapter or full weights)
    log_path: Path                     # the trainer's console log
    loss_curve: list[tuple[int, float]]  # (step, loss) from trainer_log.jsonl
    train_runtime: float
    config: dict                       # the settings given to finetune.llamafactory
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def plot_loss(self, ax=None, label: str | None = None):
        """The training loss per step (:func:`plot_loss`)."""
        return plot_loss(self.loss_curve, ax, label=label or "LLaMA-Factory (via LazyLLM)")


def plot_loss(curve: Sequence[tuple[int, float]], ax=None, *, label: str | None = None, title: str = "SFT loss"):
    """The training loss per step of ``curve`` ((step, loss) pairs, as :func:`read_loss_curve` reads
    them) on ``ax`` (a new pyplot figure when None); a legend when ``label`` is given. Returns ``ax``.
    Introduced in lesson 05."""
    if ax is None:
        import matplotlib.pyplot as plt

        ax = plt.subplots(figsize=(6, 3))[1]
    steps, losses = zip(*curve) if curve else ((), ())
    ax.plot(steps, losses, marker=".", label=label)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (answer tokens)")
    ax.set_title(title)
    if label:
        ax.legend()
    return ax


# --- settings -------------------------------------------------------------------------------------

def llamafactory_config(profile: ProfileLike = "ci", *, finetuning_type: str | None = None, **overrides: Any) -> dict:
    """The keyword arguments given to ``finetune.llamafactory`` in ``profile`` (they become the keys of
    the train YAML): the profile's ``sft`` section, whose training keys carry LLaMA-Factory's own names
    (``full`` has every value of the lecture's dictionary, :data:`LESSON_HYPERPARAMETERS`; ``ci`` the same
    keys sized for a CPU and a tiny model), plus what the course always sets (stage, template, answer-only
    loss, no reporting) and what follows from the profile (``bf16`` resolved, ``seed``, ``use_cpu``,
    ``eval_strategy``). ``overrides`` (LLaMA-Factory's keys too) win. The launcher is separate
    (:func:`launcher_settings`). Introduced in lesson 05.
    """
    P = resolve_profile(profile)
    S = P.sft
    cfg: dict[str, Any] = {
        "stage": "sft",
        "template": TEMPLATE,
        "finetuning_type": finetuning_type or S.finetuning_type,
        "learning_rate": S.learning_rate,
        "cutoff_len": S.cutoff_len,
        "max_samples": S.max_samples,
        "val_size": S.val_size,
        "optim": S.optim,
        "bf16": resolve_bf16(S.bf16, P.device),
        "fp16": S.fp16,
        "per_device_train_batch_size": S.per_device_train_batch_size,
        "gradient_accumulation_steps": S.gradient_accumulation_steps,
        "num_train_epochs": float(S.num_train_epochs),
        "max_steps": S.max_steps,
        "save_steps": S.save_steps,
        "save_strategy": S.save_strategy,
        "save_total_limit": S.save_total_limit,
        "resume_from_checkpoint": S.resume_from_checkpoint,
        "lr_scheduler_type": S.lr_scheduler_type,
        "warmup_ratio": S.warmup_ratio,
        "logging_steps": S.logging_steps,
        "overwrite_cache": True,
        "plot_loss": True,
        "train_on_prompt": False,          # answer-only loss
        "report_to": "none",
        "preprocessing_num_workers": S.preprocessing_num_workers,
        "seed": P.seed,
        "use_cpu": P.device == "cpu",
    }
    if S.val_size:
        cfg.update({"eval_strategy": "steps", "eval_steps": 100, "per_device_eval_batch_size": 8})
    else:
        cfg["eval_strategy"] = "no"        # val_size 0 without this: "Please specify dataset for evaluation"
    if cfg["finetuning_type"] == "lora":
        cfg.update({"lora_rank": 8, "lora_target": "all"})
    cfg.update(overrides)
    return cfg


BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")
"""``/proc/cpuinfo`` flags of a CPU that computes in bf16 natively (x86 AVX-512 BF16 or AMX, Arm BF16)."""


def cpu_has_bf16(cpuinfo: str | None = None) -> bool:
    """True when the CPU has bf16 instructions (a flag of :data:`BF16_CPU_FLAGS` in ``cpuinfo``, by
    default ``/proc/cpuinfo``; False when it cannot be read). On such a CPU bf16 mixed precision trains
    the tiny model about 1.5x faster than fp32 (docs/drill.md, "SFT settings"); without them bf16 is
    emulated and slower. ``COURSE_BF16=0`` in the environment answers False on any CPU: the way to time
    the slow path (a CPU without bf16) on a machine that has it. Introduced in lesson 05."""
    if cpuinfo is None:
        if os.environ.get("COURSE_BF16", "").strip() == "0":
            return False
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features") and set(value.split()) & set(BF16_CPU_FLAGS):
            return True
    return False


def cpu_kind(cpuinfo: str | None = None) -> str:
    """What decides this CPU's fp32 kernels, and so a trained model's numbers: ``"AVX-512 BF16"``,
    ``"AVX-512"``, ``"AVX2"``, or the machine name (``platform.machine()``) when ``cpuinfo`` (default
    ``/proc/cpuinfo``) has none of those flags or cannot be read. Benchmarks record it beside their results
    (docs/claims.md: numbers per CPU kind). Introduced in lesson 05."""
    import platform

    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return platform.machine()
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            flags |= set(value.split())
    if "avx512_bf16" in flags:
        return "AVX-512 BF16"
    if "avx512f" in flags:
        return "AVX-512"
    return "AVX2" if "avx2" in flags else platform.machine()


def resolve_bf16(setting: bool | str, device: str = "cpu") -> bool:
    """The ``bf16`` value for LLaMA-Factory from a profile's ``sft.bf16``: True/False as given, or
    ``"auto"``: on a CPU, :func:`cpu_has_bf16`; on a GPU, whether torch says it supports bf16.
    Introduced in lesson 05."""
    if isinstance(setting, bool):
        return setting
    if setting != "auto":
        raise ValueError(f"sft.bf16 must be True, False or 'auto', got {setting!r}")
    if device == "cpu":
        return cpu_has_bf16()
    import torch

    return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())


def launcher_settings(profile: ProfileLike = "ci", launcher: str | None = None,
                      launcher_options: Mapping[str, Any] | None = None) -> tuple[str, dict]:
    """Which LazyLLM launcher runs the fine-tune, and its options: the profile's ``sft.launcher``
    (``"empty"``: this machine, the default; ``"sco"``, ``"slurm"``, ``"remote"``: LazyLLM's
    configured default) and ``sft.launcher_options``. ``"sco"`` without options gets the lecture's
    (:data:`LECTURE_LAUNCHER`). Introduced in lesson 05."""
    P = resolve_profile(profile).sft
    kind = launcher or P.launcher
    if kind not in LAUNCHERS:
        raise ValueError(f"launcher must be one of {', '.join(LAUNCHERS)}, got {kind!r}")
    options = dict(P.launcher_options if launcher_options is None else launcher_options)
    if kind == "sco" and not options:
        options = dict(LECTURE_LAUNCHER[1])
    return kind, options


def lazyllm_environment() -> None:
    """Set LazyLLM's environment before it is imported: no default "You are ChatGPT" system prompt,
    and only its ERROR log lines (its INFO/WARNING lines — GPU probes, model-type guesses, the full
    command lines with local paths — teach nothing in a notebook; failures are still raised and the
    course verifies every result). Values already set by the user win. Introduced in lesson 05."""
    os.environ.setdefault("LAZYLLM_DISABLE_SYSTEM_PROMPT", "1")
    os.environ.setdefault("LAZYLLM_LOG_LEVEL", "ERROR")


def make_launcher(kind: str, options: Mapping[str, Any] | None = None):
    """``lazyllm.launchers.<kind>(**options, sync=True)`` (training waits for the job). ``sco`` needs a
    workspace: ``workspace_name=`` in the options or ``LAZYLLM_SCO_WORKSPACE``. Introduced in lesson 05."""
    lazyllm_environment()
    import lazyllm

    if kind not in LAUNCHERS:
        raise ValueError(f"launcher must be one of {', '.join(LAUNCHERS)}, got {kind!r}")
    return getattr(lazyllm.launchers, kind)(**dict(options or {}), sync=True)


@functools.cache
def train_only_deploy():
    """A LazyLLM deployer (a ``LazyLLMDeployBase`` subclass, not registered in ``lazyllm.deploy``) that
    starts no server: ``TrainableModule.update()`` then trains only. The lecture's ``update()`` also
    deploys the model for inference; the course serves trained models itself (transformers, vLLM), and
    LazyLLM's ``deploy.dummy`` relay server takes a port from the global ``random`` with no check that
    it is free (a seeded notebook draws the same port each run; a busy port failed a CI run as
    "Job failed after retrying 3 times"). Introduced in lesson 05."""
    lazyllm_environment()
    import lazyllm
    from lazyllm.components.deploy.base import LazyLLMDeployBase

    class TrainOnlyDeploy(LazyLLMDeployBase):
        __lazyllm_registry_disable__ = True

        def __init__(self, launcher=None, **_ignored):
            super().__init__(launcher=lazyllm.launchers.empty(sync=True))

        def apply(self, *_args, **_kw):
            return ""   # no URL: nothing is served

    return TrainOnlyDeploy


_EXPORT_YAML = "export_size: 1\nexport_device: cpu\nexport_legacy_format: false\n"


def _export_config(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "lora_export.yaml"
    if not path.exists() or path.read_text() != _EXPORT_YAML:
        path.write_text(_EXPORT_YAML)
    return path


def template_safe_path(model_path: str | os.PathLike, folder: Path) -> Path:
    """A path to ``model_path`` whose folder name LazyLLM maps to the ``qwen`` template (a symlink
    named ``qwen2-<name>`` when the real name does not match). Introduced in lesson 05."""
    model_path = Path(model_path).resolve()
    from lazyllm.components.finetune.llama_factory.model_mapping import match_longest_prefix

    if match_longest_prefix(model_path.name.lower()) == TEMPLATE:
        return model_path
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / f"qwen2-{model_path.name}"
    if link.is_symlink() and link.resolve() != model_path:
        link.unlink()
    if not link.exists():
        link.symlink_to(model_path, target_is_directory=True)
    return link


def template_default_system(model_path: str | os.PathLike) -> str | None:
    """The system message the model's own chat template inserts when none is given, so training
    (LLaMA-Factory's ``default_system``) and generation agree: its text for Qwen2.5-style templates,
    ``""`` for a ChatML template that adds none (the course's tiny model, Qwen3): LLaMA-Factory's
    ``qwen`` template would otherwise add its own; None when the tokenizer has no chat template.
    Introduced in lesson 05."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(model_path))
        text = tok.apply_chat_template([{"role": "user", "content": "@@"}], tokenize=False)
    except Exception:
        return None
    head = "<|im_start|>system\n"
    if text.startswith(head) and "<|im_end|>" in text:
        return text[len(head): text.index("<|im_end|>")]
    return "" if text.startswith("<|im_start|>user\n") else None


def resolve_base_model(base: str | os.PathLike | None = None, profile: ProfileLike = "ci", *,
                       download: bool = True) -> Path | str:
    """The base model SFT starts from (the course's one resolver): ``base``, else the profile's
    ``sft.base_model``; ``course-tiny`` → the course's tiny model (lesson 04, built on first use); a path
    that exists → that folder; a hub id → ``huggingface_hub.snapshot_download`` (a local folder), or the id
    itself with ``download=False`` (checks and messages that must not download). An offline profile
    (ci) never goes to the hub: a name that is neither raises. Introduced in lesson 05."""
    P = resolve_profile(profile)
    text = str(base or P.sft.base_model)
    if text == "course-tiny":
        from course_lib.training.tinymodel import get_tiny_model

        return Path(get_tiny_model(name="base", profile=P))
    if Path(text).exists():
        return Path(text)
    if P.offline:
        raise FileNotFoundError(f"base model {text!r} is not a local folder, and the {P.name} profile never "
                                f"downloads from the hub; pass a folder or 'course-tiny'")
    if not download:
        return text
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(text))


# --- data ----------------------------------------------------------------------------------------

def write_alpaca_json(rows: Iterable[Mapping[str, Any]], path: Path) -> tuple[Path, int]:
    """Write instruction / input / output rows as the Alpaca JSON list LLaMA-Factory reads
    (atomically). Rows without an instruction or output raise with the row number.
    Introduced in lesson 05."""
    data = []
    for i, row in enumerate(rows):
        if not row.get("instruction") or not row.get("output"):
            raise ValueError(f"training row {i} ({row.get('row_id', row.get('id', '?'))}) needs non-empty "
                             f"'instruction' and 'output'; it has {sorted(row)}")
        data.append({"instruction": row["instruction"], "input": row.get("input") or "",
                     "output": row["output"]})
    if not data:
        raise ValueError("no training rows: the pipeline kept nothing; look at its report")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=0))
    tmp.replace(path)
    return path, len(data)


# --- running --------------------------------------------------------------------------------------

@contextlib.contextmanager
def _lazyllm_env(work: Path):
    """PATH with the venv's bin (llamafactory-cli), LazyLLM temp/target folders inside ``work``."""
    lazyllm_environment()
    import lazyllm

    old_path = os.environ.get("PATH", "")
    bin_dir = str(Path(sys.executable).parent)
    os.environ["PATH"] = bin_dir + os.pathsep + old_path
    os.environ.setdefault("DISABLE_VERSION_CHECK", "1")
    try:
        with lazyllm.config.temp("temp_dir", str(work / "lazyllm_temp")), \
                lazyllm.config.temp("train_target_root", str(work / "lazyllm_target")):
            yield lazyllm
    finally:
        os.environ["PATH"] = old_path


@functools.lru_cache(maxsize=1)
def lazyllm_template_keys() -> frozenset[str]:
    """The keys of LazyLLM's LLaMA-Factory train template (``llama_factory/sft.yaml`` beside
    ``lazyllm.finetune.llamafactory``): the only keys that class writes into the train YAML; any other
    keyword argument it drops with one INFO log line. Introduced in lesson 05."""
    import yaml

    lazyllm_environment()
    from lazyllm.components.finetune import llamafactory as lf

    path = Path(lf.__file__).parent / "llama_factory" / "sft.yaml"
    return frozenset(yaml.safe_load(path.read_text(encoding="utf-8")) or {})


def check_template_keys(cfg: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` naming each key of ``cfg`` (the train YAML's settings) that LazyLLM's train
    template lacks (:func:`lazyllm_template_keys`): ``lazyllm.finetune.llamafactory`` would drop it without a
    word, so a setting such as ``neat_packing`` would silently not be trained with. Introduced in lesson 05."""
    missing = sorted(set(cfg) - lazyllm_template_keys())
    if missing:
        raise ValueError(f"LLaMA-Factory setting(s) {', '.join(map(repr, missing))} are not keys of LazyLLM's train "
                         "template (lazyllm/components/finetune/llama_factory/sft.yaml): lazyllm.finetune.llamafactory "
                         "would drop them silently. Remove them, or give LazyLLM a config_path YAML that has them")


def _finetune_kwargs(cfg: dict, work: Path, launcher=None) -> dict:
    check_template_keys(cfg)
    kw = dict(cfg)
    kw["launcher"] = launcher if launcher is not None else make_launcher("empty")
    if kw.get("finetuning_type") == "lora":
        kw["export_config_path"] = str(_export_config(work))
    return kw


def _split_launcher(profile: Profile, overrides: dict) -> tuple[dict, Any]:
    """Take ``launcher`` / ``launcher_options`` out of the overrides and build the launcher."""
    overrides = dict(overrides)
    kind, options = launcher_settings(profile, overrides.pop("launcher", None),
                                      overrides.pop("launcher_options", None))
    return overrides, make_launcher(kind, options)


def render_train_yaml(base_model_path: str | os.PathLike, train_file: str | os.PathLike, out_dir: str | os.PathLike,
                      *, profile: ProfileLike = "ci", **overrides: Any) -> tuple[dict, str]:
    """Let LazyLLM write the train YAML it would run (no training): returns (the YAML as a dict, the
    shell command LazyLLM would launch). ``launcher`` / ``launcher_options`` in ``overrides`` choose
    the launcher (:func:`launcher_settings`). Introduced in lesson 05."""
    import yaml

    out_dir = Path(out_dir)
    P = resolve_profile(profile)
    overrides, launcher = _split_launcher(P, overrides)
    cfg = llamafactory_config(P, **overrides)
    with _lazyllm_env(out_dir) as lazyllm:
        base = template_safe_path(base_model_path, out_dir / "models")
        ft = lazyllm.finetune.llamafactory(str(base), str(out_dir / "target"),
                                           **_finetune_kwargs(cfg, out_dir, launcher))
        cmd = ft.cmd(str(Path(train_file).resolve()))
        return yaml.safe_load(Path(ft.temp_yaml_file).read_text()), cmd


def _latest_run(target: Path, since: float) -> Path | None:
    runs = [p for p in target.rglob("lazyllm_lora") if p.is_dir() and p.stat().st_mtime >= since - 1]
    return max(runs, key=lambda p: p.stat().st_mtime) if runs else None


def read_loss_curve(run_dir: Path) -> list[tuple[int, float]]:
    """(step, loss) pairs from LLaMA-Factory's ``trainer_log.jsonl``. Introduced in lesson 05."""
    path = run_dir / "trainer_log.jsonl"
    curve = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "loss" in rec and "current_steps" in rec:
                curve.append((int(rec["current_steps"]), float(rec["loss"])))
    return curve


def _tail(path: Path | None, n: int = 25) -> str:
    if path is None or not path.exists():
        return "(no log was written)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:])


_COPY_SKIP = ("checkpoint-", "train_log_", "trainer_state.json", "trainer_log.jsonl", "train_results.json",
              "all_results.json", "eval_results.json", "training_loss.png", "runs", "training_args.bin")


def verify_run(run_dir: Path | None, merge_dir: Path | None, finetuning_type: str) -> tuple[Path, list, float, list[str]]:
    """The checks LazyLLM does not do: merged weights exist, the log has the trainer's summary
    (``train_runtime``), the loss fell (the mean of the last three logged losses is below the first
    logged loss). Copies full-fine-tuning weights when ``rsync`` was missing.
    Returns (merged folder, loss curve, train_runtime, notes); raises :class:`FinetuneError`.
    Introduced in lesson 05."""
    notes: list[str] = []
    if run_dir is None:
        raise FinetuneError("LazyLLM produced no output folder: the trainer never started")
    logs = sorted(run_dir.glob("train_log_*.log"), key=lambda p: p.stat().st_mtime)
    log = logs[-1] if logs else None
    text = log.read_text(errors="replace") if log else ""
    if "train_runtime" not in text:
        raise FinetuneError(f"the trainer's log has no train_runtime (training failed). Last lines of "
                            f"{log}:\n{_tail(log)}")
    merge_dir = merge_dir or run_dir.parent / "lazyllm_merge"
    weights = list(merge_dir.glob("*.safetensors")) if merge_dir.exists() else []
    if not weights and finetuning_type == "full" and list(run_dir.glob("*.safetensors")):
        merge_dir.mkdir(parents=True, exist_ok=True)
        for item in run_dir.iterdir():
            if item.is_file() and not item.name.startswith(_COPY_SKIP):
                shutil.copy2(item, merge_dir / item.name)
        notes.append("LazyLLM's rsync copy of the fully fine-tuned weights did nothing (rsync is missing "
                     "or failed, and LazyLLM ignores that): the course copied them into lazyllm_merge")
        weights = list(merge_dir.glob("*.safetensors"))
    if not weights:
        raise FinetuneError(f"no merged *.safetensors in {merge_dir} (the export/merge step failed silently). "
                            f"Last lines of {log}:\n{_tail(log)}")
    curve = read_loss_curve(run_dir)
    if len(curve) >= 2:
        # against the FIRST logged loss (the model before it learned), not an average over the first
        # fifth: a run that rises and falls back can beat its own early average without learning anything
        first = curve[0][1]
        k = min(3, len(curve) - 1)
        last = sum(l for _, l in curve[-k:]) / k
        if not last < first:
            raise FinetuneError(f"the loss did not fall below the first logged loss ({first:.3f} → {last:.3f} "
                                f"over the last {k} logged steps). Last lines of {log}:\n{_tail(log)}")
    else:
        notes.append("fewer than two logged steps: the loss trend could not be checked")
    runtime = 0.0
    results = run_dir / "train_results.json"
    if results.exists():
        runtime = float(json.loads(results.read_text()).get("train_runtime", 0.0))
    return merge_dir, curve, runtime, notes


def train_threads(profile: ProfileLike = "ci") -> int:
    """The CPU threads of one fine-tuning run (``OMP_NUM_THREADS`` of LLaMA-Factory's process): the
    caller's ``OMP_NUM_THREADS`` when set, else the profile's ``sft.threads`` (2 in ci, 8 in full).
    Introduced in lesson 05."""
    env = os.environ.get("OMP_NUM_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    return int(resolve_profile(profile).sft.threads)


def finetune(base_model_path: str | os.PathLike, train_rows: Sequence[Mapping[str, Any]], out_dir: str | os.PathLike,
             *, profile: ProfileLike = "ci", **overrides: Any) -> SFTResult:
    """Fine-tune ``base_model_path`` on instruction / input / output rows through LazyLLM →
    LLaMA-Factory, the lesson's code path, and check that it really trained.

    ``overrides`` go to :func:`llamafactory_config` (e.g. ``max_steps=30``, ``finetuning_type='lora'``);
    ``launcher="sco"|"slurm"|"remote"|"empty"`` and ``launcher_options={...}`` override the profile's
    launcher (:func:`launcher_settings`).
    Returns an :class:`SFTResult`; raises :class:`FinetuneError` (with the log's last lines) when
    LazyLLM reports success but no trained, merged model exists. Introduced in lesson 05.
    """
    t0 = time.time()
    P = resolve_profile(profile)
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    overrides, launcher = _split_launcher(P, overrides)
    cfg = llamafactory_config(P, **overrides)
    train_file, n = write_alpaca_json(train_rows, out_dir / "data" / "sft_train.json")
    base_path = resolve_base_model(base_model_path, P)
    if "default_system" not in overrides:
        cfg["default_system"] = template_default_system(base_path)
    target = out_dir / "target"
    os.environ.setdefault("OMP_NUM_THREADS", str(train_threads(P)))
    with _lazyllm_env(out_dir) as lazyllm:
        base = template_safe_path(base_path, out_dir / "models")
        module = (lazyllm.TrainableModule(str(base), str(target))
                  .mode("finetune")
                  .trainset(str(train_file))
                  .finetune_method((lazyllm.finetune.llamafactory, _finetune_kwargs(cfg, out_dir, launcher)))
                  .deploy_method(train_only_deploy()))
        started = time.time()
        try:
            module.update()
        finally:
            with contextlib.suppress(Exception):
                module.stop()
    run_dir = _latest_run(target, started)
    merge = run_dir.parent / "lazyllm_merge" if run_dir else None
    merged, curve, runtime, notes = verify_run(run_dir, merge, cfg["finetuning_type"])
    log = sorted(run_dir.glob("train_log_*.log"), key=lambda p: p.stat().st_mtime)[-1]
    notes.insert(0, f"{n} training rows; finetuning_type={cfg['finetuning_type']}")
    return SFTResult(merged, run_dir, log, curve, runtime, cfg, notes, time.time() - t0)


# --- before / after ------------------------------------------------------------------------------

def generate(model_path: str | os.PathLike, instructions: Sequence[str], *, max_new_tokens: int = 64,
             system: str | None = None, details: bool = False,
             answer_prefixes: Sequence[str | None] | None = None) -> list:
    """Greedy answers of a chat model (transformers ``generate`` on the chat template,
    :func:`course_lib.training.instructions.chat_prompt`), for before/after comparisons. With ``details`` each
    answer is ``{"text", "new_tokens", "stopped"}``: ``stopped`` is True when the model ended the
    answer itself (``<|im_end|>`` / ``<|endoftext|>``), False when it ran to ``max_new_tokens``.
    ``answer_prefixes``: per instruction, the start of the answer given to the model (e.g. the task's
    ``def`` line, HumanEval's protocol); it is part of the returned text. Introduced in lesson 05."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from course_lib.training.instructions import chat_prompt

    tok = AutoTokenizer.from_pretrained(str(model_path))
    model = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=torch.float32)
    model.eval()
    stop = [t for t in (tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>"),
                        tok.eos_token_id) if isinstance(t, int) and t >= 0]
    outs = []
    prefixes = list(answer_prefixes) if answer_prefixes is not None else [None] * len(instructions)
    for text, prefix in zip(instructions, prefixes):
        prompt = chat_prompt(tok, text, system=system) + (prefix or "")
        ids = tok(prompt, return_tensors="pt", add_special_tokens=False)
        with torch.no_grad():
            gen = model.generate(**ids, max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=stop,
                                 pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else stop[0])
        new = gen[0, ids["input_ids"].shape[1]:].tolist()
        answer = (prefix or "") + tok.decode(new, skip_special_tokens=True)
        if details:
            stopped = bool(new) and new[-1] in stop
            outs.append({"text": answer, "new_tokens": len(new) - int(stopped), "stopped": stopped})
        else:
            outs.append(answer)
    return outs
