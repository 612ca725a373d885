"""Error-masked SFT: failed calls stay in context with no loss; the recovery is trained."""
from __future__ import annotations

import pytest
import torch

from course_lib.agentic.emsft import byte_tokenize, error_masked_example, failed_call_flags, tool_result_failed
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
