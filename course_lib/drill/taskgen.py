"""A tiny-codes-shaped sample that the course writes itself (never rows copied from the hub).

``nampdn-ai/tiny-codes`` has 11 string columns plus ``idx``. The ci profile needs a few hundred to a few
thousand rows of the same shape whose answers hold runnable Python and that carry hidden tests, so the
drill can run offline. This module generates them from templated *task families* × *operations* ×
*filters*. The eval split has two parts, reported separately:

- **new instances** — combinations seen in training, with function names built from words that never
  occur in training, instructions worded in ways no training row is (:data:`EVAL_PROMPTS`) and test inputs
  that no training row's tests use (checked against every training row's inputs): has the model learnt to
  solve the task families it was taught, not the training prompts?
- **held-out combinations** — whole (family, operation, filter) combinations never shown in training
  (every operation and every filter is): can it compose what it learnt? Reported in two halves
  (:data:`HOLDOUT_HALVES`): triples whose (operation, filter) pair is trained in the other number family
  (near transfer) and triples whose pair no training row has.

**Names do not tell the task.** A function's name is drawn from a word pool (:data:`NAME_WORDS`; the
new-instances part from :data:`EVAL_NAME_WORDS`, never used in training) independently of the task's
family, operation and filter; only the argument's name may say the family (``numbers``, ``text``,
``n``). The instruction alone says what to compute, so a model given the ``def`` line still has to read
the instruction (:func:`name_guess_accuracy` measures what a name alone tells).

The training rows carry the defects real synthetic tiny-codes answers have (the course's simulation of a
noisy synthetic set, labelled in ``hidden_tests.jsonl``): content defects at the rates of
:data:`DEFECT_RATES` (prose-only answers, wrong code, code that does not run, answers in another
language, truncated answers) and format defects at the rates of :data:`FORMAT_DEFECT_RATES` (several
fences, a shell block, prose after the code, markdown headings, the Python code under another
language's fence tag: correct code in a messy answer, what the lecture's "格式对齐是基础" is about).
Eval rows never carry defects.

It stays in ``course_lib.drill`` (not a build-tools package) because it is used at run time, not only to
build the sample: step 1 reads its hidden tests (``load_hidden_tests``), lesson 07 prints its defect rates and
:mod:`course_lib.rl.audit` recomputes answers with :func:`expected_value`.

Files written by :func:`write_tiny_codes_sample` (``assets/tiny_codes/``):

- ``tiny_codes_sample.jsonl`` — exactly the hub's columns (``prompt, main_topic, subtopic, adjective,
  action_verb, scenario, target_audience, programming_language, common_sense_topic, idx, response``).
- ``hidden_tests.jsonl`` — one line per Python row: ``idx``, ``entry_point``, ``signature`` (the
  function's ``def`` line, given to the model HumanEval-style for test pass@1), ``tests`` (assert lines),
  ``family``, ``operation``, ``filter``, ``holdout`` (true for eval rows), ``eval_part`` ("new instances",
  "held-out combinations", or "" for training rows), ``holdout_half`` (a held-out row's half,
  :data:`HOLDOUT_HALVES`; "" otherwise) and ``defect`` (the defect of a training row, or ""). The hub rows have
  no tests; this side file is the course's addition, keyed by ``idx``. Hidden tests are for evaluation
  (and RL rewards on training rows) only: the drill's pipeline never sees them.
- ``eval_split.json`` — which rows are eval rows, by part (``{"new instances": [idx, ...],
  "held-out combinations": [...]}``): the sample's split, kept apart from the hidden tests so that the
  training rows do not depend on them.

Introduced in lesson 07.
"""
from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

HUB_COLUMNS = ("prompt", "main_topic", "subtopic", "adjective", "action_verb", "scenario",
               "target_audience", "programming_language", "common_sense_topic", "idx", "response")

# --- the task grammar --------------------------------------------------------------------------


@dataclass(frozen=True)
class Filter:
    key: str
    phrase: str          # "the even numbers"
    condition: str       # Python condition on the loop variable {v}; "" means no filter
    check: Callable[[Any], bool]


@dataclass(frozen=True)
class Operation:
    key: str
    phrase: str          # "the sum of"
    init: str            # initial value of `result`
    update: str          # statement that folds {v} into result
    fold: Callable[[Any, Any], Any]
    start: Any


_NUM_FILTERS = [
    Filter("all", "all the numbers", "", lambda v: True),
    Filter("even", "the even numbers", "{v} % 2 == 0", lambda v: v % 2 == 0),
    Filter("odd", "the odd numbers", "{v} % 2 == 1", lambda v: v % 2 == 1),
    Filter("positive", "the positive numbers", "{v} > 0", lambda v: v > 0),
    Filter("negative", "the negative numbers", "{v} < 0", lambda v: v < 0),
    Filter("big", "the numbers greater than 10", "{v} > 10", lambda v: v > 10),
]
_NUM_OPS = [
    Operation("sum", "the sum of", "0", "result += {v}", lambda r, v: r + v, 0),
    Operation("count", "how many there are of", "0", "result += 1", lambda r, v: r + 1, 0),
    Operation("product", "the product of", "1", "result *= {v}", lambda r, v: r * v, 1),
    Operation("squares", "the sum of the squares of", "0", "result += {v} * {v}",
              lambda r, v: r + v * v, 0),
    Operation("max", "the largest value (0 if none is larger) among", "0", "result = max(result, {v})", lambda r, v: max(r, v), 0),
]
_STR_FILTERS = [
    Filter("all", "all the characters", "", lambda c: True),
    Filter("vowels", "the vowels", '{v} in "aeiou"', lambda c: c in "aeiou"),
    Filter("digits", "the digits", "{v}.isdigit()", lambda c: c.isdigit()),
    Filter("letters", "the letters", "{v}.isalpha()", lambda c: c.isalpha()),
    Filter("nospace", "the characters that are not spaces", '{v} != " "', lambda c: c != " "),
]
_STR_OPS = [
    Operation("keep", "a string made of", '""', "result += {v}", lambda r, c: r + c, ""),
    Operation("upper", "an upper-case string made of", '""', "result += {v}.upper()",
              lambda r, c: r + c.upper(), ""),
    Operation("double", "a string that repeats twice each of", '""', "result += {v} * 2",
              lambda r, c: r + c * 2, ""),
    Operation("count", "the number of", "0", "result += 1", lambda r, c: r + 1, 0),
    Operation("reverse", "a reversed string made of", '""', "result = {v} + result",
              lambda r, c: c + r, ""),
]

