"""A real model under the judge: sample n answers per prompt, cache them, run them in the sandbox.

Lesson 06 judges canonical solutions, stubs and a mutated candidate pool; this module puts a real
pretrained LLM (:mod:`course_lib.training.pretrained`: SmolLM2-135M-Instruct in ci) in front of the same
judge. Three steps, each a function:

1. :func:`sample_answers` — n answers per chat prompt from one model, greedy (n = 1, T = 0) or sampled
   (temperature, top-p, one seed per sample), written by transformers ``generate`` in this process or by a
   vLLM engine in ``.venv-vllm`` (:func:`course_lib.evaluation.vllm_engine.generate_offline`). The prompts are
   encoded once by the course (chat template + an optional answer prefix such as a function's signature),
   so both engines read the same token ids. The answers are cached in ``<course cache>/samples/`` under a key
   made of the model's fingerprint, the prompts and every setting: a re-run reads them back at once, and the
   run records how long generation took, how many tokens it wrote and the machine's load.
2. :func:`humaneval_tasks` / :func:`drill_tasks` — what the model is asked and how its answer becomes a
   program: the HumanEval prompt with its signature and docstring given (the model writes the body), or a
   drill row's instruction answered freely (or with the task's ``def`` line given, lesson 07's protocol); visible
   tests (HumanEval's docstring examples; a drill task's first assert) for a verifier, hidden tests for the
   verdict.
3. :func:`judge` — every sample run in the sandbox twice (visible and hidden tests); one row per sample with
   its status (passed, failed = wrong answer, syntax_error, runtime_error, timeout, ...).

Nothing here fakes an answer: with no model or no engine, the functions raise and say why.

Introduced in lesson 06.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from course_lib import store
from course_lib.paths import cache_dir

ENGINES = ("transformers", "vllm")


@dataclass
class SampleRun:
    """What :func:`sample_answers` returns: ``answers[i][j]`` is sample j of prompt i (a dict with
    ``response`` — the answer prefix included —, ``new_tokens``, ``finished``), plus how it was made."""

    answers: list[list[dict[str, Any]]]
    settings: dict[str, Any]
    engine: dict[str, Any]
    seconds: float                 # generation wall time of the run that wrote the answers (load included)
    tokens: int                    # new tokens written
    cached: bool                   # True when read back from the cache
    path: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    def summary(self) -> str:
        """One line: engine, samples, tokens, seconds, tokens/s, the load it ran under, cached or not."""
        n = sum(len(a) for a in self.answers)
        load = self.engine.get("loadavg_1min")
        return (f"{n} samples ({len(self.answers)} prompts x {self.settings['n']}) by {self.engine.get('engine')}: "
                f"{self.tokens} tokens in {self.seconds:.1f} s = {self.tokens_per_s:.1f} tokens/s"
                + (f" (load average {load:.1f} on {os.cpu_count()} cores)" if load is not None else "")
                + ("; read back from the cache" if self.cached else ""))


def _cache_key(model_fp: str, prompts: Sequence[str], prefixes: Sequence[str | None], settings: dict) -> str:
    blob = json.dumps({"model": model_fp, "prompts": list(prompts), "prefixes": list(prefixes),
                       "settings": settings}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def _sample_transformers(model_path: str | Path, prompt_ids: list[list[int]], *, n: int, temperature: float,
                         top_p: float, max_new_tokens: int, seed: int, threads: int, batch_size: int,
                         progress: bool) -> tuple[list[list[list[int]]], dict]:
    """Generated ids per prompt and sample with transformers in this process (float32, left padding)."""
    import torch
    from tqdm.auto import tqdm
    from transformers import GenerationConfig

    from course_lib.evaluation.generation import load_model, stop_token_ids

    tok, model = load_model(model_path, threads=threads)
    stop = stop_token_ids(tok)
    pad = tok.pad_token_id if tok.pad_token_id is not None else stop[0]
    sample = temperature > 0
    gen_cfg = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=sample, eos_token_id=stop, pad_token_id=pad,
                               num_return_sequences=n, **({"temperature": temperature, "top_p": top_p, "top_k": 0}
                                                          if sample else {}))
    per_batch = max(1, batch_size // n)
    order = sorted(range(len(prompt_ids)), key=lambda i: len(prompt_ids[i]))
    out: list[list[list[int]] | None] = [None] * len(prompt_ids)
    bar = tqdm(total=len(order) * n, desc="sample", disable=not progress, leave=False)
    for start in range(0, len(order), per_batch):
        chunk = order[start:start + per_batch]
        width = max(len(prompt_ids[i]) for i in chunk)
        input_ids = torch.tensor([[pad] * (width - len(prompt_ids[i])) + list(prompt_ids[i]) for i in chunk])
        attn = torch.tensor([[0] * (width - len(prompt_ids[i])) + [1] * len(prompt_ids[i]) for i in chunk])
        torch.manual_seed(seed + start)
        with torch.no_grad():
            gen = model.generate(input_ids=input_ids, attention_mask=attn, generation_config=gen_cfg)
        rows = gen[:, width:].tolist()
        for k, i in enumerate(chunk):
            out[i] = rows[k * n:(k + 1) * n]
        bar.update(len(chunk) * n)
    bar.close()
    import transformers

    return out, {"engine": "transformers", "version": transformers.__version__, "threads": threads,
                 "batch_size": per_batch * n}   # type: ignore[return-value]


def _sample_vllm(model_path: str | Path, prompt_ids: list[list[int]], *, n: int, temperature: float, top_p: float,
                 max_new_tokens: int, seed: int, stop: list[int], profile: Any, timeout_s: float
                 ) -> tuple[list[list[list[int]]], dict]:
    """Generated ids per prompt and sample from one vLLM engine in a child process (``.venv-vllm``)."""
    from course_lib.evaluation.vllm_engine import generate_offline, knobs_from_profile

    knobs = knobs_from_profile(profile, response_max_tokens=max_new_tokens)
    flat = [ids for ids in prompt_ids for _ in range(n)]
    sampling = ({"temperature": temperature, "top_p": top_p,
                 "seeds": [seed * 100_003 + i for i in range(len(flat))]} if temperature > 0 else None)
    res = generate_offline(model_path, flat, knobs, stop_token_ids=stop, timeout_s=timeout_s, sampling=sampling)
    ids = [a["token_ids"] for a in res["answers"]]
    eng = res["engine"]
    return ([ids[i * n:(i + 1) * n] for i in range(len(prompt_ids))],
            {"engine": "vllm", "version": eng.get("version"), "dtype": eng["engine_args"].get("dtype"),
             "vllm_seconds": eng.get("seconds"), "max_num_seqs": eng["engine_args"].get("max_num_seqs")})


def sample_answers(model: str | Path, prompts: Sequence[str], *, n: int = 1, temperature: float = 0.0,
                   top_p: float = 1.0, max_new_tokens: int = 128, answer_prefixes: Sequence[str | None] | None = None,
                   engine: str = "transformers", threads: int = 2, seed: int = 0, batch_size: int = 40,
                   profile: Any = "ci", timeout_s: float = 1800, name: str = "samples", cache: bool = True,
                   progress: bool = True, log: Callable[[str], None] | None = print) -> SampleRun:
    """``n`` answers of ``model`` (a Hugging Face folder) to each chat prompt, from the cache when this
    model (its fingerprint), these prompts and these settings were sampled before.

    ``answer_prefixes[i]`` (optional): the start of answer i, given after the chat prompt (a signature) and
    kept at the front of each ``response``. ``temperature`` 0 is greedy decoding (then ``n`` must be 1).
    ``engine``: ``"transformers"`` (this process, ``threads`` CPU threads, ``batch_size`` sequences per
    ``generate`` call) or ``"vllm"`` (``.venv-vllm``, the profile's ``drill.vllm_*`` knobs, float32 in ci);
    a vLLM engine that cannot run raises :class:`course_lib.evaluation.vllm_engine.VLLMUnavailable` with the reason.
    Each answer stops at the chat template's end-of-turn token or after ``max_new_tokens``.
    Introduced in lesson 06."""
    from course_lib.evaluation.generation import decode_answer, encode_prompts, load_tokenizer, stop_token_ids
    from course_lib.training.pretrained import model_fingerprint

    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; use one of {ENGINES}")
    if temperature <= 0 and n != 1:
        raise ValueError("greedy decoding (temperature 0) gives the same answer n times: sample with temperature > 0")
    prefixes = list(answer_prefixes) if answer_prefixes is not None else [None] * len(prompts)
    if len(prefixes) != len(prompts):
        raise ValueError(f"{len(prompts)} prompts but {len(prefixes)} answer prefixes")
    settings = {"n": n, "temperature": temperature, "top_p": top_p if temperature > 0 else 1.0,
                "max_new_tokens": max_new_tokens, "seed": seed, "engine": engine}
    key = _cache_key(model_fingerprint(model), prompts, prefixes, settings)
    path = cache_dir("samples") / f"{name}-{key}.json"
    if cache and path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        return SampleRun(data["answers"], data["settings"], data["engine"], data["seconds"], data["tokens"],
                         cached=True, path=path)

    tok = load_tokenizer(model)
    stop = stop_token_ids(tok)
    ids, _ = encode_prompts(tok, prompts, 4096, prefixes)
    t0 = time.monotonic()
    if engine == "transformers":
        gen, eng = _sample_transformers(model, ids, n=n, temperature=temperature, top_p=top_p,
                                        max_new_tokens=max_new_tokens, seed=seed, threads=threads,
                                        batch_size=batch_size, progress=progress)
    else:
        gen, eng = _sample_vllm(model, ids, n=n, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
                                seed=seed, stop=stop, profile=profile, timeout_s=timeout_s)
    seconds = time.monotonic() - t0
    answers = []
    for prefix, samples in zip(prefixes, gen):
        row = []
        for g in samples:
            a = decode_answer(tok, g, stop)
            if prefix:
                a["response"] = prefix + a["response"]
            row.append(a)
        answers.append(row)
    tokens = sum(a["new_tokens"] for row in answers for a in row)
    eng["loadavg_1min"] = round(os.getloadavg()[0], 2)
    eng["cpu_count"] = os.cpu_count()
    run = SampleRun(answers, settings, eng, round(seconds, 2), tokens, cached=False, path=path if cache else None)
    if cache:
        store.atomic_write_text(path, json.dumps({"answers": answers, "settings": settings, "engine": eng,
                                                  "seconds": run.seconds, "tokens": tokens,
                                                  "model": str(model)}, ensure_ascii=False))
    if log is not None:
        log(run.summary())
    return run


# --- tasks: what the model is asked, how its answer becomes a program -------------------------------

@dataclass(frozen=True)
class Task:
    """One prompt for the model and the two test sets its program is judged with."""

    task_id: str
    prompt: str                    # the user message (chat-formatted by the model's template)
    prefix: str                    # the start of the answer that is given (```python + the signature ...)
    visible_tests: list[str]       # what a verifier may use (best-of-n picks with these)
    hidden_tests: str | list[str]  # the verdict
    entry_point: str
    imports: str = ""              # lines a program needs that the model's answer may drop (HumanEval's typing)


HUMANEVAL_REQUEST = "Complete the following Python function. Answer with the whole function in a ```python code block."
"""The user message of a HumanEval task; the function itself starts the answer (it is not repeated here, which
would double the tokens the model reads)."""


def humaneval_tasks(problems: Sequence[dict]) -> list[Task]:
    """HumanEval problems as tasks: :data:`HUMANEVAL_REQUEST` as the user message, the answer started with
    ```` ```python ```` + the problem's prompt (signature and docstring: the model writes the body, HumanEval's
    own protocol), visible tests = the docstring's examples, hidden tests = ``check(entry_point)``.
    Introduced in lesson 06."""
    from course_lib.evaluation import humaneval

    return [Task(p["task_id"], HUMANEVAL_REQUEST, "```python\n" + p["prompt"],
                 humaneval.visible_tests(p), humaneval.hidden_tests(p), p["entry_point"],
                 "\n".join(ln for ln in p["prompt"].splitlines() if ln.startswith(("import ", "from "))))
            for p in problems]


