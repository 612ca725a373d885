"""Error-masked SFT: failed calls stay in context with no loss; the recovery is trained."""
from __future__ import annotations

import pytest
import torch

from course_lib.agentic.emsft import (
    byte_tokenize,
    error_masked_example,
    failed_call_flags,
    single_conversation,
    tool_result_failed,
    tst_examples,
    tst_segments,
)
from course_lib.agentic.tree import unpacked_loss
from tests._agentic_helpers import tiny_qwen2

TRAJ = [
    {"role": "user", "content": "fix the bug in util.py"},
    {"role": "assistant", "content": 'read_file({"path": "utils.py"})'},
    {"role": "tool", "content": "Error: No such file: utils.py", "error": True},
    {"role": "assistant", "content": 'read_file({"path": "util.py"})'},
    {"role": "tool", "content": "def add(a, b):\n    return a - b", "error": False},
    {"role": "assistant", "content": "edit: return a + b"},
]


def test_failed_call_is_detected():
    assert failed_call_flags(TRAJ) == [False, True, False, False, False, False]
    explicit = [dict(TRAJ[1]), {"role": "tool", "content": "ok?", "error": True}]
    assert failed_call_flags(explicit) == [True, False]


SUCCESSFUL_CALLS_THAT_MENTION_ERRORS = [
    "FAILED tests/test_calc.py::test_add - AssertionError: assert -1 == 3\n1 failed in 0.02s",
    "Traceback (most recent call last):\n  File \"repro.py\", line 3\nZeroDivisionError: division by zero",
    "class ParseError(ValueError):\n    pass",
    "src/util.py:12:    raise ConfigError('missing key')",
]


@pytest.mark.parametrize("content", SUCCESSFUL_CALLS_THAT_MENTION_ERRORS)
def test_the_status_flag_decides_not_the_text(content):
    msgs = [{"role": "assistant", "content": "run_tests()"}, {"role": "tool", "content": content, "error": False}]
    assert failed_call_flags(msgs) == [False, False]
    assert not tool_result_failed(msgs[1])
    ex = error_masked_example(msgs, byte_tokenize)
    assert sum(m for m, i in zip(ex.loss_mask, ex.message_index) if i == 0) > 0    # the call is trained


def test_a_tool_message_without_status_is_refused():
    with pytest.raises(ValueError, match="message 1.*no boolean 'error' flag"):
        failed_call_flags([{"role": "assistant", "content": "ls"}, {"role": "tool", "content": "a.py"}])
    assert tool_result_failed({"role": "assistant", "content": "Error"}) is False


def test_failed_call_in_context_without_loss_and_recovery_trained():
    ex = error_masked_example(TRAJ, byte_tokenize)
    by_msg = {}
    for _tok, m, i in zip(ex.input_ids, ex.loss_mask, ex.message_index):
        by_msg.setdefault(i, []).append(m)
    assert sum(by_msg[1]) == 0 and len(by_msg[1]) > 0        # failed call: present, no loss
    assert sum(by_msg[3]) > 0 and sum(by_msg[5]) > 0          # recovery and final edit: trained
    assert sum(by_msg[0]) == sum(by_msg[2]) == sum(by_msg[4]) == 0   # user/tool: never trained
    text = bytes(ex.input_ids).decode()
    assert 'read_file({"path": "utils.py"})' in text           # kept in the input
    # exactly the assistant content bytes + "<|im_end|>" are trained
    trained = bytes(t for t, m in zip(ex.input_ids, ex.loss_mask) if m).decode()
    assert trained == 'read_file({"path": "util.py"})<|im_end|>edit: return a + b<|im_end|>'


def test_em_sft_loss_differs_from_both_plausible_bugs():
    model = tiny_qwen2("sdpa", vocab_size=256, initializer_range=0.1)
    ex = error_masked_example(TRAJ, byte_tokenize)
    plain = error_masked_example(TRAJ, byte_tokenize, mask_failed_calls=False)
    dropped = error_masked_example(TRAJ[:1] + TRAJ[3:], byte_tokenize)   # failed call removed
    with torch.no_grad():
        em = unpacked_loss(model, [ex.input_ids], [ex.loss_mask]).item()
        trains_on_error = unpacked_loss(model, [plain.input_ids], [plain.loss_mask]).item()
        no_context = unpacked_loss(model, [dropped.input_ids], [dropped.loss_mask]).item()
    assert sum(plain.loss_mask) > sum(ex.loss_mask)
    assert sum(dropped.loss_mask) == sum(ex.loss_mask)      # same trained tokens ...
    assert abs(em - no_context) > 1e-5                      # ... but a different context
    assert abs(em - trains_on_error) > 1e-5


