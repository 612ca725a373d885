"""Where fill-in-the-middle helps a tiny model: infill classes with short, regular middles, measured.

Lesson 04's model (2.4M parameters, a few minutes of CPU training) cannot fill a whole line of code: that
needs names, types and logic it has not learned. Whether FIM training taught it *anything* is a
question for middles it can get right — short, regular ones — and for a comparison that is fair to the
model trained without FIM. This module builds held-out tasks of a few such classes and measures:

* ``fim_psm``: the FIM model (``base``) given the PSM prompt ``<PRE> prefix <SUF> suffix <MID>``;
* ``fim_l2r``: the same model continuing the prefix left to right (it does not see the suffix);
* ``nofim_psm``: the model trained without FIM given the PSM prompt (it never saw the sentinels);
* ``nofim_l2r``: the model trained without FIM continuing the prefix — what a causal LM does in an
  editor without FIM.

Each task's cursor sits at the start of a line; the middle is the line's indentation plus a short piece:

* ``closing``  — a line of closing brackets only (``)``, ``]``, ``})`` …);
* ``return``   — the keyword ``return`` of a ``return <expr>`` line (``<expr>`` stays in the suffix);
* ``name_from_suffix`` — the name assigned on the line (``NAME = …``) when ``NAME`` does not occur in the
  prefix but does occur later in the suffix: only a model that reads the suffix can know it.

Two measurements per task: is the greedy continuation right (it starts with the middle and the
character after it, if any, does not continue an identifier), and how likely the model finds the true
middle (its loss in nats per character, :func:`middle_nll`) — a finer signal for a model that rarely
writes the exact answer. "FIM helps" on a class when the FIM model reading the suffix gives the middle
a lower loss than the no-FIM model reading the prefix on significantly more tasks (paired sign test,
two-sided, p < 0.05); the same comparison against the no-FIM model given the same PSM prompt says
whether FIM training at least taught the format.

Introduced in lesson 04.
"""
from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from course_lib.training import fim

CLASSES = ("closing", "return", "name_from_suffix")
_CLOSING = re.compile(r"^[ \t]*[)\]}]+[,:]?[ \t]*$")
_RETURN = re.compile(r"^([ \t]*)return[ \t]+\S")
_ASSIGN = re.compile(r"^([ \t]*)([A-Za-z_][A-Za-z_0-9]*)[ \t]*=[^=]")
_IDENT_CHAR = re.compile(r"[A-Za-z_0-9]")


@dataclass(frozen=True)
class InfillTask:
    """One held-out task: the cursor at the start of a line, ``middle`` hidden between ``prefix`` and
    ``suffix`` (``prefix + middle + suffix`` is the original text)."""

    kind: str
    prefix: str
    middle: str
    suffix: str


def _candidates(text: str, kind: str) -> list[tuple[int, int]]:
    """(line index, length of the middle within the line) for every line of ``text`` of this kind."""
    lines = text.splitlines(keepends=True)
    found, in_string = [], False
    for i, line in enumerate(lines):
        quotes = line.count('"""') + line.count("'''")
        plain = not in_string and quotes == 0
        in_string ^= quotes % 2 == 1
        if not plain or i == 0 or i == len(lines) - 1:
            continue
        body = line.rstrip("\n")
        if kind == "closing" and _CLOSING.match(body):
            found.append((i, len(body.rstrip())))
        elif kind == "return" and (m := _RETURN.match(body)):
            found.append((i, len(m.group(1)) + len("return")))
        elif kind == "name_from_suffix" and (m := _ASSIGN.match(body)):
            name = m.group(2)
            before, after = "".join(lines[:i]), "".join(lines[i + 1:])
            pattern = re.compile(rf"(?<![A-Za-z_0-9]){re.escape(name)}(?![A-Za-z_0-9])")
            if not pattern.search(before) and pattern.search(after) and name not in ("self", "_"):
                found.append((i, len(m.group(1)) + len(name)))
    return found