def drill_tasks(rows: Sequence[dict], *, signature_given: bool = False) -> list[Task]:
    """Rows of the drill's sample with hidden tests (:func:`course_lib.training.sft_demo.load_task_rows`) as
    tasks: the row's instruction (it names the function), the free answer (``signature_given``: the answer
    started with ```` ```python ```` + the task's ``def`` line, test pass@1's protocol — a small instruct model
    often restarts the function in a new block instead of continuing the line, and the joined blocks are a
    syntax error), visible tests = the first assert, hidden tests = all of them. Introduced in lesson 06."""
    out = []
    for r in rows:
        tests = [t for t in r["tests"].splitlines() if t.strip()]
        prefix = "```python\n" + r["signature"] + "\n" if signature_given else ""
        out.append(Task(f"drill/{r['idx']}", r["prompt"], prefix, tests[:1], tests, r["entry_point"]))
    return out


def judge_tasks(profile: Any = "ci", seed: int = 0) -> list[Task]:
    """Lesson 06's tasks for the real model: the ``models.judge_humaneval_problems`` HumanEval problems with
    the shortest canonical solutions (the model is small; signature and docstring given), then
    ``models.judge_drill_tasks`` of the drill's eval rows ("new instances", seeded order; free answers).
    Introduced in lesson 06."""
    from course_lib.evaluation import humaneval
    from course_lib.profiles import resolve_profile
    from course_lib.training.sft_demo import load_task_rows

    M = resolve_profile(profile).models
    problems = sorted(humaneval.load_humaneval(), key=lambda p: (len(p["canonical_solution"]), p["task_id"]))
    return (humaneval_tasks(problems[: M.judge_humaneval_problems])
            + drill_tasks(load_task_rows("eval", M.judge_drill_tasks, seed=seed)))


