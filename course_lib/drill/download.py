"""Step 1 of the drill — download: stream tiny-codes, keep Python, split into train and eval.

:func:`step_download` writes ``<data-dir>/train_python.json`` and ``eval_python.json``; the functions
above it read the rows and split them.

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

from course_lib.drill.config import DrillConfig, RunState, Step
from course_lib.drill.outputs import StepOutputError, log, sha_or_none, up_to_date, write_json_output
from course_lib.drill.taskgen import HUB_COLUMNS, load_hidden_tests

_HUB_DATASET = "nampdn-ai/tiny-codes"


class GatedDatasetError(RuntimeError):
    """The hub refused the download of a gated dataset."""


def _builder_for(files: list[str]) -> str:
    suffixes = {Path(f).suffix.lower() for f in files}
    if suffixes <= {".parquet"}:
        return "parquet"
    if suffixes <= {".json", ".jsonl"}:
        return "json"
    raise ValueError(f"local tiny-codes files must all be .parquet or all .json/.jsonl; got {sorted(suffixes)}")


def stream_tiny_codes(source: str = _HUB_DATASET, *, data_files: Iterable[str | Path] | None = None,
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


def _check_columns(row: dict[str, Any], where: str) -> None:
    """Raise a clear error when ``row`` lacks one of the hub's columns. Introduced in lesson 07."""
    missing = [c for c in HUB_COLUMNS if c not in row]
    if missing:
        raise ValueError(f"{where}: row without the tiny-codes column(s) {missing}; "
                         f"expected the hub's columns {list(HUB_COLUMNS)}")


def is_python(row: dict[str, Any]) -> bool:
    """The lesson's language filter: ``programming_language`` is Python. Introduced in lesson 07."""
    return str(row.get("programming_language") or "").strip().lower() in ("python", "python3")


LANGUAGE_LABELS: dict[str, tuple[str, ...]] = {"python": ("python", "python3"), "cpp": ("c++", "cpp")}
"""The ``programming_language`` values (lower-cased) step 1 keeps for each drill language (issue 38)."""


def is_language(row: dict[str, Any], language: str = "python") -> bool:
    """The language filter of the drill in ``language``: ``programming_language`` is one of
    :data:`LANGUAGE_LABELS` (``"C++"`` for ``cpp``). Introduced for issue 38."""
    if language == "python":
        return is_python(row)
    return str(row.get("programming_language") or "").strip().lower() in LANGUAGE_LABELS[language]


def _stable_key(idx: Any, seed: int) -> str:
    return hashlib.sha1(f"{seed}:{idx}".encode()).hexdigest()


def split_python_rows(rows: Iterable[dict[str, Any]], train_size: int, eval_size: int, *, seed: int = 0,
                      is_eval: Callable[[dict], bool] | None = None,
                      stats: dict[str, int] | None = None, language: str = "python") -> tuple[list[dict], list[dict]]:
    """Keep Python rows (the rows of ``language``: :func:`is_language`) and split them deterministically
    into (train, eval).

    Without ``is_eval`` (the hub): take the first ``train_size + eval_size`` Python rows of the stream
    and split them by a hash of ``idx`` (same rows, same split, whatever the order of arrival). With
    ``is_eval`` (the ci sample): rows it accepts form the eval pool, taken in equal shares from each
    value it returns (the eval parts: new instances, held-out combinations); the others the train pool.
    ``stats`` (if given) receives counts of seen/python/other rows (``cpp`` instead of ``python`` for C++).
    Introduced in lesson 07.
    """
    stats = stats if stats is not None else {}
    stats.update({"seen": 0, language: 0, "other_language": 0})
    train_pool, eval_pool = [], []
    need = train_size + eval_size
    for i, row in enumerate(rows):
        _check_columns(row, f"tiny-codes row {i}")
        stats["seen"] += 1
        if not is_language(row, language):
            stats["other_language"] += 1
            continue
        stats[language] += 1
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
    """Add ``tests``, ``entry_point`` and ``signature`` (the ``def`` line the hidden tests call), ``task``,
    and for eval rows ``eval_part`` and ``holdout_half`` (held-out rows: :data:`~course_lib.drill.taskgen.HOLDOUT_HALVES`)
    from the side file to rows that have them; returns how many."""
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
            if rec.get("holdout_half"):     # which half of the held-out combinations (taskgen.HOLDOUT_HALVES)
                row["holdout_half"] = rec["holdout_half"]
            n += 1
    return n


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


_LABEL = {"python": "Python", "cpp": "C++"}
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
    if not isinstance(tests, str):   # the C++ judge's cases: [argument, expected] pairs
        name = row.get("entry_point") or "f"
        tests = "".join(f"{name}({json.dumps(a)}) == {json.dumps(e)}\n" for a, e in tests)
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


