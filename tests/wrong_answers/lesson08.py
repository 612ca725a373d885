"""Plausible wrong answers to lesson 08's exercises."""
from __future__ import annotations


def causal_mask(parents):                       # ignores the tree: every earlier token is visible
    n = len(parents)
    return [[j <= i for j in range(n)] for i in range(n)]


def parent_only(parents):                       # the parent but not the grandparents
    n = len(parents)
    return [[j == i or j == parents[i] for j in range(n)] for i in range(n)]


def without_self(parents):                      # forgets that a token sees itself
    n = len(parents)
    mask = [[False] * n for _ in range(n)]
    for i, p in enumerate(parents):
        if p >= 0:
            mask[i] = list(mask[p])
            mask[i][p] = True
    return mask


def transposed(parents):                        # descendants instead of ancestors
    n = len(parents)
    mask = [[False] * n for _ in range(n)]
    for i, p in enumerate(parents):
        if p >= 0:
            mask[i] = list(mask[p])
        mask[i][i] = True
    return [[mask[j][i] for j in range(n)] for i in range(n)]


def text_markers(messages):                     # guesses from the text
    marks = ("Error", "Traceback", "FAILED", "No such file", "timed out")
    return [m["role"] == "assistant" and i + 1 < len(messages) and messages[i + 1]["role"] == "tool"
            and any(k in messages[i + 1]["content"] for k in marks) for i, m in enumerate(messages)]


def any_later_tool_error(messages):             # blames a call for a failure further on
    return [m["role"] == "assistant" and any(x["role"] == "tool" and x.get("error") for x in messages[i + 1:])
            for i, m in enumerate(messages)]


def flags_the_tool_message(messages):           # marks the tool result, not the call
    return [m["role"] == "tool" and bool(m.get("error")) for m in messages]


def flag_or_text(messages):                     # the flag, or else an error word in the text
    return [m["role"] == "assistant" and i + 1 < len(messages) and messages[i + 1]["role"] == "tool"
            and (messages[i + 1].get("error") or "Error" in messages[i + 1]["content"])
            for i, m in enumerate(messages)]


def sorted_output(before, after):               # right sets, wrong order
    f2p = sorted(t for t, ok in after.items() if ok and not before.get(t, False))
    p2p = sorted(t for t, ok in after.items() if ok and before.get(t, False))
    return f2p, p2p


def missing_before_counts_as_pass(before, after):
    f2p = [t for t, ok in after.items() if ok and not before.get(t, True)]
    p2p = [t for t, ok in after.items() if ok and before.get(t, True)]
    return f2p, p2p


def p2p_ignores_after(before, after):           # a test that broke still counts as Pass-to-Pass
    f2p = [t for t, ok in after.items() if ok and not before.get(t, False)]
    p2p = [t for t in after if before.get(t, False)]
    return f2p, p2p


def status_words_in_text(messages):                 # issue 34: reads the sandbox's status words in the text
    words = ("error", "timeout", "memory_limit", "failed")
    return [m.get("role") == "assistant" and i + 1 < len(messages) and messages[i + 1].get("role") == "tool"
            and (messages[i + 1].get("error") is True or any(w in str(messages[i + 1].get("content")) for w in words))
            for i, m in enumerate(messages)]


def order_of_before(before, after):                 # issue 34: walks before, not after
    f2p = [t for t in list(before) + [t for t in after if t not in before] if after.get(t) and not before.get(t, False)]
    p2p = [t for t in before if after.get(t) and before[t]]
    return f2p, p2p


WRONG_ANSWERS = {
    "08-1": [causal_mask, parent_only, without_self, transposed],
    "08-2": [text_markers, any_later_tool_error, flags_the_tool_message, flag_or_text, status_words_in_text],
    "08-3": [sorted_output, missing_before_counts_as_pass, p2p_ignores_after, order_of_before],
}