FAMILIES: dict[str, dict[str, Any]] = {
    # family key: what the function takes, its argument and loop-variable names, filters, operations
    "list": {
        "main_topic": "List processing", "input": "a list of integers", "item": "number",
        "loop": "for {v} in {arg}:", "args": ["numbers", "values", "scores", "items", "data", "nums", "readings", "amounts",
                                                   "entries", "marks", "ints", "xs", "samples", "points"],
        "vars": ["x", "n", "value", "item"], "filters": _NUM_FILTERS, "ops": _NUM_OPS,
    },
    "range": {
        "main_topic": "Number sequences", "input": "an integer {arg}", "item": "number",
        "loop": "for {v} in range(1, {arg} + 1):", "args": ["n", "limit", "cap", "size", "top", "stop", "end", "bound",
                                                      "last", "m", "ceiling", "steps"],
        "vars": ["i", "k", "j", "num"], "filters": _NUM_FILTERS[:4] + _NUM_FILTERS[5:],
        "ops": _NUM_OPS,
    },
    "string": {
        "main_topic": "String processing", "input": "a string", "item": "character",
        "loop": "for {v} in {arg}:", "args": ["text", "word", "line", "s", "message", "name", "phrase", "label",
                                                  "sentence", "title", "raw", "content", "source"],
        "vars": ["ch", "c", "letter", "char"], "filters": _STR_FILTERS, "ops": _STR_OPS,
    },
}

# Function names are drawn from these words, independently of the task (family, operation, filter): the
# name never says what to compute, the instruction does. Training rows and the held-out-combinations eval
# part draw from NAME_WORDS (about 150 everyday nouns, none of them a word of the task grammar); the
# new-instances part from EVAL_NAME_WORDS, which never occur in training.
NAME_WORDS: tuple[str, ...] = tuple("""
apple arrow badge basket beacon binder bottle branch bridge bucket button cable camera candle canvas
carpet castle cellar chain chapter circle cloud compass copper corner cotton crystal curtain dancer
desert device dragon drawer engine falcon fabric feather fence field finger flower forest fountain
garden garlic glacier hammer harbor helmet hollow island jacket jungle kettle kitten lantern lemon
marble meadow mirror monkey mountain needle ocean orange oyster paddle palace parcel pepper pillow
planet pocket pollen puzzle quartz rabbit radio ribbon river rocket saddle salmon silver socket spider
spiral stable statue stream summer table temple thread ticket timber toggle tower tunnel valley velvet
violet wagon walnut window winter wizard yellow zipper anchor bamboo barrel blossom cactus cherry
clover cobalt coral cricket crown dolphin ember fern goblet hazel igloo jasmine kayak ladder mango
""".split())
EVAL_NAME_WORDS: tuple[str, ...] = tuple("""
orbit pebble lagoon meteor quill saffron tundra nectar prism walrus cobble juniper sparrow thimble
glimmer marlin tinsel nutmeg plume fjord biscuit lychee mitten pylon
""".split())
# words of the task grammar that a name must never contain (a name that says "sum" or "vowel" would tell
# the task again)
TASK_WORDS = frozenset("""
sum count product square squares max largest keep upper double reverse reversed all even odd positive
negative big vowel vowels digit digits letter letters space spaces nospace number numbers string text
list range filter total many
""".split())


def draw_name(rng: random.Random, words: tuple[str, ...] | list[str]) -> str:
    """A function name drawn from ``words`` alone (never from the task): ``castle``, ``castle_river`` or
    ``castle7``. Introduced in lesson 07."""
    w = rng.choice(words)
    style = rng.random()
    if style < 0.4:
        return w
    if style < 0.7:
        return f"{w}_{rng.choice([x for x in words if x != w])}"
    return f"{w}{rng.randint(2, 99)}"


# Combinations never shown in training; every operation and filter still appears in training.
HOLDOUT: frozenset[tuple[str, str, str]] = frozenset({
    ("list", "sum", "odd"), ("list", "product", "positive"), ("list", "max", "even"),
    ("list", "count", "big"), ("list", "squares", "negative"),
    ("range", "sum", "even"), ("range", "squares", "odd"), ("range", "count", "big"),
    ("range", "product", "positive"),
    ("string", "upper", "vowels"), ("string", "count", "digits"), ("string", "reverse", "letters"),
    ("string", "double", "nospace"), ("string", "keep", "vowels"),
})

# The course's simulation of a noisy synthetic set. EVERY RATE BELOW IS THE COURSE'S CHOICE, stated here and
# nowhere else (docs and lesson 07 print these dicts): nobody measured them on the real tiny-codes answers, and
# no source is claimed. Share of *training* rows with each content defect:
DEFECT_RATES: dict[str, float] = {
    "prose only": 0.06,         # an explanation with no code block
    "wrong code": 0.08,         # runs, but computes another operation than the one asked for
    "does not run": 0.06,       # a syntax error or a name that is never defined
    "other language": 0.05,     # a JavaScript answer to a Python request, computing the task's own operation
    "truncated": 0.05,          # the answer stops in the middle of the code block
}
# Format defects (lecture §5.3 conclusion 2): the code is right, the answer around it is not in the one-fence
# format. Share of *training* rows with each (the course's choice too); a row carries at most one defect of
# either kind.
FORMAT_DEFECT_RATES: dict[str, float] = {
    "several fences": 0.04,     # the function, then a usage example in a second python fence
    "shell block": 0.04,        # a bash block that runs the code from a terminal, after the python fence
    "prose after code": 0.04,   # a long step-by-step explanation after the code that repeats itself
    "markdown headings": 0.04,  # "## Solution", "### Code", "### Notes" around the answer
    "wrong fence tag": 0.01,    # rare: the Python code under a plain-text tag (```text, ```plaintext)
}
EVAL_PARTS = ("new instances", "held-out combinations")
SPLIT_FILE = "eval_split.json"