def infill_tasks(texts: Sequence[str], kind: str, n: int, *, seed: int = 0, max_prefix_chars: int = 500,
                 max_suffix_chars: int = 250) -> list[InfillTask]:
    """Up to ``n`` tasks of class ``kind`` (see :data:`CLASSES`), at most one per text, from texts the
    models never trained on. The prefix ends with the newline before the line; prefix and suffix are
    trimmed to whole lines. For ``name_from_suffix`` the name must also occur in the trimmed suffix.
    Introduced in lesson 04."""
    if kind not in CLASSES:
        raise ValueError(f"kind must be one of {CLASSES}, got {kind!r}")
    r = random.Random(f"{seed}-{kind}")
    tasks: list[InfillTask] = []
    for text in texts:
        if len(tasks) >= n:
            break
        cands = _candidates(text, kind)
        r.shuffle(cands)
        lines = text.splitlines(keepends=True)
        for i, width in cands:
            line = lines[i]
            before, after = fim.trim_context("".join(lines[:i]), "".join(lines[i + 1:]), max_prefix_chars,
                                             max_suffix_chars)
            middle, rest = line[:width], line[width:]
            if kind == "name_from_suffix":
                name = middle.strip()
                if not re.search(rf"(?<![A-Za-z_0-9]){re.escape(name)}(?![A-Za-z_0-9])", after) or name in before:
                    continue
            tasks.append(InfillTask(kind, before, middle, rest + after))
            break
    return tasks


def is_right(generated: str, middle: str) -> bool:
    """A continuation is right when it starts with ``middle`` and does not continue its last
    identifier (``return`` right, ``returned`` wrong). Introduced in lesson 04."""
    if not generated.startswith(middle):
        return False
    nxt = generated[len(middle):len(middle) + 1]
    return not (nxt and _IDENT_CHAR.match(nxt) and _IDENT_CHAR.match(middle[-1:] or " "))


def _greedy(model: Any, ids: list[int], max_new_tokens: int, stop: list[int]) -> list[int]:
    import torch

    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                             max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=stop,
                             pad_token_id=stop[0])
    return [t for t in out[0, len(ids):].tolist() if t not in stop]


def answer(model: Any, tokenizer: Any, task: InfillTask, *, setup: str = "psm", max_new_tokens: int = 10,
           sentinels: str = "qwen2.5-coder") -> str:
    """The model's greedy continuation for ``task``: after the PSM prompt (``setup="psm"``) or after the
    prefix alone (``setup="l2r"``, no suffix, no sentinels). Introduced in lesson 04."""
    s = fim.get_sentinels(sentinels)
    codec = fim._Codec(tokenizer)
    eot = codec.token_id(s.eot)
    if setup == "psm":
        ids = codec.encode(fim.fim_prompt(task.prefix, task.suffix, s, "psm"))
    elif setup == "l2r":
        ids = codec.encode(task.prefix)
    else:
        raise ValueError(f"setup must be 'psm' or 'l2r', got {setup!r}")
    return codec.decode(_greedy(model, ids, max_new_tokens, [eot]))


