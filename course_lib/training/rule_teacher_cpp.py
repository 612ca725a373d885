"""The drill's ci teacher in C++ (issue 38): the rule teacher of lesson 07 reading C++ instructions, writing
C++ code, and auditing it with its own tests through the C++ compile-and-run judge — NOT an LLM.

The C++ sample (``assets/tiny_codes_cpp/``, :mod:`course_lib.drill.taskgen` with ``language="cpp"``) asks for
the same tasks as the Python one, with the C++ declaration in the request (``Write a C++ function `long long
castle(const std::vector<long long>& numbers)` that takes a list of integers and returns the sum of the even
numbers.``). :class:`CppRuleTeacher` answers lesson 05's three codegen prompts as :class:`RuleTeacher` does:

1. **standardise** — :func:`read_cpp_instruction` finds the declaration (the C++ judge's
   :func:`~course_lib.evaluation.sandbox.cpp.parse_signature`), reads the task with the Python teacher's
   :func:`~course_lib.training.rule_teacher.read_instruction` (the sentence is the same), checks that the
   declared types fit the task (a list of integers is a ``std::vector<long long>``, a count a ``long long``
   ...) and writes one sentence plus a C++ skeleton (:func:`standard_cpp_instruction`);
2. **synthesise** — :func:`write_cpp_code`: ``taskgen``'s C++ rendering of what it read (one loop with an
   accumulator), returned as bare code (LazyLLM's ``_parse_code`` strips only a ```` ```python ```` fence:
   a ```` ```cpp ```` tag would leak into the code);
3. **audit** — its own cases (:data:`CPP_TEACHER_INPUTS`, expected values from
   :func:`~course_lib.training.rule_teacher.expected_answer`) through
   :func:`~course_lib.evaluation.sandbox.cpp.run_cpp_tests` (compile, then run in the sandbox), scored with
   lesson 05's rubric (:func:`~course_lib.training.teacher.rubric_score`; a compile error is its
   ``syntax_error``).

As in Python, the rules invert the sample's templates, so the kept rows are gold answers (an upper bound on
what a real teacher gives). LazyLLM's operator prompts still say "Python" (they are lesson 05's); the rules
read the request, not the system prompt. The teacher never sees a hidden test (``register`` refuses).

Introduced for issue 38.
"""
from __future__ import annotations

import re
from typing import Any

from course_lib.training.rule_teacher import (
    CANNOT_WRITE,
    TEACHER_INPUTS,
    RuleTeacher,
    TaskSpec,
    expected_answer,
    read_instruction,
)
from course_lib.training.teacher import rubric_score

CPP_RULE_TEACHER_NAME = "course-rule-teacher-cpp"

_BACKTICKED = re.compile(r"`([^`\n]+\([^`\n]*\))`")
_PARAM_TYPE = {"list": "std::vector<long long>", "integer": "long long", "string": "std::string"}
_FAMILY = {"list": "list", "integer": "range", "string": "string"}
_FILTER = {"nonspace": "nospace", "gt:10": "big"}

CPP_TEACHER_INPUTS: dict[str, tuple[Any, ...]] = {**TEACHER_INPUTS, "integer": (0, 1, 4, 20)}
"""The C++ teacher's own test inputs: the Python teacher's, with 20 for its 23 (23! does not fit a ``long long``;
20! does)."""


def read_cpp_instruction(text: str) -> tuple[TaskSpec, str] | None:
    """(task, declaration) read from a C++ instruction: the first backticked declaration the C++ judge can
    parse, with one named parameter, whose types fit the task the sentence asks for; None when the rules
    cannot read it. Introduced for issue 38."""
    from course_lib.evaluation.sandbox.cpp import parse_signature

    sentence = text.split("```")[0]
    for m in _BACKTICKED.finditer(sentence):
        try:
            sig = parse_signature(m.group(1))
        except (ValueError, TypeError):
            continue
        if len(sig.params) != 1 or not sig.param_names[0]:
            continue
        spec = read_instruction(text.replace(m.group(0), f"`{sig.name}({sig.param_names[0]})`"))
        if spec is None or spec.name != sig.name:
            return None
        returns = "std::string" if spec.takes == "string" and spec.op != "count" else "long long"
        if sig.params[0] != _PARAM_TYPE[spec.takes] or sig.returns != returns:
            return None
        return spec, m.group(1).strip()
    return None


def _task_keys(spec: TaskSpec) -> tuple[str, str, str] | None:
    keep = _FILTER.get(spec.keep, spec.keep)
    if keep.startswith("gt:"):     # taskgen's C++ filters know "greater than 10" only
        return None
    return _FAMILY[spec.takes], spec.op, keep


