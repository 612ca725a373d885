"""Step 1 of the drill — download: stream tiny-codes, keep Python, split into train and eval.

full: ``nampdn-ai/tiny-codes`` streamed from the Hugging Face hub with ``datasets`` (gated: the hub wants a
token whose account accepted the dataset's conditions). ci: the *same code* streams the tiny-codes-shaped
sample in ``assets/tiny_codes/`` as local files (``datasets`` reads local json/jsonl/parquet with the same
streaming API), so nothing is downloaded.

Introduced in lesson 07.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from course_lib.drill.taskgen import HUB_COLUMNS, load_hidden_tests

HUB_DATASET = "nampdn-ai/tiny-codes"


class GatedDatasetError(RuntimeError):
    """The hub refused the download of a gated dataset."""


def _builder_for(files: list[str]) -> str:
    suffixes = {Path(f).suffix.lower() for f in files}
    if suffixes <= {".parquet"}:
        return "parquet"
    if suffixes <= {".json", ".jsonl"}:
        return "json"
    raise ValueError(f"local tiny-codes files must all be .parquet or all .json/.jsonl; got {sorted(suffixes)}")


def stream_tiny_codes(source: str = HUB_DATASET, *, data_files: Iterable[str | Path] | None = None,
                      token: str | None = None) -> Iterator[dict[str, Any]]:
    """Stream tiny-codes rows (dicts with the hub's columns) from the hub or from local files.

    ``source`` is a hub name (``nampdn-ai/tiny-codes``) or ``"local"`` with ``data_files``. A refused
    download of the gated hub dataset raises :class:`GatedDatasetError` saying what to do.
    Introduced in lesson 07.
    """
    import datasets

    if data_files is not None:
        files = [str(f) for f in data_files]
        missing = [f for f in files if not Path(f).exists()]
        if missing:
            raise FileNotFoundError(f"tiny-codes files not found: {missing}")
        ds = datasets.load_dataset(_builder_for(files), data_files=files, split="train", streaming=True)
    else:
        try:
            ds = datasets.load_dataset(source, split="train", streaming=True,
                                       token=token or os.environ.get("HF_TOKEN") or None)
        except Exception as exc:  # the hub raises several types for "gated / unauthorized"
            raise _explain_hub_error(source, exc) from exc
    it = iter(ds)
    while True:
        try:
            row = next(it)
        except StopIteration:
            return
        except Exception as exc:
            raise _explain_hub_error(source, exc) from exc
        yield row


def _explain_hub_error(source: str, exc: Exception) -> Exception:
    text = f"{type(exc).__name__}: {exc}"
    low = text.lower()
    if any(k in low for k in ("gated", "401", "403", "unauthorized", "forbidden", "authenticat",
                              "must be authenticated", "access to dataset")):
        return GatedDatasetError(
            f"the hub refused {source!r}: it is a gated dataset. Log in with a Hugging Face token whose "
            f"account accepted the dataset's conditions on https://huggingface.co/datasets/{source} — "
            f"set HF_TOKEN=hf_... (or run `huggingface-cli login`) and rerun. ({text[:300]})")
    if any(k in low for k in ("connection", "resolve", "offline", "timed out", "network")):
        return ConnectionError(f"could not reach the Hugging Face hub for {source!r} ({text[:300]}); the full "
                               f"profile needs internet; the ci profile reads assets/tiny_codes/ instead")
    return exc


def check_columns(row: dict[str, Any], where: str) -> None:
    """Raise a clear error when ``row`` lacks one of the hub's columns. Introduced in lesson 07."""
    missing = [c for c in HUB_COLUMNS if c not in row]
    if missing:
        raise ValueError(f"{where}: row without the tiny-codes column(s) {missing}; "
                         f"expected the hub's columns {list(HUB_COLUMNS)}")


def is_python(row: dict[str, Any]) -> bool:
    """The lesson's language filter: ``programming_language`` is Python. Introduced in lesson 07."""
    return str(row.get("programming_language") or "").strip().lower() in ("python", "python3")


def _stable_key(idx: Any, seed: int) -> str:
    return hashlib.sha1(f"{seed}:{idx}".encode()).hexdigest()


def split_python_rows(rows: Iterable[dict[str, Any]], train_size: int, eval_size: int, *, seed: int = 0,
                      is_eval: Callable[[dict], bool] | None = None,
                      stats: dict[str, int] | None = None) -> tuple[list[dict], list[dict]]:
    """Keep Python rows and split them deterministically into (train, eval).

    Without ``is_eval`` (the hub): take the first ``train_size + eval_size`` Python rows of the stream
    and split them by a hash of ``idx`` (same rows, same split, whatever the order of arrival). With
    ``is_eval`` (the ci sample): rows it accepts form the eval pool, taken in equal shares from each
    value it returns (the eval parts: new instances, held-out combinations); the others the train pool.
    ``stats`` (if given) receives counts of seen/python/other rows.
    Introduced in lesson 07.
    """
    stats = stats if stats is not None else {}
    stats.update(seen=0, python=0, other_language=0)
    train_pool, eval_pool = [], []
    need = train_size + eval_size
    for i, row in enumerate(rows):
        check_columns(row, f"tiny-codes row {i}")
        stats["seen"] += 1
        if not is_python(row):
            stats["other_language"] += 1
            continue
        stats["python"] += 1
        row = {c: row[c] for c in HUB_COLUMNS} | {k: v for k, v in row.items() if k not in HUB_COLUMNS}
        if is_eval is None:
            train_pool.append(row)
            if len(train_pool) >= need:
                break
        else:
            (eval_pool if is_eval(row) else train_pool).append(row)
    if is_eval is None:
        ordered = sorted(train_pool, key=lambda r: _stable_key(r["idx"], seed))
        eval_rows, train_rows = ordered[:eval_size], ordered[eval_size:need]
    else:
        rng = random.Random(seed)
        train_pool.sort(key=lambda r: int(r["idx"]))
        eval_pool.sort(key=lambda r: int(r["idx"]))
        rng.shuffle(train_pool)
        rng.shuffle(eval_pool)
        train_rows, eval_rows = train_pool[:train_size], _balanced(eval_pool, eval_size, is_eval)
    if len(train_rows) < train_size or len(eval_rows) < eval_size:
        stats["short"] = 1
    return train_rows, sorted(eval_rows, key=lambda r: int(r["idx"]))


def _balanced(pool: list[dict], size: int, part_of: Callable[[dict], Any]) -> list[dict]:
    """``size`` rows of ``pool`` taken in turn from each eval part (equal parts while each lasts)."""
    parts: dict[str, list[dict]] = {}
    for row in pool:
        parts.setdefault(str(part_of(row)), []).append(row)
    out: list[dict] = []
    queues = [list(reversed(v)) for _, v in sorted(parts.items())]
    while len(out) < size and any(queues):
        for q in queues:
            if q and len(out) < size:
                out.append(q.pop())
    return out


def attach_hidden_tests(rows: list[dict], tests_path: str | Path | None) -> int:
    """Add ``tests``, ``entry_point`` and ``signature`` (the ``def`` line the hidden tests call) from the
    side file to rows that have them; returns how many."""
    if not tests_path or not Path(tests_path).exists():
        return 0
    tests = load_hidden_tests(tests_path)
    n = 0
    for row in rows:
        rec = tests.get(int(row["idx"]))
        if rec:
            row["tests"], row["entry_point"] = rec["tests"], rec["entry_point"]
            if rec.get("signature"):
                row["signature"] = rec["signature"]
            row["task"] = f"{rec['family']}/{rec['operation']}/{rec['filter']}"
            if rec.get("eval_part"):
                row["eval_part"] = rec["eval_part"]
            n += 1
    return n


def holdout_predicate(tests_path: str | Path) -> Callable[[dict], str | bool]:
    """``is_eval`` for :func:`split_python_rows`: a row's eval part ("new instances", "held-out
    combinations") when its hidden-test record says ``holdout``, else False (a training row)."""
    tests = load_hidden_tests(tests_path)

    def is_eval(row: dict) -> str | bool:
        rec = tests.get(int(row["idx"]), {})
        return (rec.get("eval_part") or "held-out combinations") if rec.get("holdout") else False
    return is_eval


def eval_split_predicate(split_path: str | Path) -> Callable[[dict], str | bool]:
    """``is_eval`` for :func:`split_python_rows` from a sample's ``eval_split.json`` (``{part: [idx, ...]}``):
    a row's eval part, or False for a training row. The split never depends on the hidden tests, so
    the training rows (and the pipeline's output) are the same with or without them. Introduced in lesson 07."""
    try:
        parts = json.loads(Path(split_path).read_text(encoding="utf-8"))
        where = {int(i): part for part, ids in parts.items() for i in ids}
    except (OSError, ValueError, AttributeError, TypeError) as exc:
        raise ValueError(f"{split_path}: not an eval split ({exc}); regenerate it with "
                         "`python -m course_lib.drill.taskgen assets/tiny_codes`") from None

    def is_eval(row: dict) -> str | bool:
        return where.get(int(row["idx"]), False)
    return is_eval


HIDDEN_TEST_KEYS = ("tests", "entry_point", "signature", "task")


def without_hidden_tests(row: dict) -> dict:
    """``row`` without what :func:`attach_hidden_tests` added (what the drill's pipeline gets: the
    teacher must never see a hidden test). Introduced in lesson 07."""
    return {k: v for k, v in row.items() if k not in HIDDEN_TEST_KEYS}


NO_HIDDEN_TESTS = "no hidden tests (hub rows carry none; the course's hidden tests exist only for the ci sample)"


def hidden_tests_text(row: dict[str, Any]) -> str:
    """The hidden tests of an eval row, for display: ``HIDDEN TESTS (<task>):`` and the assert lines, or
    :data:`NO_HIDDEN_TESTS` for a row without them (every hub row). Introduced in lesson 07."""
    tests = row.get("tests")
    if not tests:
        return NO_HIDDEN_TESTS
    task = row.get("task")
    return f"HIDDEN TESTS ({task}):\n{tests}" if task else f"HIDDEN TESTS:\n{tests}"


def defect_labels(rows: Iterable[dict[str, Any]], tests_path: str | Path | None) -> list[str]:
    """Per training row, the simulated defect its hidden-test record names, ``"(clean)"`` for a record
    without one, and ``"(no record: hub row)"`` for a row the side file does not know (every hub row, or
    all rows when there is no side file). Introduced in lesson 07."""
    tests = load_hidden_tests(tests_path) if tests_path and Path(tests_path).exists() else {}
    out = []
    for row in rows:
        rec = tests.get(int(row["idx"])) if str(row.get("idx", "")).lstrip("-").isdigit() else None
        out.append("(no record: hub row)" if rec is None else (rec.get("defect") or "(clean)"))
    return out