_ADJECTIVES = ["Simple", "Basic", "Efficient", "Robust", "Clean", "Readable", "Small"]
_VERBS = ["Calculate", "Compute", "Build", "Transform", "Determine", "Check"]
_AUDIENCES = ["Beginners", "Students", "Engineers", "Professionals", "Experts", "Analysts"]
_SCENARIOS = ["for a homework checker", "for a data cleaning script", "for a report generator",
              "for an inventory tool", "for a game score board", "for a text analyser"]
_TOPICS = ["Reliability", "Readability", "Correctness", "Privacy", "Safety", "Transparency"]
_PROMPTS = [
    "Write a Python function `{name}({arg})` that takes {input} and returns {op} {flt}.",
    "Create a Python function named `{name}` that receives {input} `{arg}` and returns {op} {flt}.",
    "Build a Python function snippet `{name}({arg})`: given {input}, return {op} {flt}.",
]
# The new-instances part's wordings: none of them is a training wording (:data:`_PROMPTS`), so no eval prompt
# is a training prompt with another name (tests/test_drill_data.py checks every pair); the operation and
# filter phrases are the grammar's own.
EVAL_PROMPTS = (
    "Implement `{name}({arg})` in Python. Input: {input}. Output: {op} {flt}.",
    "I need a Python helper called `{name}` with one parameter, `{arg}` ({input}); it must give back {op} {flt}.",
    "Python exercise: the function `{name}({arg})` receives {input} and computes {op} {flt}; return that value.",
    "Using Python, define `{name}({arg})`. The parameter is {input}; the result is {op} {flt}.",
)
# The held-out-combinations part in two halves: a triple whose (operation, filter) pair is trained in another
# family (list <-> range share their operations and filters: near transfer) and one whose pair no training row
# has (composition proper). Each held-out hidden-test record says which (``holdout_half``).
HOLDOUT_HALVES = ("pair trained in the other family", "pair never trained")
_CPP_PROMPTS = [
    "Write a C++ function `{decl}` that takes {input} and returns {op} {flt}.",
    "Create a C++ function named `{name}`, declared as `{decl}`, that receives {input} `{arg}` and returns {op} {flt}.",
    "Build a C++ function snippet `{decl}`: given {input}, return {op} {flt}.",
]
# the new-instances part's C++ wordings: none of them is a C++ training wording (:data:`_CPP_PROMPTS`)
CPP_EVAL_PROMPTS = (
    "Implement `{decl}` in C++. Input: {input}. Output: {op} {flt}.",
    "I need a C++ helper `{name}` declared as `{decl}`; it takes {input} and must give back {op} {flt}.",
    "C++ exercise: the function `{decl}` receives {input} and computes {op} {flt}; return that value.",
    "Using C++17, define `{decl}`. The parameter is {input}; the result is {op} {flt}.",
)
_OTHER_LANGS = {
    "JavaScript": ("```javascript\nfunction {name}({arg}) {{\n  let result = 0;\n  for (const x of {arg}) "
                   "{{\n    result += x;\n  }}\n  return result;\n}}\n```"),
    "Rust": ("```rust\nfn {name}({arg}: &[i64]) -> i64 {{\n    {arg}.iter().sum()\n}}\n```"),
    "Bash": "```bash\n{name}() {{\n  local total=0\n  for x in \"$@\"; do total=$((total + x)); done\n"
            "  echo $total\n}}\n```",
    "C++": ("```cpp\nint {name}(const std::vector<int>& {arg}) {{\n  int result = 0;\n  for (int x : {arg}) "
            "result += x;\n  return result;\n}}\n```"),
}


# --- C++ (issue 38): the same task grammar rendered in C++ ---------------------------------------------

LANGUAGES: tuple[str, ...] = ("python", "cpp")
"""The languages the sample can be rendered in (the drill's ``drill.language`` / ``--language``)."""
LANGUAGE_LABELS: dict[str, str] = {"python": "Python", "cpp": "C++"}
"""``programming_language`` of a row in each language (tiny-codes' own labels)."""
FENCE_TAGS: dict[str, str] = {"python": "python", "cpp": "cpp"}
"""The fence tag of each language's answers."""

# the C++ condition of each filter on the loop variable {v}. ``odd`` is ``!= 0``: C++'s ``%`` keeps the
# sign of the dividend (-3 % 2 == -1), Python's does not (-3 % 2 == 1), and expected_value uses Python's
_CPP_CONDITIONS: dict[str, str] = {
    "all": "", "even": "{v} % 2 == 0", "odd": "{v} % 2 != 0", "positive": "{v} > 0", "negative": "{v} < 0",
    "big": "{v} > 10", "vowels": 'std::string("aeiou").find({v}) != std::string::npos',
    "digits": "std::isdigit(static_cast<unsigned char>({v}))",
    "letters": "std::isalpha(static_cast<unsigned char>({v}))", "nospace": "{v} != ' '",
}
# (initial value of `result`, statement folding {v} into it) per (numeric or string family, operation)
_CPP_OPS: dict[tuple[bool, str], tuple[str, str]] = {
    (True, "sum"): ("0", "result += {v};"), (True, "count"): ("0", "result += 1;"),
    (True, "product"): ("1", "result *= {v};"), (True, "squares"): ("0", "result += {v} * {v};"),
    (True, "max"): ("0", "result = std::max(result, {v});"),
    (False, "keep"): ('""', "result += {v};"),
    (False, "upper"): ('""', "result += static_cast<char>(std::toupper(static_cast<unsigned char>({v})));"),
    (False, "double"): ('""', "result += std::string(2, {v});"), (False, "count"): ("0", "result += 1;"),
    (False, "reverse"): ('""', "result = {v} + result;"),
}
_CPP_PARAM = {"list": "const std::vector<long long>& {arg}", "range": "long long {arg}",
              "string": "const std::string& {arg}"}
_CPP_LOOP = {"list": "for (long long {v} : {arg})", "range": "for (long long {v} = 1; {v} <= {arg}; ++{v})",
             "string": "for (char {v} : {arg})"}
CPP_LOOP_VARS = {"list": ["x", "n", "value", "item"], "range": ["i", "k", "j", "num"],
             "string": ["ch", "c", "letter", "symbol"]}
"""The loop variables of the C++ answers per family: Python's, less the C++ keyword ``char``."""


def cpp_return_type(family: str, op_key: str) -> str:
    """The C++ return type of a task: ``long long`` for numbers and counts, else ``std::string``."""
    return "long long" if family != "string" or op_key == "count" else "std::string"


