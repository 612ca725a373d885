"""The drill's output files: where they live, how they are written, and how a step knows one is whole.

Every step output is written atomically (a temporary file in the same folder, then ``os.replace``), and
then a *completion marker* ``<file>.done.json`` records its SHA-256, its size, how many records it holds
and the configuration that made it. A step counts as done only when the marker exists, the hash matches
and the configuration is the same; a half-written, edited or truncated file is reported and redone, never
trusted. A killed run leaves at most a ``*.tmp`` file, which the next run ignores and overwrites.

The drill keeps these per-file markers rather than :func:`course_lib.store.get_or_build` folders: each
step writes one JSON/CSV file under the lesson's fixed name in folders the user picks (``--data-dir``
...), steps are resumed one by one, and a stale marker names the settings that changed. The writing and
hashing are the shared store's primitives: :func:`course_lib.store.atomic_write_text` and
:func:`course_lib.store.sha256_file`.

Introduced in lesson 07.
"""
from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from course_lib.store import atomic_write_text, sha256_file

__all__ = ["DrillPaths", "StepOutputError", "atomic_write_text", "check_weights", "clear_done", "has_weights",
           "log", "mark_done", "output_state", "read_json_output", "read_per_prompt", "setup_logging", "sha256_file",
           "sha_or_none", "up_to_date", "write_json_output", "write_per_prompt"]

_LOGGER_NAME = "course_lib.drill"


class StepOutputError(RuntimeError):
    """A step output is missing, corrupted or was made with another configuration."""


@dataclass
class DrillPaths:
    """The folders of one drill run (the lesson's ``--data-dir --model-dir --output-dir --log-dir``)."""

    data_dir: Path
    model_dir: Path
    output_dir: Path
    log_dir: Path
    # the drill's language (issue 38): the data files are train_<language>.json / eval_<language>.json
    language: str = "python"

    @classmethod
    def under(cls, root: str | Path, *, language: str = "python", **overrides: str | Path | None) -> "DrillPaths":
        root = Path(root)
        dirs = {"data_dir": root / "data", "model_dir": root / "models",
                "output_dir": root / "output", "log_dir": root / "logs"}
        dirs.update({k: Path(v) for k, v in overrides.items() if v})
        return cls(**dirs, language=language)

    def make(self) -> "DrillPaths":
        for p in (self.data_dir, self.model_dir, self.output_dir, self.log_dir):
            p.mkdir(parents=True, exist_ok=True)
        return self

    # the lesson's file names
    @property
    def train_json(self) -> Path:
        return self.data_dir / f"train_{self.language}.json"

    @property
    def eval_json(self) -> Path:
        return self.data_dir / f"eval_{self.language}.json"

    @property
    def codegen_json(self) -> Path:
        return self.data_dir / "codegen.json"

    def ablation_json(self, variant: str) -> Path:
        """``<data-dir>/ablation_<variant>.json``: the training set of an ablation (step 2 writes it)."""
        return self.data_dir / f"ablation_{variant}.json"

    def ablation_report(self, variant: str) -> Path:
        """``<data-dir>/ablation_<variant>_report.json``: what building that training set kept and removed."""
        return self.data_dir / f"ablation_{variant}_report.json"

    def model_for(self, variant: str) -> Path:
        return self.model_dir / variant

    def output_for(self, variant: str) -> Path:
        return self.output_dir / variant

    def model_record(self, variant: str) -> Path:
        """``<model-dir>/<variant>/sft_result.json``: the record a training step writes for a variant it
        trained (``model_path``, ``base_model``, ``rows``, ``loss_history``); step 4 finds the model there."""
        return self.model_for(variant) / "sft_result.json"


def sha_or_none(path: str | Path | None) -> str | None:
    """The SHA-256 of ``path``, or None when there is no such file (a step's input fingerprint)."""
    return sha256_file(path) if path and Path(path).exists() else None


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".done.json")