def program_of(task: Task, response: str) -> str | None:
    """The program an answer makes: its Python code (:func:`course_lib.evaluation.extract.extract_code`; an
    unclosed fence counts), with the task's imports; None when the answer has no code. Introduced in lesson 06."""
    from course_lib.evaluation.extract import extract_code

    code = extract_code(response)
    if code is None:
        return None
    return (task.imports + "\n" + code) if task.imports else code


def judge(tasks: Sequence[Task], run: SampleRun, *, backend: str | None = None, workers: int = 8,
          timeout_s: float = 2.0) -> list[dict[str, Any]]:
    """Every sample of ``run`` (one list per task) run in the sandbox against its task's visible and hidden
    tests: one row per sample with ``task_id``, ``sample``, ``status`` (hidden tests: passed, failed — a
    wrong answer —, syntax_error, runtime_error, timeout, ...; ``no_code`` when the answer holds no code),
    ``passed``, ``visible_ok``, ``new_tokens``, ``finished`` and the ``program``. Introduced in lesson 06."""
    from course_lib.evaluation.sandbox import run_many

    if len(tasks) != len(run.answers):
        raise ValueError(f"{len(tasks)} tasks but answers to {len(run.answers)} prompts")
    rows, items_v, items_h, at = [], [], [], []
    for t, samples in zip(tasks, run.answers):
        for j, a in enumerate(samples):
            prog = program_of(t, a["response"])
            rows.append({"task_id": t.task_id, "sample": j, "status": "no_code", "passed": False, "visible_ok": False,
                         "new_tokens": a["new_tokens"], "finished": a["finished"], "program": prog})
            if prog is not None:
                at.append(len(rows) - 1)
                items_v.append({"code": prog, "tests": t.visible_tests, "timeout_s": timeout_s})
                items_h.append({"code": prog, "tests": t.hidden_tests, "timeout_s": timeout_s})
    res_v = run_many(items_v, backend=backend, workers=workers, progress=False) if items_v else []
    res_h = run_many(items_h, backend=backend, workers=workers, progress=False) if items_h else []
    for i, rv, rh in zip(at, res_v, res_h):
        rows[i].update(status=rh.status, passed=bool(rh.passed), visible_ok=bool(rv.passed))
    return rows


def best_of_n(rows: Sequence[dict], n: int) -> dict[str, float]:
    """From judged samples (:func:`judge`, at least ``n`` per task): the hidden pass rate of the first sample
    (``single``), of the first of ``n`` samples that passes the visible tests (``verified``: best-of-n with the
    sandbox as verifier; the first sample when none does) and of "any of n passes" (``oracle``, = pass@n
    from these n). Introduced in lesson 06."""
    by_task: dict[str, list[dict]] = {}
    for r in rows:
        by_task.setdefault(r["task_id"], []).append(r)
    single = verified = oracle = 0
    for samples in by_task.values():
        samples = sorted(samples, key=lambda r: r["sample"])[:n]
        if len(samples) < n:
            raise ValueError(f"best-of-{n} needs {n} samples per task; {samples[0]['task_id']} has {len(samples)}")
        pick = next((s for s in samples if s["visible_ok"]), samples[0])
        single += samples[0]["passed"]
        verified += pick["passed"]
        oracle += any(s["passed"] for s in samples)
    k = max(len(by_task), 1)
    return {"n": n, "single": single / k, "verified": verified / k, "oracle": oracle / k}