def sign_test(wins: int, losses: int) -> float:
    """Two-sided p-value of ``wins`` vs ``losses`` under "each is equally likely" (ties dropped).
    Introduced in lesson 04."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def middle_nll(model: Any, tokenizer: Any, task: InfillTask, *, setup: str = "psm",
               sentinels: str = "qwen2.5-coder") -> float:
    """The negative log-likelihood of the true middle, in nats per *character* (so two tokenizations
    compare): after the PSM prompt (``"psm"``: the middle tokenized on its own, as in training), or
    after the prefix alone (``"l2r"``: prefix and middle tokenized together, as the model read code;
    every token that covers a middle character counts). Introduced in lesson 04."""
    import torch

    s = fim.get_sentinels(sentinels)
    codec = fim._Codec(tokenizer)
    if setup == "psm":
        prompt = codec.encode(fim.fim_prompt(task.prefix, task.suffix, s, "psm"))
        ids = prompt + codec.encode(task.middle)
        scored = range(len(prompt), len(ids))
    elif setup == "l2r":
        enc = tokenizer(task.prefix + task.middle, return_offsets_mapping=True, add_special_tokens=False)
        ids = list(enc["input_ids"])
        scored = [t for t, (_, end) in enumerate(enc["offset_mapping"]) if end > len(task.prefix) and t > 0]
    else:
        raise ValueError(f"setup must be 'psm' or 'l2r', got {setup!r}")
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), dim=-1)
    nll = -sum(float(logp[t - 1, ids[t]]) for t in scored)
    return nll / max(1, len(task.middle))


@dataclass
class ClassResult:
    """One class: how many tasks each model's greedy answer gets right, the middle's loss (nats per
    character) under each setup, and the paired comparison of the FIM model reading the suffix with the
    no-FIM model continuing the prefix."""

    kind: str
    tasks: int
    right: dict = field(default_factory=dict)         # setup -> tasks whose greedy answer is right
    nll: dict = field(default_factory=dict)           # setup -> mean nats per middle character
    fim_lower: int = 0                                # tasks where fim_psm's loss < nofim_l2r's
    fim_higher: int = 0
    p_value: float = 1.0                              # sign test of fim_lower vs fim_higher
    format_lower: int = 0                             # tasks where fim_psm's loss < nofim_psm's: the same
    format_higher: int = 0                            # prompt, with and without FIM training
    format_p_value: float = 1.0
    examples: list = field(default_factory=list)      # (task, {setup: greedy answer})

    def fim_helps(self, alpha: float = 0.05) -> bool:
        """The FIM model, reading the suffix, gives the true middle a lower loss than the no-FIM model
        reading the prefix on more tasks than not, with a sign-test p-value below ``alpha``."""
        return self.fim_lower > self.fim_higher and self.p_value < alpha

    def row(self) -> dict:
        out = {"class": self.kind, "tasks": self.tasks}
        out.update({f"greedy right: {k}": v for k, v in self.right.items()})
        out.update({f"loss {k} (nats/char)": round(v, 3) for k, v in self.nll.items()})
        out["fim_psm lower / higher than nofim_l2r"] = f"{self.fim_lower} / {self.fim_higher}"
        out["p (sign test)"] = round(self.p_value, 4)
        out["FIM helps (p < 0.05)"] = self.fim_helps()
        out["fim_psm lower / higher than nofim_psm"] = f"{self.format_lower} / {self.format_higher}"
        out["p (same prompt)"] = round(self.format_p_value, 4)
        return out


SETUPS = (("fim_psm", "base", "psm"), ("fim_l2r", "base", "l2r"), ("nofim_psm", "nofim", "psm"),
          ("nofim_l2r", "nofim", "l2r"))
GREEDY = ("fim_psm", "nofim_l2r")


def compare(models: dict, tokenizer: Any, texts: Sequence[str], *, n: int = 60, seed: int = 0,
            kinds: Sequence[str] = CLASSES, examples: int = 2) -> list[ClassResult]:
    """For each class, ``n`` held-out tasks from ``texts``: the middle's loss under the four setups
    (:data:`SETUPS`: each model with the PSM prompt and left to right; ``models`` maps ``"base"`` and
    ``"nofim"`` to transformers models) and the greedy answers of ``fim_psm`` and ``nofim_l2r``.
    Returns one :class:`ClassResult` per class. Introduced in lesson 04."""
    results = []
    for kind in kinds:
        tasks = infill_tasks(texts, kind, n, seed=seed)
        nll = {name: [middle_nll(models[model], tokenizer, t, setup=setup) for t in tasks]
               for name, model, setup in SETUPS}
        greedy = {name: [answer(models[model], tokenizer, t, setup=setup, max_new_tokens=8) for t in tasks]
                  for name, model, setup in SETUPS if name in GREEDY}
        lower = sum(a < b for a, b in zip(nll["fim_psm"], nll["nofim_l2r"]))
        higher = sum(a > b for a, b in zip(nll["fim_psm"], nll["nofim_l2r"]))
        f_lower = sum(a < b for a, b in zip(nll["fim_psm"], nll["nofim_psm"]))
        f_higher = sum(a > b for a, b in zip(nll["fim_psm"], nll["nofim_psm"]))
        res = ClassResult(kind, len(tasks),
                          right={name: sum(is_right(a, t.middle) for a, t in zip(greedy[name], tasks)) for name in greedy},
                          nll={name: sum(v) / max(1, len(v)) for name, v in nll.items()},
                          fim_lower=lower, fim_higher=higher, p_value=sign_test(lower, higher),
                          format_lower=f_lower, format_higher=f_higher, format_p_value=sign_test(f_lower, f_higher))
        res.examples = [(t, {name: greedy[name][i] for name in greedy}) for i, t in enumerate(tasks[:examples])]
        results.append(res)
    return results


def statements(results: Sequence[ClassResult], alpha: float = 0.05) -> dict[str, bool]:
    """The statements lesson 04 can make about one probe run, each True or False for these results:
    whether no class was helped, whether the FIM model reading the suffix gave the true middle a higher
    loss than the no-FIM model (and than itself reading the prefix) in every class, and whether the
    same-prompt comparison was not significant in every class. ``benchmarks/bench_fim_probe.py`` counts
    the seeds where each holds. Introduced in lesson 04."""
    return {
        "no class helped": not any(r.fim_helps(alpha) for r in results),
        "fim_psm above nofim_l2r in every class": all(r.nll["fim_psm"] > r.nll["nofim_l2r"] for r in results),
        "fim_psm above fim_l2r in every class": all(r.nll["fim_psm"] > r.nll["fim_l2r"] for r in results),
        "same-prompt difference not significant in every class": all(r.format_p_value >= alpha for r in results),
    }