# --- TST: split at compression points / context switches, train each output on its real context ---

SYS = {"role": "system", "content": "You are a coding agent."}
USER = {"role": "user", "content": "fix the failing test in calc.py"}


def _a(text):
    return {"role": "assistant", "content": text}


def _t(text, error=False):
    return {"role": "tool", "content": text, "error": error}


def _run_with_compression():
    c1 = [SYS, USER]
    o1 = _a('read_file({"path": "calc.py"})')
    c2 = c1 + [o1, _t("def add(a, b): return a - b")]
    o2 = _a('run_tests({"cmd": "pytest"})')
    c3 = c2 + [o2, _t("1 failed: test_add")]
    o3 = _a("The bug: add subtracts.")
    summary = {"role": "user", "content": "Summary so far: calc.add subtracts; test_add fails."}
    c4 = [SYS, USER, summary]                                    # compression: the history is replaced
    o4 = _a('edit_file({"path": "calc.py", "patch": "return a + b"})')
    c5 = c4 + [o4, _t("bad patch", error=True)]
    o5 = _a('edit_file({"path": "calc.py", "old": "a - b", "new": "a + b"})')
    return [{"context": c, "output": o} for c, o in [(c1, o1), (c2, o2), (c3, o3), (c4, o4), (c5, o5)]]


def test_tst_splits_where_the_context_was_rewritten():
    assert tst_segments(_run_with_compression()) == [[0, 1, 2], [3, 4]]
    appended = _run_with_compression()[:3]
    assert tst_segments(appended) == [[0, 1, 2]]


def test_every_output_is_trained_on_exactly_the_context_it_was_generated_from():
    requests = _run_with_compression()
    examples = tst_examples(requests, byte_tokenize)
    trained_outputs = 0
    for seg, ex in zip(tst_segments(requests), examples):
        for k in seg:
            ctx_ids = error_masked_example(list(requests[k]["context"]), byte_tokenize).input_ids
            at = len(requests[k]["context"])
            start = ex.message_index.index(at)
            assert ex.input_ids[:start] == ctx_ids                 # what the model saw, token for token
            trained = [m for m, i in zip(ex.loss_mask, ex.message_index) if i == at]
            trained_outputs += any(trained)
    assert trained_outputs == 4                                      # the failed edit (request 3) is masked
    # the single-conversation log trains the post-compression outputs after a history they never saw
    flat = single_conversation(requests)
    idx = flat.index(requests[4]["output"])
    assert flat[:idx] != list(requests[4]["context"])


def test_a_carried_over_assistant_message_is_context_not_trained_twice():
    c1 = [SYS, USER]
    o1 = _a("plan: read calc.py")
    c2 = [SYS, {"role": "user", "content": "mode switch: now in edit mode"}, o1]   # o1 kept, history rewritten
    o2 = _a("edit calc.py")
    requests = [{"context": c1, "output": o1}, {"context": c2, "output": o2}]
    assert tst_segments(requests) == [[0], [1]]
    second = tst_examples(requests, byte_tokenize)[1]
    assert not any(m for m, i in zip(second.loss_mask, second.message_index) if i == 2)   # o1: context here
    assert any(m for m, i in zip(second.loss_mask, second.message_index) if i == 3)


def test_lesson_tokenizer_matches_the_model():
    from course_lib.agentic import lesson_tokenizer

    model = tiny_qwen2("sdpa", vocab_size=300)
    model.lesson_model_kind = "random"
    tok = lesson_tokenizer(model)
    assert tok.encode("<|im_start|>x") == list("<|im_start|>x".encode())
    assert max(tok.encode("é漢")) < 300 and "byte" in tok.note
    with pytest.raises(ValueError, match="vocab"):
        small = tiny_qwen2("sdpa", vocab_size=64)
        small.lesson_model_kind = "random"
        lesson_tokenizer(small)


def test_chatml_pieces_tokenise_exactly_as_the_chat_template():
    """With a BPE tokenizer (the course's kind, special tokens as single ids), tokenising the ChatML
    pieces one by one gives the ids of the tokenizer's own chat template: the loss mask lines up."""
    from course_lib.training.tinymodel import to_transformers_tokenizer, train_tokenizer

    tok = to_transformers_tokenizer(train_tokenizer([m["content"] for m in TRAJ] * 30, vocab_size=320))
    ex = error_masked_example(TRAJ, lambda text: tok.encode(text, add_special_tokens=False))
    plain = [{k: v for k, v in m.items() if k != "error"} for m in TRAJ]
    assert ex.input_ids == list(tok.apply_chat_template(plain))
    assert max(ex.input_ids) < len(tok)
