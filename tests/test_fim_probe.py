"""course_lib.training.fim_probe (lesson 04): the infill classes, the right-answer rule, the sign test,
and the comparison's wiring with stand-in models (one reads the suffix, one cannot)."""
from __future__ import annotations

import math

import pytest
import torch

from course_lib.training import fim, fim_probe

TEXT = '''import os


def load(path):
    handle = open(path)
    data = handle.read()
    return data.strip()


def build(items):
    table = {
        "a": 1,
        "b": 2,
    }
    total = sum(table.values())
    report = dict(total=total, items=items)
    return report
'''


@pytest.mark.parametrize("kind,middles", [
    ("closing", {"    }"}),
    ("return", {"    return"}),
    ("name_from_suffix", {"    handle", "    data", "    table", "    total", "    report"}),
])
def test_tasks_of_each_class_cut_the_text_at_a_line_start(kind, middles):
    seen = set()
    for seed in range(20):
        (task,) = fim_probe.infill_tasks([TEXT], kind, 1, seed=seed)
        assert task.prefix + task.middle + task.suffix == TEXT
        assert task.prefix.endswith("\n") and task.kind == kind
        seen.add(task.middle)
    assert seen <= middles and seen
    if kind == "name_from_suffix":   # the name occurs later, never before
        for name in seen:
            assert name.strip() not in TEXT.split(name.strip() + " =")[0]


def test_unknown_class_and_too_few_texts():
    with pytest.raises(ValueError, match="kind must be one of"):
        fim_probe.infill_tasks([TEXT], "docstring", 1)
    assert fim_probe.infill_tasks(["x = 1\n"], "return", 5) == []


def test_is_right_wants_the_middle_and_no_longer_identifier():
    assert fim_probe.is_right("    return", "    return")
    assert fim_probe.is_right("    return x + 1", "    return")
    assert not fim_probe.is_right("    returned", "    return")
    assert not fim_probe.is_right("    retur", "    return")
    assert fim_probe.is_right("    )\n", "    )") and fim_probe.is_right("    ))", "    )")


def test_sign_test_is_the_two_sided_binomial():
    assert fim_probe.sign_test(0, 0) == 1.0
    assert fim_probe.sign_test(5, 5) == 1.0
    assert math.isclose(fim_probe.sign_test(9, 1), 2 * 11 / 1024)
    assert fim_probe.sign_test(1, 9) == fim_probe.sign_test(9, 1)
    assert fim_probe.sign_test(20, 3) < 0.01


class _CharTokenizer:
    """One token per character, the Qwen2.5-Coder FIM sentinels as single tokens (ids 1000+)."""

    unk_token_id = -1
    vocab = 1010

    def __init__(self):
        s = fim.get_sentinels("qwen2.5-coder")
        self.special = {tok: 1000 + i for i, tok in enumerate((s.prefix, s.suffix, s.middle, s.eot, s.pad))}
        self.back = {v: k for k, v in self.special.items()}

    def convert_tokens_to_ids(self, token):
        return self.special.get(token, self.unk_token_id)

    def encode(self, text, add_special_tokens=False):
        ids, i = [], 0
        while i < len(text):
            for tok, tid in self.special.items():
                if text.startswith(tok, i):
                    ids.append(tid)
                    i += len(tok)
                    break
            else:
                ids.append(min(ord(text[i]), 999))
                i += 1
        return ids

    def __call__(self, text, return_offsets_mapping=False, add_special_tokens=False):
        return {"input_ids": self.encode(text), "offset_mapping": [(i, i + 1) for i in range(len(text))]}

    def decode(self, ids, skip_special_tokens=False):
        return "".join(self.back.get(t, "" if t >= 1000 else chr(t)) for t in ids)


class _Out:
    def __init__(self, logits):
        self.logits = logits


class _Model:
    """The FIM stand-in knows each prompt's middle: its greedy answer is the middle, and it puts all its
    probability on the next token when it scores a PSM sequence; the other writes 'x' and is uniform."""

    def __init__(self, tok, answers=None):
        self.tok, self.answers = tok, answers or {}

    def generate(self, ids, attention_mask=None, max_new_tokens=10, **kw):
        prompt = self.tok.decode(ids[0].tolist())
        text = self.answers.get(prompt, "x")
        new = self.tok.encode(text) + [self.tok.special[fim.get_sentinels("qwen2.5-coder").eot]]
        return torch.tensor([ids[0].tolist() + new])

    def __call__(self, ids):
        seq = ids[0].tolist()
        logits = torch.zeros(1, len(seq), self.tok.vocab)
        if self.answers and self.tok.special[fim.get_sentinels("qwen2.5-coder").middle] in seq:
            for t in range(len(seq) - 1):
                logits[0, t, seq[t + 1]] = 50.0
        return _Out(logits)


def test_compare_counts_the_classes_where_fim_helps():
    tok = _CharTokenizer()
    texts = [TEXT.replace("load", f"load{i}").replace("build", f"build{i}") for i in range(12)]
    answers = {}
    for kind in fim_probe.CLASSES:
        for t in fim_probe.infill_tasks(texts, kind, 12, seed=0):
            answers[tok.decode(tok.encode(fim.fim_prompt(t.prefix, t.suffix, "qwen2.5-coder", "psm")))] = t.middle
    models = {"base": _Model(tok, answers), "nofim": _Model(tok)}
    results = fim_probe.compare(models, tok, texts, n=12, seed=0)
    assert [r.kind for r in results] == list(fim_probe.CLASSES)
    uniform = math.log(tok.vocab)
    for r in results:
        assert r.tasks == 12 and r.right == {"fim_psm": 12, "nofim_l2r": 0}
        assert r.nll["fim_psm"] < 1e-6 and abs(r.nll["nofim_psm"] - uniform) < 1e-4
        assert r.nll["nofim_l2r"] == pytest.approx(uniform, rel=1e-4)   # one token per character
        assert (r.fim_lower, r.fim_higher) == (12, 0) and r.fim_helps()
        assert (r.format_lower, r.format_higher) == (12, 0) and r.format_p_value < 0.001
        assert r.row()["FIM helps (p < 0.05)"] is True and len(r.examples) == 2