def write_cpp_code(spec: TaskSpec) -> str | None:
    """The C++ function the rules write for ``spec``: ``taskgen``'s C++ rendering (``#include`` lines, the
    declaration, one loop with an accumulator); None for a task it has no rendering of. Introduced for issue 38."""
    from course_lib.drill.taskgen import CPP_LOOP_VARS, render_code

    keys = _task_keys(spec)
    if keys is None:
        return None
    var = next(v for v in CPP_LOOP_VARS[keys[0]] if v != spec.arg)
    return render_code(*keys, spec.name, spec.arg, var, language="cpp")


def standard_cpp_instruction(spec: TaskSpec, declaration: str) -> str:
    """The standardised C++ instruction: one sentence with the declaration, and a skeleton."""
    from course_lib.drill.taskgen import cpp_includes

    takes = {"list": "a list of integers", "integer": f"an integer `{spec.arg}`", "string": "a string"}[spec.takes]
    head = f"Write a C++ function `{declaration}` that takes {takes} and returns {spec.wants}."
    keys = _task_keys(spec)
    includes = "".join(f"#include <{h}>\n" for h in (cpp_includes(*keys) if keys else [])) + ("\n" if keys else "")
    return f"{head}\n```cpp\n{includes}{declaration} {{\n    // Return {spec.wants}.\n}}\n```"


def cpp_cases(spec: TaskSpec) -> list[tuple[Any, Any]]:
    """The teacher's own cases for the C++ judge: ``(input, expected)`` for :data:`CPP_TEACHER_INPUTS`."""
    return [(v, expected_answer(spec, v)) for v in CPP_TEACHER_INPUTS[spec.takes]]


class CppRuleTeacher(RuleTeacher):
    """:class:`~course_lib.training.rule_teacher.RuleTeacher` for C++ instructions (the ``--language cpp``
    drill's step 2): reads the declaration and the task, writes C++ and audits it with its own cases through
    the C++ judge, on the sandbox backend its ``run_code`` names (a ``functools.partial`` of
    ``sandbox.run_code`` with ``backend=``; else the sandbox's preferred backend). Without ``run_code`` the
    auditor does not run the code (lesson 05's "not run" score). NOT an LLM. Introduced for issue 38."""

    model_name = CPP_RULE_TEACHER_NAME
    served_as = ("course rule teacher for C++ on 127.0.0.1 (writes each row's C++ code and its own tests from the "
                 "instruction alone, {auditor} through the C++ compile-and-run judge; NOT an LLM; on the ci sample its "
                 "rules invert taskgen's templates, so its rows are gold answers)")

    def standardize(self, raw: str) -> str:
        found = read_cpp_instruction(raw)
        return super().standardize(raw) if found is None else standard_cpp_instruction(*found)

    def synthesize(self, instruction: str) -> str:
        found = read_cpp_instruction(instruction)
        code = write_cpp_code(found[0]) if found else None
        return CANNOT_WRITE if code is None else code

    def audit(self, instruction: str, code: str) -> dict:
        found = read_cpp_instruction(instruction)
        if not (code or "").strip() or code.strip() == CANNOT_WRITE:
            why = "" if found else "the rules cannot read this instruction, so they wrote no tests; "
            return {"score": rubric_score("no code"), "feedback": why + "no code"}
        if found is None:
            return {"score": rubric_score("no code"), "feedback": "the rules cannot read this instruction, so they "
                                                                  "wrote no tests and cannot call the code"}
        spec, declaration = found
        defines = re.search(rf"\b{re.escape(spec.name)}\s*\([^;{{}}]*\)\s*\{{", code) is not None
        documented = "//" in code or "/*" in code
        if self.run_code is None:
            return {"score": rubric_score("not run", defines=defines, documented=documented),
                    "feedback": "NOT compiled or run (no sandbox given)"}
        from course_lib.evaluation.sandbox.cpp import run_cpp_tests

        cases = cpp_cases(spec)
        backend = getattr(self.run_code, "keywords", {}).get("backend")
        with self._runs:
            res = run_cpp_tests(code, declaration, cases, timeout_s=self.sandbox_timeout_s, backend=backend)
        score = rubric_score(res.status, defines=defines, documented=documented, has_tests=True)
        own = f" [the teacher's own {len(cases)} tests, written from the instruction]"
        if res.status == "passed":
            return {"score": score, "feedback": f"compiled and ran cleanly in the sandbox ({res.backend}); its tests "
                                                "pass" + own}
        if res.status == "syntax_error":
            return {"score": score, "feedback": f"does not compile: {(res.detail or '')[:200]}" + own}
        if res.status == "failed":
            return {"score": score, "feedback": f"its tests fail: {(res.detail or '')[:200]}" + own}
        return {"score": score, "feedback": f"{res.status} when run in the sandbox: {(res.detail or '')[:200]}" + own}