# --- the step -------------------------------------------------------------------------------------

def _download_config(cfg: DrillConfig) -> dict:
    files = cfg.data_files if cfg.source != "hub" else None
    return {"source": cfg.source, "dataset": cfg.dataset if cfg.source == "hub" else None,
            "files": {Path(f).name: sha_or_none(f) for f in files} if files else None,
            "hidden_tests": sha_or_none(cfg.hidden_tests), "eval_split": sha_or_none(cfg.eval_split),
            "train_size": cfg.train_size,
            "eval_size": cfg.eval_size, "seed": cfg.seed,
            **({"language": cfg.language} if cfg.language != "python" else {})}


def step_download(cfg: DrillConfig, state: RunState | None = None) -> dict:
    """Step 1: stream tiny-codes, keep Python rows, write ``train_python.json`` and ``eval_python.json``
    (``state``: the run's :class:`~course_lib.drill.config.RunState`; this step notes nothing in it).

    Introduced in lesson 07.
    """
    p, conf = cfg.paths, _download_config(cfg)
    if up_to_date([p.train_json, p.eval_json], conf, cfg.force, "download"):
        return {"skipped": True}
    stream = stream_tiny_codes(cfg.dataset, data_files=cfg.data_files if cfg.source != "hub" else None)
    # the sample's split file, never the hidden tests: the training rows are the same without them
    is_eval = eval_split_predicate(cfg.eval_split) if cfg.eval_split else None
    stats: dict[str, int] = {}
    train, evals = split_python_rows(stream, cfg.train_size, cfg.eval_size, seed=cfg.seed,
                                     is_eval=is_eval, stats=stats, language=cfg.language)
    for r in evals if is_eval else []:
        r["eval_part"] = is_eval(r)
    n_tests = attach_hidden_tests(evals, cfg.hidden_tests)
    attach_hidden_tests(train, cfg.hidden_tests)   # for RL rewards (never given to the pipeline)
    if not train or not evals:
        raise StepOutputError(f"download: got {len(train)} train and {len(evals)} eval "
                              f"{_LABEL.get(cfg.language, cfg.language)} rows from {cfg.source}; check the data "
                              "files / dataset name")
    if stats.get("short"):
        log().warning("download: wanted %d train + %d eval rows, the source has %d + %d %s rows",
                      cfg.train_size, cfg.eval_size, len(train), len(evals), _LABEL.get(cfg.language, cfg.language))
    write_json_output(p.train_json, train, conf)
    write_json_output(p.eval_json, evals, conf)
    log().info("download: streamed %d rows, %d %s, %d other languages dropped → %d train, %d eval "
               "(%d eval rows carry hidden tests)", stats["seen"], stats[cfg.language], _LABEL.get(cfg.language, cfg.language),
               stats["other_language"], len(train), len(evals), n_tests)
    return {"train": len(train), "eval": len(evals), "with_tests": n_tests, **stats}


def _hf_token_file() -> bool:
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return os.path.exists(os.path.join(home, "token"))


def _check(cfg: DrillConfig, steps) -> list[str]:
    problems = []
    if cfg.source != "hub":
        for f in cfg.data_files or []:
            if not Path(f).exists():
                problems.append(f"tiny-codes file {f} not found (ci reads assets/tiny_codes/; regenerate it "
                                "with `python -m course_lib.drill.taskgen assets/tiny_codes`)")
        if cfg.eval_split and not Path(cfg.eval_split).exists():
            problems.append(f"eval split {cfg.eval_split} not found (regenerate it with "
                            "`python -m course_lib.drill.taskgen assets/tiny_codes`)")
        if not cfg.data_files:
            problems.append("no local data files given for the download step (--data-files)")
    elif not (os.environ.get("HF_TOKEN") or _hf_token_file()):
        log().warning("no HF_TOKEN: %s is gated on the hub; the download needs a token whose account "
                      "accepted its conditions (HF_TOKEN=hf_... or `huggingface-cli login`)", cfg.dataset)
    return problems


def _engine(cfg: DrillConfig) -> dict:
    out: dict[str, Any] = {"name": "datasets (streaming)", "source": cfg.source, "train_size": cfg.train_size,
                           "eval_size": cfg.eval_size, "seed": cfg.seed,
                           "hidden_tests": Path(cfg.hidden_tests).name if cfg.hidden_tests else None,
                           "eval_split": Path(cfg.eval_split).name if cfg.eval_split else None}
    if cfg.source == "hub":
        out["dataset"] = cfg.dataset
    else:
        out["files"] = [Path(f).name for f in cfg.data_files or []]
    if cfg.language != "python":
        out["language"] = cfg.language
    return out


STEP = Step("download", run=step_download, needs=lambda cfg: [], check=_check, engine=_engine)
