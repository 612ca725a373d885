"""Tests of course_lib.training.fim: FIM splits, layouts, rates, context-level FIM and loss masks."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.training import fim
from course_lib.training.fim import (
    IGNORE_INDEX,
    apply_fim_context_level,
    apply_fim_document_level,
    fim_prompt,
    fim_transform,
    get_sentinels,
    middle_only_labels,
    middle_token_mask,
    packed_attention_mask,
    parse_fim,
    psm_transform,
    split_document,
    split_points,
    split_tokens,
    spm_transform,
)

STYLES = ["starcoder", "qwen2.5-coder"]
code_text = st.text(alphabet=st.characters(blacklist_characters="<>|"), max_size=300)


@given(code_text, st.integers(0, 2**32 - 1))
def test_split_document_reassembles(text, seed):
    prefix, middle, suffix = split_document(text, seed)
    assert prefix + middle + suffix == text


@given(st.lists(st.integers(0, 50), max_size=60), st.integers(0, 2**32 - 1))
def test_split_tokens_reassembles(ids, seed):
    p, m, s = split_tokens(ids, seed)
    assert p + m + s == ids


@given(code_text, st.integers(0, 2**32 - 1), st.sampled_from(STYLES))
def test_psm_round_trip_and_each_sentinel_once(text, seed, style):
    s = get_sentinels(style)
    prefix, middle, suffix = split_document(text, seed)
    out = psm_transform(prefix, middle, suffix, style)
    for sentinel in s.all():
        assert out.count(sentinel) == 1
    assert out.endswith(s.eot) and out.count(s.eot) == 1
    assert out.index(s.prefix) < out.index(s.suffix) < out.index(s.middle)
    if prefix:
        assert parse_fim(out, style) == (prefix, middle, suffix, "psm")
    else:  # an empty prefix makes PSM and SPM the same string
        assert parse_fim(out, style) == (middle, "", suffix, "spm")


@given(code_text, st.integers(0, 2**32 - 1), st.sampled_from(STYLES))
def test_spm_layout(text, seed, style):
    s = get_sentinels(style)
    prefix, middle, suffix = split_document(text, seed)
    out = spm_transform(prefix, middle, suffix, style)
    assert out == f"{s.prefix}{s.suffix}{suffix}{s.middle}{prefix}{middle}{s.eot}"
    for sentinel in s.all():
        assert out.count(sentinel) == 1
    p_and_m, _, suf, mode = parse_fim(out, style)
    assert (p_and_m, suf, mode) == (prefix + middle, suffix, "spm")


@given(code_text, st.integers(0, 2**32 - 1), st.sampled_from(STYLES))
def test_spm_lecture_layout_round_trips(text, seed, style):
    s = get_sentinels(style)
    prefix, middle, suffix = split_document(text, seed)
    out = spm_transform(prefix, middle, suffix, style, layout="lecture")
    assert out == f"{s.suffix}{suffix}{s.prefix}{prefix}{s.middle}{middle}{s.eot}"
    assert parse_fim(out, style) == (prefix, middle, suffix, "spm")


def test_spm_layouts_exact_strings():
    assert spm_transform("p", "m", "s", "starcoder", layout="lecture") == \
        "<fim_suffix>s<fim_prefix>p<fim_middle>m<|endoftext|>"
    assert spm_transform("p", "m", "s", "starcoder") == spm_transform("p", "m", "s", "starcoder", layout="bigcode") \
        == "<fim_prefix><fim_suffix>s<fim_middle>pm<|endoftext|>"
    assert fim_prompt("p", "s", "starcoder", "spm", layout="lecture") == "<fim_suffix>s<fim_prefix>p<fim_middle>"
    with pytest.raises(ValueError, match="layout"):
        spm_transform("p", "m", "s", layout="fim-paper")


def test_psm_exact_string_both_styles():
    assert psm_transform("def f(", "x", "):\n", "starcoder") == \
        "<fim_prefix>def f(<fim_suffix>):\n<fim_middle>x<|endoftext|>"
    assert psm_transform("a", "b", "c", "qwen2.5-coder", eot=False) == \
        "<|fim_prefix|>a<|fim_suffix|>c<|fim_middle|>b"
    assert fim_prompt("a", "c", "qwen2.5-coder") == "<|fim_prefix|>a<|fim_suffix|>c<|fim_middle|>"
    with pytest.raises(ValueError, match="unknown FIM sentinel style"):
        get_sentinels("codellama")


def test_split_points_are_uniform_and_sorted():
    r = random.Random(0)
    firsts = []
    for _ in range(4000):
        lo, hi = split_points(10, r)
        assert 0 <= lo <= hi <= 10
        firsts.append(lo)
    # min of two uniforms on 0..10: P(lo == 0) = 1 - (10/11)^2 ~= 0.174
    assert abs(firsts.count(0) / 4000 - (1 - (10 / 11) ** 2)) < 0.03


@settings(deadline=None, max_examples=20)
@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.integers(0, 1000))
def test_rates_hold_statistically(fim_rate, spm_rate, seed):
    docs = ["def f(x):\n    return x\n"] * 3000
    out, counts = apply_fim_document_level(docs, seed, fim_rate=fim_rate, spm_rate=spm_rate)
    n = len(docs)
    fim_n = counts["psm"] + counts["spm"]
    assert sum(counts.values()) == n and len(out) == n
    # 5 standard deviations of a binomial
    assert abs(fim_n / n - fim_rate) <= 5 * (fim_rate * (1 - fim_rate) / n) ** 0.5 + 1e-9
    if fim_n >= 200:
        sd = (spm_rate * (1 - spm_rate) / fim_n) ** 0.5
        assert abs(counts["spm"] / fim_n - spm_rate) <= 5 * sd + 1e-9


def test_fim_transform_plain_keeps_text():
    text, mode = fim_transform("x = 1\n", 0, fim_rate=0.0)
    assert (text, mode) == ("x = 1\n<|endoftext|>", "plain")


# --- context level needs a tokenizer with the sentinels: a small byte-level BPE trained here -----

@pytest.fixture(scope="module")
def tokenizer():
    from course_lib.training.tinymodel import train_tokenizer

    texts = ["def add(a, b):\n    return a + b\n", "class Point:\n    x: int = 0\n    y: int = 0\n",
             "for i in range(10):\n    print(i * i)\n"] * 20
    return train_tokenizer(texts, vocab_size=300)


def test_context_level_keeps_window_length_and_documents(tokenizer):
    eot = tokenizer.token_to_id("<|endoftext|>")
    docs = ["def add(a, b):\n    return a + b\n", "for i in range(10):\n    print(i)\n", "x = 1\n"]
    window = []
    for d in docs:
        window += tokenizer.encode(d).ids + [eot]
    rng = random.Random(3)
    for style in STYLES:
        new, modes = apply_fim_context_level(window, tokenizer, rng, fim_rate=1.0, sentinels=style)
        assert len(new) == len(window)
        assert new.count(eot) == window.count(eot) and len(modes) == 3
        assert set(modes) <= {"psm", "spm", "plain"}   # plain: a suffix too short to absorb the sentinels
        s = get_sentinels(style)
        assert new.count(tokenizer.token_to_id(s.prefix)) == sum(m != "plain" for m in modes)
    plain, modes = apply_fim_context_level(window, tokenizer, rng, fim_rate=0.0)
    assert plain == window and modes == ["plain"] * 3


def test_context_level_psm_fragment_decodes_back(tokenizer):
    eot = tokenizer.token_to_id("<|endoftext|>")
    doc = "def add(a, b):\n    return a + b\n"
    window = tokenizer.encode(doc).ids + [eot]
    for seed in range(20):
        new, modes = apply_fim_context_level(window, tokenizer, random.Random(seed), fim_rate=1.0,
                                             spm_rate=0.0, sentinels="starcoder")
        text = tokenizer.decode(new, skip_special_tokens=False).replace("<fim_pad>", "")
        if modes == ["plain"]:   # the suffix could not absorb the sentinels: left as it was
            assert new == window
            continue
        prefix, middle, suffix, mode = parse_fim(text, "starcoder")
        assert mode == "psm" or text.startswith("<fim_prefix><fim_suffix>")  # empty prefix reads as SPM
        # the suffix may have been cut to keep the window length; the rest is exact
        assert doc.startswith(prefix + middle) or (prefix + middle + suffix) == doc
        assert doc[len(prefix) + len(middle):].startswith(suffix)


def _permute_with_truth(ids, tokenizer, rng, **kw):
    """permute_fragment plus the split it drew (replayed from a copy of the rng's state)."""
    replay = random.Random()
    replay.setstate(rng.getstate())
    text = tokenizer.decode(list(ids), skip_special_tokens=False)
    lo, hi = split_points(len(text), replay)
    new, mode = fim.permute_fragment(ids, tokenizer, rng, **kw)
    return new, mode, (text[:lo], text[lo:hi], text[hi:])


def _check_middle_whole(new, mode, truth, tokenizer, sentinels):
    s = get_sentinels(sentinels)
    enc = lambda t: tokenizer.encode(t, add_special_tokens=False).ids  # noqa: E731
    prefix, middle, _ = truth
    after_mid = new[new.index(tokenizer.token_to_id(s.middle)) + 1:]
    assert after_mid == (enc(middle) if mode == "psm" else enc(prefix) + enc(middle))


def test_permute_fragment_never_cuts_the_middle(tokenizer):
    """A fragment whose suffix cannot absorb the three sentinels stays plain text (bigcode)."""
    ids = tokenizer.encode("def add(a, b):\n    return a + b\n").ids
    seen = {"plain": 0, "psm": 0, "spm": 0}
    for seed in range(300):
        new, mode, truth = _permute_with_truth(ids, tokenizer, random.Random(seed), sentinels="starcoder")
        assert len(new) == len(ids)
        seen[mode] += 1
        if mode == "plain":
            assert new == ids
        else:
            _check_middle_whole(new, mode, truth, tokenizer, "starcoder")
    assert seen["plain"] > 0 and seen["psm"] > 0 and seen["spm"] > 0   # all three happen


def test_no_middle_truncated_on_the_course_256_token_windows():
    from course_lib.profiles import get_profile
    from course_lib.training.tinymodel import EOT, course_tokenizer, pack_windows, pretraining_corpus

    P = get_profile("ci")
    hf = course_tokenizer("ci")
    tok = hf.backend_tokenizer
    train = pretraining_corpus("ci").documents("train")
    docs = [e.ids for e in tok.encode_batch(train[:60])]
    eot = tok.token_to_id(EOT)
    windows = pack_windows(docs, P.tiny_model.seq_len, eot)
    assert len(windows[0]) == 256
    rng = random.Random(0)
    modes = {"plain": 0, "psm": 0, "spm": 0}
    for window in windows[:60]:
        fragments, cur = [], []
        for t in window:
            if t == eot:
                fragments.append(cur)
                cur = []
            else:
                cur.append(t)
        fragments.append(cur)
        for frag in (f for f in fragments if f):
            new, mode, truth = _permute_with_truth(frag, tok, rng, sentinels="qwen2.5-coder")
            modes[mode] += 1
            assert len(new) == len(frag)
            if mode != "plain":
                _check_middle_whole(new, mode, truth, tok, "qwen2.5-coder")
    assert modes["psm"] + modes["spm"] > 50


def test_prefix_lm_mask_is_not_triangular():
    import numpy as np

    m = fim.prefix_lm_attention_mask(5, 3)
    assert m[0, 2] and not m[3, 4] and m[4, 0]
    assert not np.array_equal(m, np.tril(np.ones((5, 5), dtype=bool)))
    assert np.array_equal(fim.prefix_lm_attention_mask(5, 0), np.tril(np.ones((5, 5), dtype=bool)))


def test_context_level_rejects_tokenizer_without_sentinels():
    from tokenizers import Tokenizer, models

    tok = Tokenizer(models.BPE())
    with pytest.raises(ValueError, match="no special token"):
        apply_fim_context_level([1, 2], tok, random.Random(0), fim_rate=1.0)


# --- masks --------------------------------------------------------------------------------------

PRE, SUF, MID, EOT = 90, 91, 92, 0


def test_middle_only_labels_psm():
    ids = [PRE, 5, 6, SUF, 7, MID, 8, 9, EOT, 10, 11, EOT]
    labels = middle_only_labels(ids, MID, EOT)
    assert labels == [IGNORE_INDEX] * 6 + [8, 9] + [IGNORE_INDEX] * 4


def test_middle_mask_two_documents_and_spm_detection():
    ids = [PRE, 1, SUF, 2, MID, 3, EOT, PRE, SUF, 4, MID, 5, 6, EOT]
    assert middle_token_mask(ids, MID, EOT) == [False] * 5 + [True, False] + [False] * 4 + [True, True, False]
    assert middle_token_mask(ids, MID, EOT, PRE, SUF) == [False] * 5 + [True] + [False] * 8


def test_packed_attention_mask_is_causal_and_block_diagonal():
    import numpy as np

    ids = [1, 2, EOT, 3, 4, EOT]
    m = packed_attention_mask(ids, EOT)
    assert m.shape == (6, 6) and m.dtype == bool
    assert not m[np.triu_indices(6, 1)].any()          # causal
    assert m[2, 0] and not m[3, 2] and m[5, 3]           # documents do not see each other
    assert packed_attention_mask(ids, EOT, per_document=False)[3, 2]


def test_causal_lm_labels_ignores_pads():
    assert fim.causal_lm_labels([5, 6, 7, 7], pad_id=7) == [5, 6, IGNORE_INDEX, IGNORE_INDEX]


def test_line_infill_tasks_reassemble():
    texts = ["import os\n\ndef f(x):\n    y = x + 1\n    return y * 2\n\nprint(f(3))\n"] * 5
    tasks = fim.line_infill_tasks(texts, 3, seed=1)
    assert len(tasks) == 3
    for prefix, middle, suffix in tasks:
        assert prefix + middle + suffix == texts[0]
        assert "\n" not in middle and middle.strip() == middle


def test_fim_segments_psm_spm_plain():
    ids = [PRE, 1, SUF, 2, MID, 3, EOT, PRE, SUF, 4, MID, 5, EOT, 7, 99]
    assert fim.fim_segments(ids, PRE, SUF, MID, EOT, pad_id=99) == [
        "sentinel", "prefix", "sentinel", "suffix", "sentinel", "middle", "eot",
        "sentinel", "sentinel", "suffix", "sentinel", "prefix+middle", "eot", "plain", "pad"]


def test_line_infill_tasks_trim_to_whole_lines():
    text = "".join(f"line_{i} = {i}\n" for i in range(200))
    for prefix, middle, suffix in fim.line_infill_tasks([text], 1, seed=0, max_prefix_chars=60,
                                                        max_suffix_chars=40):
        assert len(prefix) <= 60 and len(suffix) <= 40
        assert prefix + middle + suffix in text and (prefix == "" or prefix.endswith("\n"))
