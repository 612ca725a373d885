"""Error-masked SFT (KAT-Coder V1 "EM-SFT"): keep failed tool calls in context, give them no loss.

Real agent trajectories contain tool calls that failed (wrong path, malformed arguments) followed
by a recovery. Dropping the failed call would teach a history that never happened (the recovery
then refers to an error the model never saw); training on it teaches the mistake. EM-SFT keeps the
failed call's tokens in the input and sets their loss mask to 0; the recovery keeps its loss.

Messages are dicts ``{"role": "system"|"user"|"assistant"|"tool", "content": str}``; every tool
message carries the harness's own status flag ``"error": True | False`` — True when the call could not
be executed (unknown tool, malformed arguments, the tool crashed or timed out). A failed call is read
from that flag, never from the text: a pytest run that reproduces the bug, a file that defines a
``ParseError`` class or a grep hit for "Error" are successful calls whose *content* mentions errors.

Introduced in lesson 08.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence


def tool_result_failed(message: dict) -> bool:
    """True when a tool message's harness status says the call failed (``"error": True``). Non-tool
    messages are never failures. A tool message without a boolean ``"error"`` flag is refused with a
    ValueError: guessing from the text would mask successful calls whose output mentions errors.
    Introduced in lesson 08."""
    if message.get("role") != "tool":
        return False
    flag = message.get("error")
    if not isinstance(flag, bool):
        raise ValueError(f"tool message {str(message.get('content', ''))[:60]!r} has no boolean 'error' "
                         f"flag (got {flag!r}); record the harness's status with each tool result")
    return flag


def failed_call_flags(messages: Sequence[dict]) -> list[bool]:
    """For each message: True when it is an assistant turn whose tool call failed (the tool message
    right after it has ``"error": True``). Introduced in lesson 08."""
    for i, msg in enumerate(messages):
        if msg.get("role") == "tool":
            try:
                tool_result_failed(msg)
            except ValueError as exc:
                raise ValueError(f"message {i}: {exc}") from None
    flags = [False] * len(messages)
    for i, msg in enumerate(messages):
        if msg.get("role") != "assistant":
            continue
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        if nxt is not None and tool_result_failed(nxt):
            flags[i] = True
    return flags


@dataclass
class MaskedExample:
    """Token ids, the loss mask and which message each token came from."""

    input_ids: list[int]
    loss_mask: list[int]
    message_index: list[int]


def render_chatml(role: str, content: str) -> tuple[str, str, str]:
    """The three pieces of one ChatML turn: header, content, footer. Introduced in lesson 08."""
    return f"<|im_start|>{role}\n", content, "<|im_end|>\n"


def error_masked_example(messages: Sequence[dict], tokenize: Callable[[str], list[int]], *,
                         mask_failed_calls: bool = True) -> MaskedExample:
    """Tokenise a trajectory in ChatML and build its loss mask.

    Loss on assistant content and its ``<|im_end|>``; no loss on system/user/tool turns, headers,
    and (with ``mask_failed_calls``) on assistant turns whose tool call failed. The failed turns
    stay in ``input_ids``. Introduced in lesson 08.
    """
    for i, m in enumerate(messages):
        if m.get("role") not in ("system", "user", "assistant", "tool"):
            raise ValueError(f"message {i}: unknown role {m.get('role')!r}; use system/user/assistant/tool")
    failed = failed_call_flags(messages) if mask_failed_calls else [False] * len(messages)
    ids: list[int] = []
    mask: list[int] = []
    where: list[int] = []
    for i, m in enumerate(messages):
        head, body, foot = render_chatml(m["role"], m.get("content", ""))
        trained = m["role"] == "assistant" and not failed[i]
        for piece, train_piece in ((head, False), (body, trained), (foot.rstrip("\n"), trained), ("\n", False)):
            toks = tokenize(piece) if piece else []
            ids += toks
            mask += [int(train_piece)] * len(toks)
            where += [i] * len(toks)
    return MaskedExample(ids, mask, where)


def byte_tokenize(text: str) -> list[int]:
    """A tokenizer that needs no files: one id per UTF-8 byte (ids 0–255). Introduced in lesson 08.
    Public: documented in docs/agentic.md, for students to call."""
    return list(text.encode("utf-8"))


# --- Tree-Structured Trajectory training (KAT-Coder V1 "TST") ----------------------------------------

def tst_segments(requests: Sequence[dict]) -> list[list[int]]:
    """Split an agent run into the pieces the model actually saw. Each request is one model call:
    ``{"context": [messages the model received], "output": the assistant message it produced}``.
    Request k continues the segment of request k-1 when its context starts with exactly what k-1 saw
    plus what k-1 produced (an append-only conversation); a compression point, a context switch or a
    mode change (the context was rewritten) starts a new segment. Returns lists of request indices.
    Introduced in lesson 08."""
    segments: list[list[int]] = []
    for k, req in enumerate(requests):
        if "context" not in req or "output" not in req:
            raise ValueError(f"request {k} needs 'context' (the messages the model received) and 'output'")
        if segments:
            prev = requests[k - 1]
            seen = list(prev["context"]) + [prev["output"]]
            if list(req["context"][:len(seen)]) == seen:
                segments[-1].append(k)
                continue
        segments.append([k])
    return segments


def tst_examples(requests: Sequence[dict], tokenize: Callable[[str], list[int]], *,
                 mask_failed_calls: bool = True) -> list[MaskedExample]:
    """One SFT example per :func:`tst_segments` segment: the last request's context plus its output,
    with loss on the outputs of that segment's requests only (an assistant message carried over from an
    earlier segment is context: it was trained there), failed calls masked as in EM-SFT. Every output is
    then trained on exactly the context it was generated from. Introduced in lesson 08."""
    examples = []
    for seg in tst_segments(requests):
        last = requests[seg[-1]]
        messages = list(last["context"]) + [last["output"]]
        produced = {len(requests[k]["context"]) for k in seg}
        for k in seg:
            if messages[len(requests[k]["context"])] != requests[k]["output"]:
                raise ValueError(f"request {k}: its output is not in the segment's final context")
        ex = error_masked_example(messages, tokenize, mask_failed_calls=mask_failed_calls)
        ex.loss_mask = [m if ex.message_index[j] in produced else 0 for j, m in enumerate(ex.loss_mask)]
        examples.append(ex)
    return examples


def single_conversation(requests: Sequence[dict]) -> list[dict]:
    """The plausible bug TST avoids: every message the run ever contained, in order of appearance, as
    one conversation (a compression summary then follows the full history it replaced).
    Introduced in lesson 08."""
    out: list[dict] = []
    for req in requests:
        for m in list(req["context"]) + [req["output"]]:
            if m not in out:
                out.append(m)
    return out
