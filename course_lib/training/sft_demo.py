"""Lesson 05's SFT demonstration: a task the tiny model can learn in a CPU minute, and three honest
measurements of whether it did.

Fine-tuning a 2.4M-parameter model for a few dozen steps on varied real code teaches it nothing you can
see. The demonstration therefore uses a narrow, regular task family: the course's tiny-codes-shaped
sample (``assets/tiny_codes/``, the data of lesson 07's drill: "return the sum of the even numbers of a
list", "count the vowels of a string", ... each with hidden tests). Its training rows go through the
same LazyLLM pipeline as the lesson's other data; the measurements are

* :func:`answer_loss` — the mean loss per answer token on *held-out* rows (never trained on), before
  and after (the training log's own losses are on the batches it trains on);
* :func:`pass_rate` — the share of held-out tasks whose generated code passes the task's hidden tests
  in the sandbox, before and after;
* the answers themselves.

Introduced in lesson 05.
"""
from __future__ import annotations

import json
import random
import re
from typing import Any, Callable, Sequence

from course_lib.paths import assets_dir

_FENCE = re.compile(r"```(?:python|py)?\n(.*?)```", re.S)


def load_task_rows(split: str, n: int | None = None, *, seed: int = 0,
                   operations: Sequence[str] | None = None) -> list[dict]:
    """Rows of the tiny-codes-shaped sample with their hidden tests, in a seeded order.

    ``split="train"``: the training rows (their defects included: prose-only, wrong, broken, truncated
    answers — the pipeline is there to remove them); ``split="eval"``: the held-out "new instances"
    rows (task families seen in training, new function names and values; no defects). Each row has the
    hub's ``prompt`` / ``response`` / ``idx`` plus ``tests``, ``entry_point``, ``signature`` (the task's
    ``def`` line), ``task`` (``"family/operation"``, e.g. ``"list/sum"``), ``code`` (the reference
    function, for eval rows) and ``defect``. ``operations``: keep only rows of these tasks
    (``"family/operation"`` names). Introduced in lesson 05."""
    if split not in ("train", "eval"):
        raise ValueError(f"split must be 'train' or 'eval', got {split!r}")
    folder = assets_dir("tiny_codes")
    tests = {}
    with open(folder / "hidden_tests.jsonl", encoding="utf-8") as fh:
        for line in fh:
            t = json.loads(line)
            tests[t["idx"]] = t
    rows = []
    with open(folder / "tiny_codes_sample.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            t = tests.get(row["idx"])
            if t is None:                       # another language: no tests
                continue
            if (split == "train") != (not t["holdout"]) or (split == "eval" and t["eval_part"] != "new instances"):
                continue
            task = f"{t['family']}/{t['operation']}"
            if operations is not None and task not in operations:
                continue
            m = _FENCE.search(row["response"])
            rows.append({**row, "tests": t["tests"], "entry_point": t["entry_point"], "defect": t["defect"],
                         "signature": t["signature"], "task": task,
                         "code": m.group(1).rstrip("\n") if m else None})
    rows.sort(key=lambda r: r["idx"])
    random.Random(seed).shuffle(rows)
    return rows[:n] if n is not None else rows


def answer_loss(model_path: Any, rows: Sequence[dict], *, max_len: int = 256, batch_size: int = 8) -> float:
    """Mean cross-entropy (nats) per answer token of ``rows`` (``prompt`` → ``code``, chat-formatted by
    :func:`course_lib.training.instructions.encode_chat`, answer-only labels) under the model in
    ``model_path``: the held-out loss of SFT. Introduced in lesson 05."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from course_lib.training.instructions import tokenize_chat

    tok = AutoTokenizer.from_pretrained(str(model_path))
    model = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=torch.float32).eval()
    examples = [tokenize_chat({"instruction": r["prompt"], "input": "", "output": r["code"]}, tok, max_len=max_len)
                for r in rows if r.get("code")]
    if not examples:
        raise ValueError("answer_loss needs rows with reference code")
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(examples), batch_size):
            batch = examples[i:i + batch_size]
            width = max(len(e["input_ids"]) for e in batch)
            ids = torch.full((len(batch), width), pad)
            labels = torch.full((len(batch), width), -100)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for j, e in enumerate(batch):
                n = len(e["input_ids"])
                ids[j, :n] = torch.tensor(e["input_ids"])
                labels[j, :n] = torch.tensor(e["labels"])
                mask[j, :n] = 1
            logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1]
            target = labels[:, 1:]
            nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                                                    ignore_index=-100, reduction="sum")
            total += float(nll)
            count += int((target != -100).sum())
    return total / count


def code_of_answer(answer: str) -> str:
    """The code in a model's answer: the first fenced block when there is one, else the whole answer.
    Introduced in lesson 05."""
    m = _FENCE.search(answer + ("```" if answer.count("```") % 2 else ""))
    return m.group(1) if m else answer


def pass_rate(answers: Sequence[str], rows: Sequence[dict], run_many: Callable[..., list]) -> tuple[int, list]:
    """How many ``answers`` pass their row's hidden tests when run in the sandbox (``run_many`` has the
    signature of :func:`course_lib.evaluation.sandbox.run_many`). Returns (passed, statuses).
    Introduced in lesson 05."""
    results = run_many([{"code": code_of_answer(a), "tests": r["tests"].splitlines()} for a, r in zip(answers, rows)],
                       progress=False)
    statuses = [res.status for res in results]
    return sum(s == "passed" for s in statuses), statuses


def answer_prefix(row: dict) -> str:
    """The start of the answer that the demo gives the model for a task row: the task's ``def`` line (its
    name and argument, HumanEval's protocol, as the drill's test pass@1 gives them,
    :func:`course_lib.drill.inference.signature_prefix`), in the format of the pipeline's training
    answers (bare code, no fence). Introduced in lesson 05."""
    return row["signature"] + "\n"


def uses_argument(answer: str, row: dict) -> bool:
    """Whether the body of ``answer`` (after the task's ``def`` line) uses the argument that the
    signature names. Introduced in lesson 05."""
    arg = row["signature"].split("(", 1)[1].split(")", 1)[0].split(",")[0].strip()
    body = code_of_answer(answer).split(row["signature"], 1)[-1]
    return bool(arg) and re.search(rf"\b{re.escape(arg)}\b", body) is not None


def demo_outcome(base_model: Any, out_dir: Any, *, profile: Any = "ci", seed: int = 0, steps: int | None = None,
                 bf16: bool | None = None, operations: Sequence[str] = ("list/sum",), train_rows: int = 300,
                 eval_rows: int = 40, probe: int = 10, max_new_tokens: int = 96,
                 run_code: Callable[..., Any] | None = None) -> dict[str, Any]:
    """Lesson 05's demonstration end to end, for one seed: the task's training rows (``seed``) through the
    LazyLLM pipeline, SFT through LLaMA-Factory (training seed ``seed``; ``bf16`` None = the profile's),
    and what the lesson measures before and after: the held-out answer loss and how many of ``probe``
    held-out answers end with ``<|im_end|>``. ``benchmarks/bench_sft_demo.py`` runs it over seeds and
    precisions to check the claims lesson 05 asserts. Introduced in lesson 05."""
    from course_lib.training import codegen, sft

    rows = load_task_rows("train", train_rows, seed=seed, operations=list(operations))
    held = load_task_rows("eval", eval_rows, seed=seed, operations=list(operations))
    kept, _ = codegen.run_codegen_pipeline(rows, profile=profile, run_code=run_code, verbose=False)
    probe_rows = held[:probe]
    prefixes = [answer_prefix(r) for r in probe_rows]
    extra = {} if bf16 is None else {"bf16": bool(bf16)}
    if steps:
        extra["max_steps"] = int(steps)
    before = sft.generate(base_model, [r["prompt"] for r in probe_rows], max_new_tokens=max_new_tokens,
                          details=True, answer_prefixes=prefixes)
    loss_before = answer_loss(base_model, held)
    result = sft.finetune(base_model, kept, out_dir, profile=profile, seed=seed, **extra)
    after = sft.generate(result.merged_model, [r["prompt"] for r in probe_rows], max_new_tokens=max_new_tokens,
                         details=True, answer_prefixes=prefixes)
    return {"seed": seed, "rows": [len(rows), len(kept)], "loss_before": loss_before,
            "loss_after": answer_loss(result.merged_model, held),
            "stopped_before": sum(b["stopped"] for b in before), "stopped_after": sum(a["stopped"] for a in after),
            "probe": len(probe_rows), "train_runtime_s": result.train_runtime}
