"""The drill's ci teacher: rules that write code, and tests for it, from an instruction alone — NOT an LLM.

In the lecture's pipeline one model, Qwen3-30B-A3B-Instruct, standardises each instruction
(``CodeInstructionGenerator``), writes *new* code for it (``ScriptSynthesizer``) and scores that code
0–10 against the instruction (``LogicIntegrityAuditor``). The model sees the instruction only: never the
dataset's answer, never a test. A CPU cannot run that model, so ci serves :class:`RuleTeacher` on the
same OpenAI-compatible endpoint: documented rules that read the drill's task sentences ("takes a list
of integers and returns the sum of the even numbers") and nothing else.

1. **standardise** — the raw request → ``Write a Python function `name(arg)` that takes … and returns
   ….`` plus a skeleton; the name and the argument are read from the request (:func:`read_instruction`);
2. **synthesise** — the standardised instruction → a function written by the rules (:func:`write_code`);
3. **audit** — the teacher writes its own tests from the instruction (:func:`write_tests`: its own
   inputs, the expected values from its own reading of the sentence, as the lecture's auditor reasons
   about its Fibonacci sample), runs them with the code in the sandbox, and scores with lesson 05's
   rubric (:func:`course_lib.training.teacher.rubric_score`).

An instruction the rules cannot read gets no code: the synthesiser answers in prose, the auditor
scores "no code" or a syntax error, and the sieve drops the row with that reason in the funnel. The
teacher never receives the row's reference answer or hidden tests (:meth:`RuleTeacher.register`
refuses them); the drill's hidden tests are for evaluation, and for RL rewards, only.

Introduced in lesson 07.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from course_lib.training.teacher import OfflineTeacher, audit_code, standardize_instruction

RULE_TEACHER_NAME = "course-rule-teacher"


@dataclass(frozen=True)
class TaskSpec:
    """What the rules read from an instruction: the function's name and argument, what it takes
    (``"list"`` of integers, ``"integer"`` n for the numbers 1..n, or ``"string"``), the operation and
    which items it keeps (``"all"``, ``"even"``, ``"gt:10"``, ``"vowels"``, ...)."""

    name: str
    arg: str
    takes: str
    op: str
    keep: str
    wants: str          # the "returns ..." clause as the instruction words it


_SIGNATURE = re.compile(r"`(?P<name>[A-Za-z_]\w*)\((?P<arg>[A-Za-z_]\w*)\)`")
_NAMED = re.compile(r"named `(?P<name>[A-Za-z_]\w*)`[^`]*`(?P<arg>[A-Za-z_]\w*)`")
_DEF_LINE = re.compile(r"^\s*def (?P<name>[A-Za-z_]\w*)\((?P<arg>[A-Za-z_]\w*)\):", re.M)
_TAKES = (("list", re.compile(r"\ba list of integers\b", re.I)),
          ("integer", re.compile(r"\ban integer\b", re.I)),
          ("string", re.compile(r"\ba string\b", re.I)))
_WANTS = re.compile(r"\breturns? (?P<wants>[^.]+)", re.I)
# (operation, pattern) in the order they are tried: "the sum of the squares" before "the sum"
_OPS = (("squares", r"\bsum of the squares of\b"), ("sum", r"\bsum of\b"), ("product", r"\bproduct of\b"),
        ("count", r"\bhow many\b|\bthe number of\b"), ("max", r"\blargest\b|\bmaximum\b"),
        ("upper", r"\bupper-?case string\b"), ("double", r"\brepeats? twice\b"),
        ("reverse", r"\breversed string\b"), ("keep", r"\ba string made of\b"))
_KEEPS = (("nonspace", r"\bnot (?:a )?spaces?\b"), ("even", r"\beven\b"), ("odd", r"\bodd\b"),
          ("positive", r"\bpositive\b"), ("negative", r"\bnegative\b"), ("vowels", r"\bvowels?\b"),
          ("digits", r"\bdigits?\b"), ("letters", r"\bletters?\b"), ("all", r"\ball the\b"))
_STRING_OPS = {"keep", "upper", "double", "reverse", "count"}
_NUMBER_OPS = {"sum", "count", "product", "squares", "max"}


def read_instruction(text: str) -> TaskSpec | None:
    """Read a drill task from an instruction (raw or standardised): the function's name and argument
    (```name(arg)```, "named `name` … `arg`", or a skeleton's ``def`` line), what it takes, the operation
    and the items it keeps. None when the rules cannot read it. Introduced in lesson 07."""
    sig = _SIGNATURE.search(text) or _NAMED.search(text) or _DEF_LINE.search(text)
    wants = _WANTS.search(text.split("```")[0])
    if not sig or not wants:
        return None
    sentence = text.split("```")[0]
    takes = next((kind for kind, pat in _TAKES if pat.search(sentence)), None)
    what = wants.group("wants").strip()
    op = next((key for key, pat in _OPS if re.search(pat, what, re.I)), None)
    m = re.search(r"\bgreater than (-?\d+)\b", what)
    keep = f"gt:{m.group(1)}" if m else next((key for key, pat in _KEEPS if re.search(pat, what, re.I)), None)
    if takes is None or op is None or keep is None:
        return None
    numeric = takes in ("list", "integer")
    if (numeric and (op not in _NUMBER_OPS or keep in ("nonspace", "vowels", "digits", "letters"))) or (
            not numeric and (op not in _STRING_OPS or keep in ("even", "odd", "positive", "negative")
                             or keep.startswith("gt:"))):
        return None
    return TaskSpec(sig.group("name"), sig.group("arg"), takes, op, keep, what)


_TAKES_PHRASE = {"list": "a list of integers `{arg}`", "integer": "an integer `{arg}`", "string": "a string `{arg}`"}


def standard_instruction(spec: TaskSpec) -> str:
    """The standardised instruction the rules write for ``spec``: one sentence and a skeleton."""
    head = (f"Write a Python function `{spec.name}({spec.arg})` that takes "
            f"{_TAKES_PHRASE[spec.takes].format(arg=spec.arg)} and returns {spec.wants}.")
    return f"{head}\n```python\ndef {spec.name}({spec.arg}):\n    \"\"\"Return {spec.wants}.\"\"\"\n    ...\n```"


_LOOP_VAR = {"list": ("x", "v"), "integer": ("i", "j"), "string": ("ch", "c")}
_START = {"sum": "0", "count": "0", "product": "1", "squares": "0", "max": "0",
          "keep": '""', "upper": '""', "double": '""', "reverse": '""'}
_UPDATE = {"sum": "result += {v}", "count": "result += 1", "product": "result *= {v}",
           "squares": "result += {v} * {v}", "max": "result = max(result, {v})", "keep": "result += {v}",
           "upper": "result += {v}.upper()", "double": "result += {v} * 2", "reverse": "result = {v} + result"}
_CONDITION = {"all": "", "even": "{v} % 2 == 0", "odd": "{v} % 2 == 1", "positive": "{v} > 0",
              "negative": "{v} < 0", "vowels": '{v} in "aeiou"', "digits": "{v}.isdigit()",
              "letters": "{v}.isalpha()", "nonspace": '{v} != " "'}


def write_code(spec: TaskSpec) -> str:
    """The function the rules write for ``spec``: one loop with an accumulator. Introduced in lesson 07."""
    v = next(name for name in _LOOP_VAR[spec.takes] if name != spec.arg)
    loop = f"for {v} in range(1, {spec.arg} + 1):" if spec.takes == "integer" else f"for {v} in {spec.arg}:"
    cond = f"{v} > {spec.keep[3:]}" if spec.keep.startswith("gt:") else _CONDITION[spec.keep].format(v=v)
    update = _UPDATE[spec.op].format(v=v)
    lines = [f"def {spec.name}({spec.arg}):", f"    result = {_START[spec.op]}", f"    {loop}"]
    lines += [f"        if {cond}:", f"            {update}"] if cond else [f"        {update}"]
    return "\n".join(lines + ["    return result"]) + "\n"


# the teacher's own test inputs, chosen by the teacher, not taken from any dataset
TEACHER_INPUTS: dict[str, tuple[Any, ...]] = {
    "list": ([1, 2, 3, 4, 5, 6], [], [-5, 12, 0, 7, -8, 21], [10, 11, -11, 30]),
    "integer": (0, 1, 4, 23),
    "string": ("", "Hello World 2025", "aeiou 123 xyz", " a1 B2 c3 "),
}


def _keeps(spec: TaskSpec, item: Any) -> bool:
    if spec.keep.startswith("gt:"):
        return item > int(spec.keep[3:])
    return {"all": lambda x: True, "even": lambda x: x % 2 == 0, "odd": lambda x: x % 2 == 1,
            "positive": lambda x: x > 0, "negative": lambda x: x < 0, "vowels": lambda c: c in "aeiou",
            "digits": lambda c: c.isdigit(), "letters": lambda c: c.isalpha(),
            "nonspace": lambda c: c != " "}[spec.keep](item)


def expected_answer(spec: TaskSpec, value: Any) -> Any:
    """What the instruction asks the function to return for ``value``, by the teacher's own reading
    (built-ins over the kept items, not the loop :func:`write_code` writes). Introduced in lesson 07."""
    items = range(1, value + 1) if spec.takes == "integer" else value
    kept = [x for x in items if _keeps(spec, x)]
    if spec.op == "sum":
        return sum(kept)
    if spec.op == "count":
        return len(kept)
    if spec.op == "product":
        return math.prod(kept)
    if spec.op == "squares":
        return sum(x * x for x in kept)
    if spec.op == "max":
        return max([0, *kept])
    text = "".join(kept)
    return {"keep": text, "upper": text.upper(), "double": "".join(c * 2 for c in kept),
            "reverse": text[::-1]}[spec.op]


def write_tests(spec: TaskSpec) -> str:
    """The teacher's own assert lines for ``spec`` (its inputs, :data:`TEACHER_INPUTS`, and the values
    :func:`expected_answer` reads from the instruction). Introduced in lesson 07."""
    return "".join(f"assert {spec.name}({v!r}) == {expected_answer(spec, v)!r}\n" for v in TEACHER_INPUTS[spec.takes])


CANNOT_WRITE = ("The course's rule teacher cannot write code for this instruction: its rules read only the "
                "drill's task sentences (what the function takes, the operation, which items it keeps).")


class RuleTeacher(OfflineTeacher):
    """The drill's ci teacher (lesson 07): the three codegen prompts answered by rules that see the
    instruction only — NOT a language model; it stands in for the lecture's Qwen3-30B-A3B-Instruct.

    It takes no reference answers or tests (:meth:`register` raises). ``run_code``,
    ``sandbox_timeout_s`` and ``max_parallel_runs`` are :class:`~course_lib.training.teacher.OfflineTeacher`'s.
    Introduced in lesson 07."""

    model_name = RULE_TEACHER_NAME
    uses_references = False
    # how lesson 05's codegen pipeline describes the teacher it serves ({auditor}: sandbox-run or compile-only)
    served_as = ("course rule teacher on 127.0.0.1 (writes each row's code and its own tests from the instruction "
                 "alone, {auditor}; NOT an LLM: it stands in for the lecture's Qwen3-30B-A3B-Instruct)")

    def register(self, items) -> None:
        raise TypeError("the rule teacher writes code from the instruction alone: it takes no reference "
                        "answers and no tests")

    def standardize(self, raw: str) -> str:
        spec = read_instruction(raw)
        return standardize_instruction(raw) if spec is None else standard_instruction(spec)

    def synthesize(self, instruction: str) -> str:
        spec = read_instruction(instruction)
        return CANNOT_WRITE if spec is None else f"```python\n{write_code(spec)}```"

    def audit(self, instruction: str, code: str) -> dict:
        spec = read_instruction(instruction)
        tests = None if spec is None else write_tests(spec)
        res = audit_code(code, tests=tests, timeout_s=self.sandbox_timeout_s, semaphore=self._runs,
                         run_code=self.run_code, timing=False)   # the same code, the same feedback
        if spec is None:
            res["feedback"] = "the rules cannot read this instruction, so they wrote no tests; " + res["feedback"]
        else:
            res["feedback"] += f" [the teacher's own {tests.count(chr(10))} tests, written from the instruction]"
        return res