def cpp_declaration(family: str, op_key: str, name: str, arg: str) -> str:
    """The C++ declaration of a task's function (no ``;``), e.g. ``long long castle(const
    std::vector<long long>& numbers)``: the ``signature`` of its hidden tests, the types
    :func:`course_lib.evaluation.sandbox.cpp.run_cpp_tests` supports. Introduced for issue 38."""
    return f"{cpp_return_type(family, op_key)} {name}({_CPP_PARAM[family].format(arg=arg)})"


def cpp_includes(family: str, op_key: str, flt_key: str) -> list[str]:
    """The standard headers a task's C++ rendering needs, sorted. Introduced for issue 38."""
    need = set()
    if family == "list":
        need.add("vector")
    if family == "string" or flt_key == "vowels":
        need.add("string")
    if op_key == "max":
        need.add("algorithm")
    if op_key == "upper" or flt_key in ("digits", "letters"):
        need.add("cctype")
    return sorted(need)


def _render_cpp(family: str, op_key: str, flt_key: str, name: str, arg: str, var: str) -> str:
    init, update = _CPP_OPS[(family != "string", op_key)]
    body, cond = update.format(v=var), _CPP_CONDITIONS[flt_key].format(v=var)
    ret = cpp_return_type(family, op_key)
    lines = [f"#include <{h}>" for h in cpp_includes(family, op_key, flt_key)]
    lines += [""] if lines else []
    lines += [cpp_declaration(family, op_key, name, arg) + " {", f"    {ret} result = {init};",
              "    " + _CPP_LOOP[family].format(v=var, arg=arg) + " {"]
    if cond:
        lines += [f"        if ({cond}) {{", f"            {body}", "        }"]
    else:
        lines.append(f"        {body}")
    lines += ["    }", "    return result;", "}"]
    return "\n".join(lines) + "\n"


def cpp_cases(family: str, op_key: str, flt_key: str, inputs: list[Any]) -> list[list[Any]]:
    """Hidden tests in the C++ judge's format: ``[argument, expected]`` pairs (one argument per call;
    :func:`~course_lib.evaluation.sandbox.cpp.run_cpp_tests` takes them as cases), the expected values
    from :func:`expected_value`. Introduced for issue 38."""
    return [[v, expected_value(family, op_key, flt_key, v)] for v in inputs]


def _cpp_literal(value: Any) -> str:
    if isinstance(value, list):
        return "{" + ", ".join(str(v) for v in value) + "}"
    if isinstance(value, str):
        return json.dumps(value)
    return str(value)


def task_combinations() -> list[tuple[str, str, str]]:
    """Every (family, operation, filter) triple of the grammar. Introduced in lesson 07."""
    return [(fam, op.key, flt.key) for fam, spec in FAMILIES.items()
            for op in spec["ops"] for flt in spec["filters"]]


def _find(items, key):
    return next(x for x in items if x.key == key)


def _check_language(language: str) -> None:
    if language not in LANGUAGES:
        raise ValueError(f"unknown language {language!r}; the drill's languages are {', '.join(LANGUAGES)}")


def render_code(family: str, op_key: str, flt_key: str, name: str, arg: str, var: str,
                language: str = "python") -> str:
    """The reference function of one task (what the response's fence holds): Python, or with
    ``language="cpp"`` C++17 with its ``#include`` lines and the declaration :func:`cpp_declaration`
    gives (one loop with an accumulator in both).

    Introduced in lesson 07; ``language`` for issue 38.
    """
    if language == "cpp":
        return _render_cpp(family, op_key, flt_key, name, arg, var)
    _check_language(language)
    spec = FAMILIES[family]
    op, flt = _find(spec["ops"], op_key), _find(spec["filters"], flt_key)
    lines = [f"def {name}({arg}):", f"    result = {op.init}",
             "    " + spec["loop"].format(v=var, arg=arg)]
    body = op.update.format(v=var)
    if flt.condition:
        lines += [f"        if {flt.condition.format(v=var)}:", f"            {body}"]
    else:
        lines.append(f"        {body}")
    lines.append("    return result")
    return "\n".join(lines) + "\n"


def expected_value(family: str, op_key: str, flt_key: str, value: Any) -> Any:
    """What the reference function returns for ``value`` (computed without executing code)."""
    spec = FAMILIES[family]
    op, flt = _find(spec["ops"], op_key), _find(spec["filters"], flt_key)
    items = range(1, value + 1) if family == "range" else value
    result = op.start
    for v in items:
        if flt.check(v):
            result = op.fold(result, v)
    return result


def _test_inputs(family: str, rng: random.Random) -> list[Any]:
    """The inputs of a training row's (or a held-out row's) hidden tests: four fixed values and one drawn."""
    if family == "list":
        return [[3, -4, 12, 7, 0, 15], [], [2, 4, 6], [-1, -3, 11, 20, 5],
                [rng.randint(-20, 25) for _ in range(6)]]
    if family == "range":
        return [0, 1, 5, 12, rng.randint(6, 15)]
    return ["hello world 42", "", "Data 2024 io", "aeiou xyz", "".join(
        rng.choice("abcdeio 0123xyz") for _ in range(10))]


def _fresh_input(family: str, rng: random.Random, language: str = "python") -> Any:
    if family == "list":
        return [rng.randint(-30, 30) for _ in range(7)]
    if family == "range":   # C++'s long long holds 1·2·…·20 but not 21! (Python's int has no limit)
        return rng.randint(18, 22) if language == "python" else rng.randint(18, 20)
    return "".join(rng.choice("fghuo 789KLM") for _ in range(9))


# fixed inputs of the new-instances part: none is an input of a training test (every training row's inputs
# are checked, not only how they are drawn) nor one of the rule teacher's own test inputs
_FRESH_FIXED: dict[str, list[Any]] = {
    "list": [[5, -2, 9, 14, -7], [1], [8, 3, 22, -6, 0, 13]],
    "range": [2, 3, 17],
    "string": ["banana split 7", "x", "OpenAI 3 go"],
}


