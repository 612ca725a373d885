"""Plausible wrong answers to lesson 07's exercises."""
from __future__ import annotations

from course_lib.drill.evaluate import category_of


def _blocks(answer, lower=True, keep_open=True):
    blocks, inside, tag, lines = [], False, "", []
    for line in (answer or "").splitlines():
        s = line.strip()
        if s.startswith("```"):
            if not inside:
                inside, lines = True, []
                words = s.strip("`").split()
                tag = (words[0].lower() if lower else words[0]) if words else ""
                continue
            if s.strip("`") == "":
                blocks.append((tag, lines))
                inside = False
                continue
        if inside:
            lines.append(line)
    if inside and lines and keep_open:
        blocks.append((tag, lines))
    return blocks


def _join(blocks, tags):
    kept = ["\n".join(ls).rstrip("\n") for t, ls in blocks if t in tags or t == ""]
    kept = [c for c in kept if c.strip()]
    return "\n\n".join(kept) + "\n" if kept else None


ALL_TAGS = {"python", "py", "python3", "py3", "ipython", "pycon"}


def extract_case_sensitive(answer):        # "```Python" is not recognised
    return _join(_blocks(answer, lower=False), ALL_TAGS)


def extract_without_python3(answer):       # forgets the python3 / py3 tags
    return _join(_blocks(answer), {"python", "py"})


def extract_first_block_only(answer):      # drops the usage example in the second block
    blocks = [(t, ls) for t, ls in _blocks(answer) if t in ALL_TAGS or t == ""]
    return _join(blocks[:1], ALL_TAGS)


def extract_closed_only(answer):           # a truncated answer's open block is lost
    return _join(_blocks(answer, keep_open=False), ALL_TAGS)


def extract_any_language(answer):          # keeps bash and json blocks too
    blocks = _blocks(answer)
    return _join([("", ls) for _, ls in blocks], ALL_TAGS)


def extract_without_ipython_pycon(answer):  # the four common tags only
    return _join(_blocks(answer), {"python", "py", "python3", "py3"})


def extract_unindented_fences_only(answer):  # line.startswith("```") without strip(): a fence in a list is missed
    blocks, inside, tag, lines = [], False, "", []
    for line in (answer or "").splitlines():
        if line.startswith("```"):
            if not inside:
                inside, lines = True, []
                words = line.strip("`").split()
                tag = words[0].lower() if words else ""
                continue
            if line.strip("`").strip() == "":
                blocks.append((tag, lines))
                inside = False
                continue
        if inside:
            lines.append(line)
    if inside and lines:
        blocks.append((tag, lines))
    return _join(blocks, ALL_TAGS)


def extract_closes_on_three_only(answer):    # a "````" line does not close: the block runs on
    blocks, inside, tag, lines = [], False, "", []
    for line in (answer or "").splitlines():
        s = line.strip()
        if not inside and s.startswith("```"):
            inside, lines = True, []
            words = s.strip("`").split()
            tag = words[0].lower() if words else ""
            continue
        if inside and s == "```":
            blocks.append((tag, lines))
            inside = False
            continue
        if inside:
            lines.append(line)
    if inside and lines:
        blocks.append((tag, lines))
    return _join(blocks, ALL_TAGS)


def extract_tag_after_three_chars(answer):   # tag = fence[3:]: "````python" has the tag "`python"
    blocks, inside, tag, lines = [], False, "", []
    for line in (answer or "").splitlines():
        s = line.strip()
        if s.startswith("```"):
            if not inside:
                inside, lines = True, []
                tag = s[3:].strip().lower()
                continue
            if s.strip("`") == "":
                blocks.append((tag, lines))
                inside = False
                continue
        if inside:
            lines.append(line)
    if inside and lines:
        blocks.append((tag, lines))
    return _join([(t.split()[0] if t.split() else "", ls) for t, ls in blocks], ALL_TAGS)


def extract_with_a_regex(answer):            # the classic one-liner: only closed blocks, tag right after ```
    import re

    kept = [code.rstrip("\n") for tag, code in re.findall(r"```(\w*)\n(.*?)```", answer or "", re.S)
            if tag.lower() in ALL_TAGS or tag == ""]
    kept = [c for c in kept if c.strip()]
    return "\n\n".join(kept) + "\n" if kept else None


def _r(a, b):
    return a / b if b else 0.0


def rates_course_fcr(summary):             # FCR from closed fences instead of (N - NoCode) / N
    c, n = summary["counts"], summary["total"]
    return {"Pass@1": _r(c["Pass"], n), "FCR": _r(summary["fenced"], n), "SER": _r(c["SyntaxError"], n),
            "RSR": _r(c["Pass"], n - c["NoCode"] - c["SyntaxError"]), "Fail rate": _r(c["Fail"], n)}


def rates_ser_among_code(summary):         # SER over answers with code, not over N
    c, n = summary["counts"], summary["total"]
    return {"Pass@1": _r(c["Pass"], n), "FCR": _r(n - c["NoCode"], n),
            "SER": _r(c["SyntaxError"], n - c["NoCode"]),
            "RSR": _r(c["Pass"], n - c["NoCode"] - c["SyntaxError"]), "Fail rate": _r(c["Fail"], n)}


def rates_rsr_over_code(summary):          # RSR forgets to remove the syntax errors
    c, n = summary["counts"], summary["total"]
    return {"Pass@1": _r(c["Pass"], n), "FCR": _r(n - c["NoCode"], n), "SER": _r(c["SyntaxError"], n),
            "RSR": _r(c["Pass"], n - c["NoCode"]), "Fail rate": _r(c["Fail"], n)}


def rates_fail_with_timeout(summary):      # counts timeouts as logic errors
    c, n = summary["counts"], summary["total"]
    return {"Pass@1": _r(c["Pass"], n), "FCR": _r(n - c["NoCode"], n), "SER": _r(c["SyntaxError"], n),
            "RSR": _r(c["Pass"], n - c["NoCode"] - c["SyntaxError"]),
            "Fail rate": _r(c["Fail"] + c["Timeout"], n)}


def category_sandbox_error_is_fail(status):   # blames the model for a broken sandbox
    return "Fail" if status == "sandbox_error" else category_of(status)


def category_sandbox_error_is_zero(status):   # "returns 0" for a sandbox failure
    return 0 if status == "sandbox_error" else category_of(status)


def category_timeout_is_fail(status):
    return "Fail" if status == "timeout" else category_of(status)


def category_memory_is_error(status):       # a memory blow-up is the program's fault, not the sandbox's
    return "Error" if status == "memory_limit" else category_of(status)


WRONG_ANSWERS = {
    "07-1": [extract_case_sensitive, extract_without_python3, extract_first_block_only, extract_closed_only,
             extract_any_language, extract_without_ipython_pycon, extract_unindented_fences_only,
             extract_closes_on_three_only, extract_tag_after_three_chars, extract_with_a_regex],
    "07-2": [rates_course_fcr, rates_ser_among_code, rates_rsr_over_code, rates_fail_with_timeout],
    "07-3": [category_sandbox_error_is_fail, category_sandbox_error_is_zero, category_timeout_is_fail,
             category_memory_is_error],
}