def mark_done(path: str | Path, config: dict[str, Any], count: int | None = None) -> None:
    """Write the completion marker of ``path`` (after the output itself was written)."""
    path = Path(path)
    info = {"file": path.name, "sha256": sha256_file(path), "bytes": path.stat().st_size,
            "count": count, "config": config, "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}
    atomic_write_text(_marker(path), json.dumps(info, indent=1, sort_keys=True, default=str))


def clear_done(path: str | Path) -> None:
    """Remove the completion marker of ``path``: the file no longer counts as a finished output."""
    _marker(Path(path)).unlink(missing_ok=True)


def write_json_output(path: str | Path, records: Any, config: dict[str, Any]) -> Path:
    """Atomically write a step's JSON output and then its completion marker. Introduced in lesson 07."""
    path = Path(path)
    atomic_write_text(path, json.dumps(records, ensure_ascii=False, indent=1))
    mark_done(path, config, len(records) if hasattr(records, "__len__") else None)
    return path


def _read_marker(marker: Path) -> tuple[dict | None, str]:
    """The marker's record, or None and why it cannot be used (then the step is redone)."""
    try:
        info = json.loads(marker.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None, f"{marker.name} is not valid JSON (corrupted): the step is redone"
    if not isinstance(info, dict) or not isinstance(info.get("sha256"), str):
        return None, f"{marker.name} is malformed (holds {type(info).__name__}, not a marker record): the step is redone"
    return info, "ok"


def _changed_keys(old: Any, new: dict) -> list[str]:
    if not isinstance(old, dict):
        return sorted(new)
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


def output_state(path: str | Path, config: dict[str, Any] | None = None) -> tuple[bool, str]:
    """``(done, why)``: is ``path`` a whole output of a finished step made with ``config``?

    ``why`` says what is wrong: missing; no completion marker (partial or killed run); a marker that is
    not JSON or not a marker record (``[]``, ``null``); hash differs (corrupted or edited); or made with
    another configuration, naming the settings or upstream outputs that changed. Any of these means
    "redo this step". Introduced in lesson 07.
    """
    path = Path(path)
    if not path.exists():
        return False, f"{path.name} is missing"
    marker = _marker(path)
    if not marker.exists():
        return False, f"{path.name} has no completion marker (a killed or partial run wrote it)"
    info, why = _read_marker(marker)
    if info is None:
        return False, why
    if info["sha256"] != sha256_file(path):
        return False, f"{path.name} differs from what its step wrote (corrupted, truncated or edited)"
    if config is not None:
        new = json.loads(json.dumps(config, default=str))
        if new != info.get("config"):
            changed = _changed_keys(info.get("config"), new)
            return False, (f"{path.name} was made from other inputs or settings (changed: "
                           f"{', '.join(changed)})")
    return True, "ok"


def up_to_date(paths: Iterable[str | Path], config: dict[str, Any], force: bool, what: str) -> bool:
    """True (and logged) when every output in ``paths`` is whole and made with ``config``; otherwise
    logs why the step ``what`` is (re)built — e.g. an upstream output changed — and returns False."""
    paths = [Path(p) for p in paths]
    if force:
        log().info("%s: --force given, redoing the step", what)
        return False
    states = [output_state(p, config) for p in paths]
    if all(ok for ok, _ in states):
        log().info("%s: %s up to date, skipping (use --force to redo)", what,
                   ", ".join(p.name for p in paths))
        return True
    existing = [why for p, (ok, why) in zip(paths, states) if not ok and p.exists()]
    if existing:
        log().warning("%s: rebuilding: %s", what, "; ".join(existing))
    return False


def has_weights(model_path: str | Path) -> bool:
    """True when ``model_path`` holds a config and weights (``*.safetensors`` or ``*.bin``)."""
    p = Path(model_path)
    return (p / "config.json").exists() and (any(p.glob("*.safetensors")) or any(p.glob("*.bin")))


def check_weights(model_path: str | Path, what_to_do: str) -> None:
    """Raise :class:`StepOutputError` naming the file when a ``*.safetensors`` file under ``model_path``
    is shorter than its own header says (a truncated copy or an interrupted save), with ``what_to_do``.

    Introduced in lesson 07.
    """
    import struct

    for f in sorted(Path(model_path).glob("*.safetensors")):
        size = f.stat().st_size
        problem = None
        try:
            with open(f, "rb") as fh:
                head = fh.read(8)
                if len(head) < 8:
                    problem = f"{size} bytes, too short for a safetensors header"
                else:
                    (n,) = struct.unpack("<Q", head)
                    if 8 + n > size:
                        problem = f"header of {n} bytes but the file has {size}"
                    else:
                        header = json.loads(fh.read(n))
                        end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"),
                                  default=0)
                        if 8 + n + end > size:
                            problem = f"{size} bytes, its header needs {8 + n + end}"
        except (ValueError, KeyError, TypeError, OSError) as exc:
            problem = f"unreadable header ({exc})"
        if problem:
            raise StepOutputError(f"model weights {f.name} in {Path(model_path).name}/ are truncated or "
                                  f"corrupted ({problem}); {what_to_do}")


def read_json_output(path: str | Path, step: str) -> Any:
    """Read a finished step's JSON output, or raise :class:`StepOutputError` naming the step to run."""
    ok, why = output_state(path)
    if not ok:
        raise StepOutputError(f"{why}; run the {step!r} step first (`python -m course_lib.drill "
                              f"--only-step {step}`, add --force to redo it)")
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as exc:
        raise StepOutputError(f"{path} is not valid JSON ({exc}); rerun the {step!r} step with --force") from None


PER_PROMPT_FILE = "per_prompt.jsonl"      # step 5's per-prompt outcomes in each variant's output folder


def write_per_prompt(records: Sequence[dict], path: str | Path, config: dict | None = None) -> Path:
    """Write per-prompt records (:func:`course_lib.drill.evaluate.per_prompt_outcomes`) as JSON lines
    (atomically; with a completion marker when ``config`` is given). Introduced in lesson 07."""
    path = Path(path)
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records))
    if config is not None:
        mark_done(path, config, len(records))
    return path


def read_per_prompt(path: str | Path) -> list[dict]:
    """Read a ``per_prompt.jsonl`` (:func:`write_per_prompt`), naming the line of a broken record.
    Introduced in lesson 07."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                rec["id"], rec["passed"]
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}, line {lineno}: not a per-prompt record ({exc}); rerun step 5 "
                                 "(`python -m course_lib.drill --only-step evaluation --force`)") from None
            out.append(rec)
    return out


def setup_logging(log_dir: str | Path, *, quiet: bool = False) -> Path:
    """Log the drill to ``log_dir/drill_YYYYmmdd_HHMMSS.log`` (and the console) with timestamps."""
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / time.strftime("drill_%Y%m%d_%H%M%S.log")
    logger = logging.getLogger(_LOGGER_NAME)
    for h in list(logger.handlers):
        logger.removeHandler(h)
        h.close()
    logger.setLevel(logging.INFO)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%Y-%m-%d %H:%M:%S")
    fh = logging.FileHandler(path, encoding="utf-8")
    fh.setFormatter(fmt)
    logger.addHandler(fh)
    if not quiet:
        sh = logging.StreamHandler(sys.stdout)
        sh.setFormatter(fmt)
        logger.addHandler(sh)
    logger.propagate = False
    return path


def log() -> logging.Logger:
    return logging.getLogger(_LOGGER_NAME)