def fresh_test_inputs(family: str, rng: random.Random, used: set[str], language: str = "python") -> list[Any]:
    """The inputs of a new-instances row's hidden tests: three fixed values and one drawn, none of whose
    ``repr`` is in ``used`` (the inputs of every training row's tests, :func:`test_inputs_of`); a drawn value
    that is in ``used`` is drawn again (C++: a range bound of at most 20, so that a product fits a ``long long``).
    Raises ``ValueError`` when a fixed value is in ``used``.
    Introduced in lesson 07."""
    fixed = _FRESH_FIXED[family]
    clash = [v for v in fixed if repr(v) in used]
    if clash:
        raise ValueError(f"fresh inputs {clash} of family {family!r} occur in training tests; change _FRESH_FIXED")
    for _ in range(1000):
        drawn = _fresh_input(family, rng, language)
        if repr(drawn) not in used and drawn not in fixed:
            return [*fixed, drawn]
    raise ValueError(f"no fresh input for family {family!r} in 1000 draws: every draw occurs in training tests")


def test_inputs_of(tests: str) -> list[str]:
    """The ``repr`` of the argument of each ``assert name(<value>) == ...`` line of a hidden test (what
    :func:`fresh_test_inputs` keeps apart). Introduced in lesson 07."""
    import ast

    out = []
    for line in tests.splitlines():
        if line.strip():
            call = ast.parse(line).body[0].test.left      # assert name(value) == expected
            out.append(repr(ast.literal_eval(call.args[0])))
    return out


def holdout_half(family: str, op_key: str, flt_key: str) -> str:
    """Which half of the held-out-combinations part a triple is in (:data:`HOLDOUT_HALVES`): "pair trained in
    the other family" when another family has a training row with the same (operation, filter) pair, else
    "pair never trained"; "" for a triple that is not held out. Introduced in lesson 07."""
    if (family, op_key, flt_key) not in HOLDOUT:
        return ""
    trained = any((other, op_key, flt_key) not in HOLDOUT and any(
        op.key == op_key for op in spec["ops"]) and any(f.key == flt_key for f in spec["filters"])
        for other, spec in FAMILIES.items() if other != family)
    return HOLDOUT_HALVES[0] if trained else HOLDOUT_HALVES[1]


def _assert_lines(family: str, op_key: str, flt_key: str, name: str, inputs: list[Any]) -> str:
    return "\n".join(f"assert {name}({v!r}) == {expected_value(family, op_key, flt_key, v)!r}"
                     for v in inputs) + "\n"


def _describe(family: str, op_key: str, flt_key: str) -> tuple[str, str]:
    spec = FAMILIES[family]
    op, flt = _find(spec["ops"], op_key), _find(spec["filters"], flt_key)
    phrase = flt.phrase
    if family == "range":
        phrase = phrase.replace("numbers", "numbers from 1 to {arg}", 1)
    return op.phrase, phrase


def _response(code: str, op_phrase: str, flt_phrase: str, item: str, rng: random.Random,
              language: str = "python") -> str:
    intro = rng.choice([
        f"Here is a {LANGUAGE_LABELS[language]} function that returns {op_phrase} {flt_phrase}:",
        f"The function below loops once over the input and returns {op_phrase} {flt_phrase}.",
        f"We keep a running `result` and update it for each {item}:",
    ])
    outro = rng.choice([
        f"It visits each {item} once, so it runs in linear time.",
        "The loop keeps the code easy to read for beginners.",
        "An empty input simply returns the starting value of `result`.",
    ])
    return f"{intro}\n\n```{FENCE_TAGS[language]}\n{code}```\n\n{outro}"


def _make_row(family: str, op_key: str, flt_key: str, idx: int, rng: random.Random,
              words: tuple[str, ...], prompts: tuple[str, ...] | list[str] | None = None,
              language: str = "python") -> tuple[dict, str, str, str]:
    spec = FAMILIES[family]
    names = spec["vars"] if language == "python" else CPP_LOOP_VARS[family]
    name = draw_name(rng, words)     # independent of family, operation and filter
    arg, var = rng.choice(spec["args"]), rng.choice(names)
    if var == arg:
        var = names[0] if arg != names[0] else names[1]
    code = render_code(family, op_key, flt_key, name, arg, var, language)
    op_phrase, flt_phrase = _describe(family, op_key, flt_key)
    flt_phrase = flt_phrase.format(arg=arg)
    pool = prompts if prompts is not None else (tuple(_PROMPTS) if language == "python" else _CPP_PROMPTS)
    prompt = rng.choice(pool).format(
        name=name, arg=arg, input=spec["input"].format(arg=arg), op=op_phrase, flt=flt_phrase,
        decl=cpp_declaration(family, op_key, name, arg) if language == "cpp" else "")
    row = {
        "prompt": prompt, "main_topic": spec["main_topic"],
        "subtopic": f"{op_key} of {flt_key} {spec['item']}s",
        "adjective": rng.choice(_ADJECTIVES), "action_verb": rng.choice(_VERBS),
        "scenario": rng.choice(_SCENARIOS), "target_audience": rng.choice(_AUDIENCES),
        "programming_language": LANGUAGE_LABELS[language], "common_sense_topic": rng.choice(_TOPICS),
        "idx": idx, "response": _response(code, op_phrase, flt_phrase, spec["item"], rng, language),
    }
    return row, name, arg, var


_EXAMPLE_INPUT = {"list": [1, 2, 3, 4], "range": 6, "string": "hello 42"}
_OTHER_TAGS = ("text", "plaintext")     # what a Python fence is mislabelled with ("wrong fence tag")

# the "other language" defect: the task's own function in JavaScript (operation, filter and loop as asked)
_JS_UPDATE = {"sum": "result += {v};", "count": "result += 1;", "product": "result *= {v};",
              "squares": "result += {v} * {v};", "max": "result = Math.max(result, {v});", "keep": "result += {v};",
              "upper": "result += {v}.toUpperCase();", "double": "result += {v}.repeat(2);",
              "reverse": "result = {v} + result;"}
_JS_CONDITION = {"all": "", "even": "{v} % 2 === 0", "odd": "{v} % 2 !== 0", "positive": "{v} > 0",
                 "negative": "{v} < 0", "big": "{v} > 10", "vowels": '"aeiou".includes({v})',
                 "digits": "/[0-9]/.test({v})", "letters": "/[a-zA-Z]/.test({v})", "nospace": '{v} !== " "'}


def render_javascript(family: str, op_key: str, flt_key: str, name: str, arg: str, var: str) -> str:
    """The task's function written in JavaScript (the "other language" defect: a right answer in the wrong
    language): the same operation, filter and loop as :func:`render_code`. Introduced in lesson 07."""
    op = _find(FAMILIES[family]["ops"], op_key)
    loop = (f"for (let {var} = 1; {var} <= {arg}; {var}++) {{" if family == "range"
            else f"for (const {var} of {arg}) {{")
    body = _JS_UPDATE[op_key].format(v=var)
    cond = _JS_CONDITION[flt_key].format(v=var)
    # the start value is written as in Python: 0, 1 and "" are JavaScript too
    lines = [f"function {name}({arg}) {{", f"  let result = {op.init};", f"  {loop}"]
    lines += [f"    if ({cond}) {{", f"      {body}", "    }"] if cond else [f"    {body}"]
    return "\n".join(lines + ["  }", "  return result;", "}"]) + "\n"
_OTHER_TAGS_FOR_CPP = ("java", "c", "python", "rust")
# the other-language rows of the C++ sample (for its language filter to drop) and its "other language" defect
_OTHER_LANGS_FOR_CPP = {**{k: v for k, v in _OTHER_LANGS.items() if k != "C++"},
                        "Python": "```python\ndef {name}({arg}):\n    return sum({arg})\n```"}


def _apply_defect(defect: str, row: dict, t: dict, arg: str, var: str, inputs: list[Any],
                  rng: random.Random, language: str = "python") -> None:
    """Give a training row one defect of :data:`DEFECT_RATES` or :data:`FORMAT_DEFECT_RATES` (in place);
    ``inputs`` are the values its hidden tests call the function with. In C++ (``language="cpp"``)
    "does not run" is code that does not compile, "other language" a Python answer, "wrong code" another
    operation with the same return type (or, where there is none, another filter), and the examples
    and shell blocks are C++'s."""
    family, op_key, flt_key, name = t["family"], t["operation"], t["filter"], t["entry_point"]
    tag = FENCE_TAGS[language]
    cpp = language == "cpp"
    intro, rest = row["response"].split(f"```{tag}\n", 1)
    code, outro = rest.split("```", 1)
    example = _EXAMPLE_INPUT[family]
    if defect == "prose only":
        row["response"] = intro.strip() + " Use a loop with an accumulator and return it at the end."
    elif defect == "wrong code":
        # another operation that gives a different answer on at least one of the row's test inputs
        def differs(o: str, f: str) -> bool:
            return any(expected_value(family, o, f, v) != expected_value(family, op_key, flt_key, v) for v in inputs)
        others = [op.key for op in FAMILIES[family]["ops"] if op.key != op_key and differs(op.key, flt_key)
                  and (not cpp or cpp_return_type(family, op.key) == cpp_return_type(family, op_key))]
        if others or not cpp:
            wrong = render_code(family, rng.choice(others), flt_key, name, arg, var, language)
        else:   # C++: no other operation returns this type (a string's count): another filter
            wrong = render_code(family, op_key, rng.choice([f.key for f in FAMILIES[family]["filters"]
                                                            if f.key != flt_key and differs(op_key, f.key)]),
                                name, arg, var, language)
        row["response"] = f"{intro}```{tag}\n{wrong}```{outro}"
    elif defect == "does not run":
        if cpp:   # does not compile: a missing semicolon, or a name that is never declared
            broken = (code.replace(" = 0;\n", " = 0\n", 1).replace(' = "";\n', ' = ""\n', 1).replace(" = 1;\n", " = 1\n", 1)
                      if rng.random() < 0.5 else code.replace("    return result;", "    return results;", 1))
        else:
            broken = (code.replace("):\n", ")\n", 1) if rng.random() < 0.5
                      else code.replace("    return result", "    return results", 1))
        row["response"] = f"{intro}```{tag}\n{broken}```{outro}"
    elif defect == "other language":
        if cpp:
            row["response"] = "Here is one way to do it:\n\n" + _OTHER_LANGS_FOR_CPP["Python"].format(name=name, arg=arg)
        else:
            js = render_javascript(family, op_key, flt_key, name, arg, var)
            row["response"] = f"Here is one way to do it:\n\n```javascript\n{js}```{outro}"
    elif defect == "truncated":
        lines = code.splitlines(keepends=True)
        row["response"] = f"{intro}```{tag}\n" + "".join(lines[: max(2, len(lines) // 2)])
    elif defect == "several fences":
        if cpp:
            usage = (f"#include <iostream>\n\nint main() {{\n    std::cout << {name}({_cpp_literal(example)}) "
                     "<< std::endl;\n}\n")
        else:
            usage = f"print({name}({example!r}))\n"
        row["response"] = f"{intro}```{tag}\n{code}```\n\nExample:\n\n```{tag}\n{usage}```{outro}"
    elif defect == "shell block":
        if cpp:
            row["response"] = (f"{intro}```cpp\n{code}```\n\nAdd a `main` that calls it, save it as `solution.cpp` and "
                               "build it from a terminal:\n\n```bash\ng++ -std=c++17 -O2 -o solution solution.cpp && "
                               f"./solution\n```{outro}")
        else:
            row["response"] = (f"{intro}```python\n{code}```\n\nSave it as `solution.py` and try it from a terminal:\n\n"
                               f"```bash\npython3 -c \"from solution import {name}; print({name}({example!r}))\"\n```{outro}")
    elif defect == "prose after code":
        op, flt = _describe(family, op_key, flt_key)
        flt = flt.format(arg=arg)
        item = FAMILIES[family]["item"]
        steps = (f"\n\nHow it works:\n\n1. `result` starts at its initial value.\n2. The loop visits each {item} once.\n"
                 f"3. Only {flt} change `result`.\n4. The function returns `result`.\n\n")
        summary = f"In short, the function returns {op} {flt}. "
        row["response"] = f"{intro}```{tag}\n{code}```{outro}{steps}{summary * 3}".rstrip()
    elif defect == "markdown headings":
        row["response"] = (f"## Solution\n\n{intro.strip()}\n\n### Code\n\n```{tag}\n{code}```\n\n### Notes\n\n"
                           f"{outro.strip()}")
    elif defect == "wrong fence tag":
        row["response"] = f"{intro}```{rng.choice(_OTHER_TAGS_FOR_CPP if cpp else _OTHER_TAGS)}\n{code}```{outro}"
    else:
        raise ValueError(f"unknown defect {defect!r}; known: {', '.join([*DEFECT_RATES, *FORMAT_DEFECT_RATES])}")
    t["defect"] = defect


# Each training combination was once followed by two new-instances rows drawn from the training rows' random
# stream; the stream still makes (and drops) these draws, so the training rows, their idx and their defects stay
# byte for byte those of the committed sample (and the drill's caches keyed on them stay valid).
_SKIPPED_DRAWS_PER_COMBO = 2


def _skip_old_eval_draw(family: str, op_key: str, flt_key: str, rng: random.Random) -> None:
    _make_row(family, op_key, flt_key, -1, rng, EVAL_NAME_WORDS)
    if family == "list":
        [rng.randint(-30, 30) for _ in range(7)]
    elif family == "range":
        rng.randint(16, 20)
    else:
        [rng.choice("fghuo 789KLM") for _ in range(9)]


def _test_record(idx: int, family: str, op_key: str, flt_key: str, name: str, arg: str, inputs: list[Any],
                 part: str, language: str = "python") -> dict:
    if language == "cpp":
        record = {"signature": cpp_declaration(family, op_key, name, arg), "tests": cpp_cases(family, op_key, flt_key, inputs)}
    else:
        record = {"signature": f"def {name}({arg}):", "tests": _assert_lines(family, op_key, flt_key, name, inputs)}
    return {"idx": idx, "entry_point": name, **record,
            "family": family, "operation": op_key, "filter": flt_key,
            "holdout": bool(part), "eval_part": part, "holdout_half": holdout_half(family, op_key, flt_key),
            "defect": "", **({"language": language} if language != "python" else {})}


def generate_rows(n_per_combo: int = 16, n_new_per_combo: int = 4, n_extra_holdout_per_combo: int = 2,
                  n_other_language: int = 24, defect_rates: dict[str, float] | None = None,
                  format_defect_rates: dict[str, float] | None = None,
                  seed: int = 0, language: str = "python") -> tuple[list[dict], list[dict]]:
    """Generate (rows, hidden_tests): tiny-codes-shaped rows and one test record per row of ``language``.

    ``n_per_combo`` rows per (family, operation, filter) triple with varied names, phrasings and
    metadata (training rows, or the held-out-combinations eval part for :data:`HOLDOUT`), and
    ``n_extra_holdout_per_combo`` more per held-out triple; ``n_new_per_combo`` eval rows per training
    combination (the new-instances part) with eval-only function names (:data:`EVAL_NAME_WORDS`), wordings
    that no training row has (:data:`EVAL_PROMPTS`) and test inputs that no training row's tests use
    (:func:`fresh_test_inputs`, checked against every training row's inputs); ``n_other_language`` rows
    labelled with another language (for the Python filter to drop); ``defect_rates`` (default
    :data:`DEFECT_RATES`) and ``format_defect_rates`` (default :data:`FORMAT_DEFECT_RATES`) the share of
    training rows given each defect (at most one per row). Function names are drawn from :data:`NAME_WORDS`
    (the new-instances part: :data:`EVAL_NAME_WORDS`) independently of the task. The training rows, the
    first ``n_per_combo`` held-out rows per triple and the other-language rows come from one random stream,
    the other eval rows from a second one (``f"eval-{seed}"``), so adding eval rows never changes a training
    row. Deterministic for a given seed.

    ``language="cpp"`` (issue 38) renders the same grammar in C++: ``programming_language`` "C++",
    answers in a ```` ```cpp ```` fence (:func:`render_code`), prompts that give the C++ declaration,
    test records whose ``signature`` is that declaration (:func:`cpp_declaration`) and whose ``tests``
    are ``[argument, expected]`` pairs for the C++ judge (:func:`cpp_cases`), with ``"language": "cpp"``;
    the same defects in their C++ form (:func:`_apply_defect`) and other-language rows in Python,
    JavaScript, Rust and Bash. Python records are unchanged (no ``language`` key).
    The C++ new instances use :data:`CPP_EVAL_PROMPTS`. Introduced in lesson 07; ``language`` for issue 38.
    """
    _check_language(language)
    rates = {**(DEFECT_RATES if defect_rates is None else defect_rates),
             **(FORMAT_DEFECT_RATES if format_defect_rates is None else format_defect_rates)}
    rng = random.Random(seed)
    rows: list[dict | None] = []
    tests, extra = [], {}
    idx = 0
    for family, op_key, flt_key in task_combinations():
        holdout = (family, op_key, flt_key) in HOLDOUT
        part = "held-out combinations" if holdout else ""
        for _ in range(n_per_combo):
            row, name, arg, var = _make_row(family, op_key, flt_key, idx, rng, NAME_WORDS, language=language)
            rows.append(row)
            inputs = _test_inputs(family, rng)
            tests.append(_test_record(idx, family, op_key, flt_key, name, arg, inputs, part, language))
            extra[idx] = (arg, var, inputs)
            idx += 1
        if not holdout:
            for _ in range(_SKIPPED_DRAWS_PER_COMBO):
                _skip_old_eval_draw(family, op_key, flt_key, rng)
                rows.append(None)
                idx += 1
    train = [t for t in tests if not t["holdout"]]
    chosen = rng.sample(train, sum(round(rate * len(train)) for rate in rates.values()))
    at = 0
    for defect, rate in rates.items():
        for t in chosen[at: at + round(rate * len(train))]:
            _apply_defect(defect, rows[t["idx"]], t, *extra[t["idx"]], rng, language)
        at += round(rate * len(train))
    others = _OTHER_LANGS if language == "python" else _OTHER_LANGS_FOR_CPP
    for _ in range(n_other_language):
        lang = rng.choice(sorted(others))
        name, arg = f"sum_{rng.choice(['values', 'items', 'scores'])}", "values"
        rows.append({
            "prompt": f"Write a {lang} function `{name}` that returns the sum of a list of integers.",
            "main_topic": "List processing", "subtopic": "sum of all numbers",
            "adjective": rng.choice(_ADJECTIVES), "action_verb": "Calculate",
            "scenario": rng.choice(_SCENARIOS), "target_audience": rng.choice(_AUDIENCES),
            "programming_language": lang, "common_sense_topic": rng.choice(_TOPICS), "idx": idx,
            "response": f"Here is the {lang} version:\n\n" + others[lang].format(name=name, arg=arg),
        })
        idx += 1
    order = list(range(len(rows)))
    rng.shuffle(order)
    out = [rows[i] for i in order if rows[i] is not None]
    # the eval rows of the second stream: more held-out rows, and the new-instances part
    used: dict[str, set[str]] = {fam: set() for fam in FAMILIES}
    for t in train:
        used[t["family"]].update(repr(v) for v in extra[t["idx"]][2])   # = test_inputs_of(t["tests"]) for Python
    erng = random.Random(f"eval-{seed}")
    added = []
    for family, op_key, flt_key in task_combinations():
        holdout = (family, op_key, flt_key) in HOLDOUT
        for _ in range(n_extra_holdout_per_combo if holdout else n_new_per_combo):
            if holdout:
                row, name, arg, _var = _make_row(family, op_key, flt_key, idx, erng, NAME_WORDS, language=language)
                inputs, part = _test_inputs(family, erng), "held-out combinations"
            else:
                row, name, arg, _var = _make_row(family, op_key, flt_key, idx, erng, EVAL_NAME_WORDS,
                                                 EVAL_PROMPTS if language == "python" else CPP_EVAL_PROMPTS, language=language)
                inputs, part = fresh_test_inputs(family, erng, used[family], language), "new instances"
            added.append(row)
            tests.append(_test_record(idx, family, op_key, flt_key, name, arg, inputs, part, language))
            idx += 1
    erng.shuffle(added)
    return out + added, tests


def name_tokens(name: str) -> list[str]:
    """The words of a function name (``castle_river7`` → ``castle``, ``river``, ``7``)."""
    return [t for t in re.split(r"_|(?<=[a-z])(?=\d)", name.lower()) if t]


def name_guess_accuracy(train: list[dict], evals: list[dict], label: str) -> dict[str, float]:
    """How well a function's name alone tells its task: a majority vote over name tokens learnt on
    ``train`` (hidden-test records: ``entry_point`` and the ``label`` key, ``"operation"`` or
    ``"filter"``), scored on ``evals``. Each token votes with the label counts it had in training; a name
    with no known token gets the training majority. Returns ``{"accuracy", "chance", "rows"}``, chance
    being the share of the most common label among ``evals`` (the best guess that ignores the name).
    Introduced in lesson 07."""
    from collections import Counter, defaultdict

    votes: dict[str, Counter] = defaultdict(Counter)
    overall: Counter = Counter()
    for t in train:
        overall[t[label]] += 1
        for tok in name_tokens(t["entry_point"]):
            votes[tok][t[label]] += 1
    fallback = overall.most_common(1)[0][0] if overall else None
    hits = 0
    for t in evals:
        tally: Counter = Counter()
        for tok in name_tokens(t["entry_point"]):
            total = sum(votes[tok].values())
            for lab, n in votes.get(tok, {}).items():
                tally[lab] += n / total
        guess = max(sorted(tally), key=tally.__getitem__) if tally else fallback
        hits += guess == t[label]
    n = len(evals)
    chance = Counter(t[label] for t in evals).most_common(1)[0][1] / n if n else 0.0
    return {"accuracy": hits / n if n else 0.0, "chance": chance, "rows": n}


def _write_jsonl(path: Path, records: list[dict]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    tmp.replace(path)


def write_tiny_codes_sample(out_dir: str | Path, **kwargs) -> dict[str, Path]:
    """Write ``tiny_codes_sample.jsonl``, ``hidden_tests.jsonl`` and ``eval_split.json`` into ``out_dir``
    (atomically).

    ``kwargs`` go to :func:`generate_rows`. The committed ``assets/tiny_codes/`` was written with the
    defaults: ``python -m course_lib.drill.taskgen assets/tiny_codes``; ``assets/tiny_codes_cpp/`` with
    ``language="cpp"``: ``python -m course_lib.drill.taskgen assets/tiny_codes_cpp --language cpp``.
    Introduced in lesson 07.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows, tests = generate_rows(**kwargs)
    paths = {"rows": out / "tiny_codes_sample.jsonl", "tests": out / "hidden_tests.jsonl",
             "split": out / SPLIT_FILE}
    _write_jsonl(paths["rows"], rows)
    _write_jsonl(paths["tests"], tests)
    split = {part: sorted(t["idx"] for t in tests if t["eval_part"] == part) for part in EVAL_PARTS}
    tmp = paths["split"].with_suffix(".json.tmp")
    tmp.write_text(json.dumps(split) + "\n", encoding="utf-8")
    tmp.replace(paths["split"])
    return paths


def load_hidden_tests(path: str | Path) -> dict[int, dict]:
    """Read ``hidden_tests.jsonl`` into ``{idx: record}``, naming the line of any broken record.

    Introduced in lesson 07.
    """
    out: dict[int, dict] = {}
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                out[int(rec["idx"])] = rec
            except (ValueError, KeyError) as exc:
                raise ValueError(f"{path}, line {lineno}: not a hidden-test record ({exc}); "
                                 f"regenerate it with `python -m course_lib.drill.taskgen`") from None
    return out


SAMPLE_DIRS: dict[str, str] = {"python": "tiny_codes", "cpp": "tiny_codes_cpp"}
"""The committed sample of each language, a folder of ``assets/``: ``tiny_codes`` (Python) and
``tiny_codes_cpp`` (C++, written with ``language="cpp"`` and the same defaults). Issue 38."""


def main(argv: list[str] | None = None) -> int:
    """``python -m course_lib.drill.taskgen [OUT_DIR] [--language python|cpp]``: write a sample with the
    defaults (the committed ones: ``assets/tiny_codes`` and ``--language cpp`` ``assets/tiny_codes_cpp``)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m course_lib.drill.taskgen",
                                 description="Write the course's tiny-codes-shaped sample.")
    ap.add_argument("out_dir", nargs="?", default=None, help="default: assets/<the language's sample folder>")
    ap.add_argument("--language", choices=LANGUAGES, default="python")
    args = ap.parse_args(argv)
    out = args.out_dir or f"assets/{SAMPLE_DIRS[args.language]}"
    kw = {"language": args.language} if args.language != "python" else {}
    for kind, p in write_tiny_codes_sample(out, **kw).items():
        print(f"wrote {kind}: {p}")
    return 0


if __name__ == "__main__":  # pragma: no cover - regenerates the committed samples
    raise SystemExit(main())
