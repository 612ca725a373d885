"""Instruction data for code SFT: four kinds of samples built from real code, chat formatting, the
answer-only label mask and packing.

The lesson's four kinds of instruction data, all in Alpaca-style ``instruction`` / ``input`` /
``output`` form (the lesson's Fibonacci example is :data:`FIBONACCI_EXAMPLE`):

* ``codegen``   — "Write a Python function ``name(args)`` that …" → the function's real source;
* ``explain``   — the function's code (docstring removed) → an explanation written from its docstring;
* ``translate`` — the function in JavaScript (made by the course's tiny transpiler) → the real Python;
* ``unittest``  — the function → unit tests (from its doctest examples) that pass against it.

Every function comes from the course corpus that lessons 01-03 build (licensed, filtered, redacted,
deduplicated, dependency-ordered; read through ``tinymodel.corpus_repositories``, the loader lesson 04
pretrains from): self-contained top-level functions with docstrings, found with :mod:`ast` (nothing is
imported). A sample is kept only when its reference runs in the sandbox the caller gives (``run_many``:
lesson 06's :func:`course_lib.evaluation.sandbox.run_many`); without one nothing runs and the set says
it is unverified. Every skipped function is counted with its reason.

Introduced in lesson 05.
"""
from __future__ import annotations

import ast
import builtins
import doctest
import html
import random
import sys
import textwrap
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from course_lib.profiles import ProfileLike, resolve_profile

KINDS = ("codegen", "explain", "translate", "unittest")

FIBONACCI_EXAMPLE = {
    "instruction": "编写一个函数计算斐波那契数列的第 n 项，并编写测试用例。",
    "input": "",
    "output": "```python\ndef fibonacci(n):\n if n <= 1: return n\n return fibonacci(n-1) + fibonacci(n-2)\n\n"
              "# Unit Tests\nassert fibonacci(0) == 0\nassert fibonacci(1) == 1\nassert fibonacci(10) == 55\n"
              "print('All tests passed')\n```",
}
"""The lecture's unit-test-generation sample exactly as it gives it (instruction / input / output):
the function and its test cases in one fenced answer."""

IGNORE_INDEX = -100
"""Label value that the loss ignores (PyTorch ``CrossEntropyLoss(ignore_index=-100)``)."""

_BUILTINS = set(dir(builtins))
_SAFE_MODULES = {"math", "re", "string", "itertools", "functools", "operator", "collections",
                 "textwrap", "fractions", "decimal", "bisect", "heapq", "statistics", "unicodedata"}


# --- harvesting functions from real code ----------------------------------------------------------

@dataclass
class FunctionRecord:
    """A self-contained top-level function found in a real source file."""

    name: str
    path: str                 # the file it comes from
    source: str               # the function's code, with any imports it needs on top
    docstring: str
    params: list[str]
    doctests: list[tuple[str, str]] = field(default_factory=list)   # (expression, expected repr)

    @property
    def summary(self) -> str:
        """First paragraph of the docstring, on one line."""
        first = self.docstring.strip().split("\n\n")[0]
        return " ".join(first.split())


def corpus_sources(profile: ProfileLike = "ci") -> list[tuple[str, str]]:
    """Every Python file of the course corpus as ``("repo:path", source)``, repository by repository,
    files in dependency order — read through the same loader as lesson 04's pretraining
    (``tinymodel.corpus_repositories``). Introduced in lesson 05."""
    from course_lib.training.tinymodel import corpus_repositories

    P = resolve_profile(profile)
    repos, _ = corpus_repositories(P)
    return [(f"{r.name}:{p}", t) for r in repos for p, t in zip(r.paths, r.texts) if p.endswith(".py")]


def _free_names(fn: ast.FunctionDef) -> set[str]:
    bound = {a.arg for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
    if fn.args.vararg:
        bound.add(fn.args.vararg.arg)
    if fn.args.kwarg:
        bound.add(fn.args.kwarg.arg)
    used: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, (ast.Store, ast.Del)) else used).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not fn:
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return used - bound - _BUILTINS


def parse_doctests(docstring: str) -> list[tuple[str, str]]:
    """The ``>>> expr`` / expected-output pairs of a docstring (single lines whose expected output is a
    Python literal; setup statements come with an empty expected output).

    Introduced in lesson 05.
    """
    pairs = []
    for ex in doctest.DocTestParser().get_examples(docstring or ""):
        source, want = ex.source.strip(), ex.want.strip()
        if "\n" in source or "\n" in want or "Traceback" in want:
            continue
        try:
            ast.parse(source)
            if want:
                ast.parse(want, mode="eval")
        except SyntaxError:
            continue
        pairs.append((source, want))       # want == "": a setup statement such as ``import io``
    return pairs if any(w for _, w in pairs) else []


def functions_in_file(path: Path) -> tuple[list[FunctionRecord], Counter]:
    """Self-contained top-level functions with docstrings in one file, and why others were skipped.

    Introduced in lesson 05.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return [], Counter({"unreadable file": 1})
    return functions_in_source(text, str(path))


def functions_in_source(text: str, path: str) -> tuple[list[FunctionRecord], Counter]:
    """:func:`functions_in_file` for source text already in memory (``path`` names where it comes
    from). Introduced in lesson 05."""
    skipped: Counter = Counter()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        skipped["unparsable file"] += 1
        return [], skipped
    module_imports = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in _SAFE_MODULES and a.asname is None:
                    module_imports[a.name] = f"import {a.name}"
    found = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        doc = ast.get_docstring(node)
        if not doc or len(doc) < 20:
            skipped["no docstring"] += 1
            continue
        if node.name.startswith("_") or node.decorator_list:
            skipped["private or decorated"] += 1
            continue
        free = _free_names(node)
        missing = free - set(module_imports)
        if missing:
            skipped["uses module globals"] += 1
            continue
        body = ast.get_source_segment(text, node)
        if body is None or len(body.splitlines()) > 40:
            skipped["too long"] += 1
            continue
        imports = "\n".join(module_imports[m] for m in sorted(free))
        source = (imports + "\n\n\n" if imports else "") + textwrap.dedent(body)
        params = [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]
        found.append(FunctionRecord(node.name, path, source, doc, params, parse_doctests(doc)))
    return found, skipped


def harvest_functions(files: Iterable[Path | tuple[str, str]] | None = None, *,
                      max_functions: int | None = None, profile: ProfileLike | None = None
                      ) -> tuple[list[FunctionRecord], Counter]:
    """Self-contained documented functions from real code: ``files`` are paths or ``(name, source)``
    pairs; default :func:`corpus_sources` of ``profile`` (the course corpus of lessons 01-03).

    Returns the functions and a Counter of why other functions were skipped. Introduced in lesson 05.
    """
    if files is None:
        files = corpus_sources(resolve_profile(profile))
    out: list[FunctionRecord] = []
    skipped: Counter = Counter()
    seen = set()
    for item in files:
        recs, why = (functions_in_source(item[1], item[0]) if isinstance(item, tuple)
                     else functions_in_file(Path(item)))
        skipped.update(why)
        for r in recs:
            if r.source in seen:
                skipped["duplicate"] += 1
                continue
            seen.add(r.source)
            out.append(r)
        if max_functions and len(out) >= max_functions:
            break
    return out[:max_functions] if max_functions else out, skipped


# --- the four kinds of samples --------------------------------------------------------------------

def strip_docstring(source: str) -> str:
    """The function's source without its docstring (what an "explain" sample shows).

    Introduced in lesson 05.
    """
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and ast.get_docstring(node) is not None:
            node.body = node.body[1:] or [ast.Pass()]
    return ast.unparse(tree)


def _signature(rec: FunctionRecord) -> str:
    return f"{rec.name}({', '.join(rec.params)})"


def _sentence(text: str) -> str:
    text = text.strip().rstrip(".")
    if not text:
        return text
    return text[0].lower() + text[1:] if not text[:2].isupper() else text


def codegen_sample(rec: FunctionRecord) -> dict:
    """"Write a Python function … that <docstring summary>" → the real source (with its doctest
    examples as ``tests`` when it has any). Introduced in lesson 05."""
    return {"kind": "codegen",
            "instruction": f"Write a Python function `{_signature(rec)}` that does the following: "
                           f"{_sentence(rec.summary)}.",
            "input": "", "output": rec.source, "tests": _doctest_asserts(rec) or None,
            "source_path": rec.path, "entry_point": rec.name}


def explain_sample(rec: FunctionRecord) -> dict:
    """The code without its docstring → an explanation written from the docstring.

    Introduced in lesson 05.
    """
    params = ", ".join(f"`{p}`" for p in rec.params) or "no arguments"
    explanation = (f"The function `{rec.name}` takes {params}. {rec.summary.rstrip('.')}."
                   + ("" if not rec.doctests else
                      " For example, `{}` returns `{}`.".format(*next(p for p in rec.doctests if p[1]))))
    return {"kind": "explain", "instruction": "Explain what the following Python function does.",
            "input": strip_docstring(rec.source), "output": explanation,
            "source_path": rec.path, "entry_point": rec.name}


def unittest_sample(rec: FunctionRecord) -> dict | None:
    """The function → unit tests made from its doctest examples (None without examples).

    Introduced in lesson 05.
    """
    if not rec.doctests:
        return None
    lines = [f"def test_{rec.name}():"]
    lines += [f"    assert ({expr}) == ({want})" if want else f"    {expr}" for expr, want in rec.doctests]
    return {"kind": "unittest",
            "instruction": f"Write unit tests (pytest style, plain asserts) for the function `{rec.name}`.",
            "input": rec.source, "output": "\n".join(lines) + "\n",
            "source_path": rec.path, "entry_point": rec.name}


# A tiny Python → JavaScript transpiler for simple functions (enough for the translation kind).
_JS_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Mod: "%"}
_JS_CMP = {ast.Eq: "===", ast.NotEq: "!==", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


class _Untranslatable(Exception):
    pass


def _js_expr(e: ast.expr) -> str:
    if isinstance(e, ast.Constant):
        if isinstance(e.value, bool):
            return "true" if e.value else "false"
        if e.value is None:
            return "null"
        if isinstance(e.value, (int, float)):
            return repr(e.value)
        if isinstance(e.value, str):
            return '"' + e.value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.BinOp) and type(e.op) in _JS_BINOPS:
        return f"({_js_expr(e.left)} {_JS_BINOPS[type(e.op)]} {_js_expr(e.right)})"
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.FloorDiv):
        return f"Math.floor({_js_expr(e.left)} / {_js_expr(e.right)})"
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return f"-{_js_expr(e.operand)}"
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        return f"!{_js_expr(e.operand)}"
    if isinstance(e, ast.BoolOp):
        op = " && " if isinstance(e.op, ast.And) else " || "
        return "(" + op.join(_js_expr(v) for v in e.values) + ")"
    if isinstance(e, ast.Compare) and len(e.ops) == 1 and type(e.ops[0]) in _JS_CMP:
        return f"{_js_expr(e.left)} {_JS_CMP[type(e.ops[0])]} {_js_expr(e.comparators[0])}"
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "len" and len(e.args) == 1:
        return f"{_js_expr(e.args[0])}.length"
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in ("abs", "min", "max"):
        return f"Math.{e.func.id}({', '.join(_js_expr(a) for a in e.args)})"
    if isinstance(e, ast.Subscript) and not isinstance(e.slice, ast.Slice):
        return f"{_js_expr(e.value)}[{_js_expr(e.slice)}]"
    if isinstance(e, ast.List):
        return "[" + ", ".join(_js_expr(x) for x in e.elts) + "]"
    raise _Untranslatable(type(e).__name__)


def _js_stmts(body: Sequence[ast.stmt], indent: str, declared: set[str]) -> list[str]:
    out = []
    for s in body:
        if isinstance(s, ast.Return):
            out.append(f"{indent}return {_js_expr(s.value) if s.value else ''};".replace(" ;", ";"))
        elif isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            name = s.targets[0].id
            kw = "" if name in declared else "let "
            declared.add(name)
            out.append(f"{indent}{kw}{name} = {_js_expr(s.value)};")
        elif isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name) and type(s.op) in _JS_BINOPS:
            out.append(f"{indent}{s.target.id} {_JS_BINOPS[type(s.op)]}= {_js_expr(s.value)};")
        elif isinstance(s, ast.If):
            out.append(f"{indent}if ({_js_expr(s.test)}) {{")
            out += _js_stmts(s.body, indent + "  ", declared)
            if s.orelse:
                out.append(f"{indent}}} else {{")
                out += _js_stmts(s.orelse, indent + "  ", declared)
            out.append(f"{indent}}}")
        elif isinstance(s, ast.While) and not s.orelse:
            out.append(f"{indent}while ({_js_expr(s.test)}) {{")
            out += _js_stmts(s.body, indent + "  ", declared)
            out.append(f"{indent}}}")
        elif (isinstance(s, ast.For) and isinstance(s.target, ast.Name) and isinstance(s.iter, ast.Call)
              and isinstance(s.iter.func, ast.Name) and s.iter.func.id == "range" and not s.orelse
              and 1 <= len(s.iter.args) <= 2):
            lo, hi = (("0", _js_expr(s.iter.args[0])) if len(s.iter.args) == 1
                      else (_js_expr(s.iter.args[0]), _js_expr(s.iter.args[1])))
            v = s.target.id
            out.append(f"{indent}for (let {v} = {lo}; {v} < {hi}; {v}++) {{")
            out += _js_stmts(s.body, indent + "  ", declared | {v})
            out.append(f"{indent}}}")
        elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            continue  # docstring
        elif isinstance(s, ast.Pass):
            continue
        else:
            raise _Untranslatable(type(s).__name__)
    return out


def to_javascript(source: str) -> str | None:
    """Translate a simple Python function to JavaScript, or None when it uses anything the course's
    tiny transpiler does not handle. Introduced in lesson 05."""
    try:
        tree = ast.parse(source)
        fns = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
        if len(fns) != 1 or len(tree.body) != 1 or fns[0].args.vararg or fns[0].args.kwarg:
            return None
        fn = fns[0]
        params = [a.arg for a in fn.args.args]
        lines = [f"function {fn.name}({', '.join(params)}) {{"]
        lines += _js_stmts(fn.body, "  ", set(params))
        lines.append("}")
        return "\n".join(lines)
    except (_Untranslatable, SyntaxError):
        return None


def translate_sample(rec: FunctionRecord) -> dict | None:
    """JavaScript (from :func:`to_javascript`) → the real Python function; None if untranslatable.

    Introduced in lesson 05.
    """
    js = to_javascript(strip_docstring(rec.source))
    if js is None:
        return None
    return {"kind": "translate",
            "instruction": "Translate the following JavaScript function to Python.",
            "input": js, "output": strip_docstring(rec.source), "tests": _doctest_asserts(rec) or None,
            "source_path": rec.path, "entry_point": rec.name}


def _doctest_asserts(rec: FunctionRecord) -> str:
    return "\n".join(f"assert ({expr}) == ({want}), {expr!r}" if want else expr for expr, want in rec.doctests)


def _tiny_function() -> FunctionRecord:
    """The lesson's Fibonacci example as a FunctionRecord (used when no function is found)."""
    src = FIBONACCI_EXAMPLE["output"].removeprefix("```python\n").split("\n\n# Unit Tests")[0]  # the function only
    return FunctionRecord("fibonacci", "lesson-05-example", src,
                          "Return the n-th Fibonacci number.", ["n"], [("fibonacci(10)", "55")])


@dataclass
class InstructionSet:
    """Instruction samples and what happened to every candidate (counts and reasons)."""

    samples: list[dict]
    skipped: Counter
    verified_by: str          # "sandbox (<backend>)" or a sentence saying why nothing was run

    def counts(self) -> dict[str, int]:
        return dict(Counter(s["kind"] for s in self.samples))


def verify_samples(samples: list[dict], records: Mapping[str, FunctionRecord], *,
                   run_many: Callable[..., list] | None = None,
                   timeout_s: float | None = None) -> tuple[list[bool], list[str], str]:
    """Run each sample's reference with ``run_many`` (the signature of
    :func:`course_lib.evaluation.sandbox.run_many`): the Python code must define its function and pass
    the doctest asserts; a unit-test sample's tests must pass against the function.

    Returns (ok per sample, reason per sample, a sentence naming what checked them). Without
    ``run_many`` nothing is executed (untrusted code never runs outside a sandbox): every sample is
    kept unverified and the sentence says so. Each run's time limit is ``timeout_s`` (None: ``run_many``'s
    own default). Introduced in lesson 05.
    """
    if run_many is None:
        return ([True] * len(samples), ["not executed"] * len(samples),
                "not executed (no sandbox given: pass run_many=course_lib.evaluation.sandbox.run_many): "
                "references were only parsed")
    items = []
    for s in samples:
        rec = records[s["entry_point"] + "@" + s["source_path"]]
        if s["kind"] == "unittest":
            items.append({"code": s["input"], "tests": s["output"] + f"\ntest_{rec.name}()\n"})
        else:
            code = s["output"] if s["kind"] != "explain" else rec.source
            items.append({"code": code, "tests": _doctest_asserts(rec) or None})
    limit = {} if timeout_s is None else {"timeout_s": timeout_s}
    results = run_many(items, workers=4, progress=False, **limit)
    ok = [r.status == "passed" for r in results]
    reasons = [r.status if r.status != "passed" else "" for r in results]
    backends = sorted({str(getattr(r, "backend", "") or "?") for r in results}) or ["no samples"]
    return ok, reasons, f"sandbox ({', '.join(backends)})"


def build_instruction_set(files: Iterable[Path | tuple[str, str]] | None = None, *,
                          max_functions: int = 200, kinds: Sequence[str] = KINDS, seed: int = 0,
                          verify: bool = True, run_many: Callable[..., list] | None = None,
                          timeout_s: float | None = None) -> InstructionSet:
    """Instruction samples of the four kinds from real functions (``files`` as in
    :func:`harvest_functions`; default the course corpus). With ``verify`` each reference is checked
    by :func:`verify_samples` with ``run_many`` (lesson 06's sandbox ``run_many``; without it nothing
    runs and ``verified_by`` says so; ``timeout_s`` per run). Introduced in lesson 05.
    """
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown kinds {sorted(unknown)}; the lesson has {KINDS}")
    records, skipped = harvest_functions(files, max_functions=max_functions)
    if not records:
        records = [_tiny_function()]
        skipped["no function found: using the lesson's Fibonacci example"] += 1
    makers = {"codegen": codegen_sample, "explain": explain_sample,
              "translate": translate_sample, "unittest": unittest_sample}
    samples = []
    for rec in records:
        for kind in kinds:
            s = makers[kind](rec)
            if s is None:
                skipped[f"{kind}: " + ("no doctest examples" if kind == "unittest" else "not translatable")] += 1
                continue
            samples.append(s)
    by_key = {r.name + "@" + r.path: r for r in records}
    if verify:
        ok, reasons, verified_by = verify_samples(samples, by_key, run_many=run_many, timeout_s=timeout_s)
        kept = []
        for s, good, why in zip(samples, ok, reasons):
            if good:
                kept.append(s)
            else:
                skipped[f"{s['kind']}: reference {why} in the sandbox"] += 1
        samples = kept
    else:
        verified_by = "not executed (verify=False)"
    random.Random(seed).shuffle(samples)
    for i, s in enumerate(samples):
        s["id"] = f"{s['kind']}-{i:04d}"
    return InstructionSet(samples, skipped, verified_by)


# --- chat formatting, the answer-only mask, packing ----------------------------------------------

def to_messages(sample: Mapping[str, Any], system: str | None = None) -> list[dict]:
    """An instruction sample as chat messages (system?, user, assistant). Introduced in lesson 05."""
    for key in ("instruction", "output"):
        if key not in sample:
            raise KeyError(f"sample {sample.get('id', '?')!r} has no {key!r} column; "
                           f"an instruction sample needs instruction / input / output")
    user = sample["instruction"] + (f"\n\n{sample['input']}" if sample.get("input") else "")
    msgs = [{"role": "system", "content": system}] if system else []
    return msgs + [{"role": "user", "content": user}, {"role": "assistant", "content": sample["output"]}]


def answer_only_labels(input_ids: Sequence[int], prompt_len: int) -> list[int]:
    """Labels for answer-only SFT: ``IGNORE_INDEX`` for the first ``prompt_len`` tokens, the token
    id itself for the answer. Introduced in lesson 05."""
    return [IGNORE_INDEX if i < prompt_len else int(t) for i, t in enumerate(input_ids)]


def chat_prompt(tokenizer, user: str, *, system: str | None = None) -> str:
    """The chat-formatted prompt for one user message, ending where the assistant's answer starts
    (the tokenizer's chat template with ``add_generation_prompt=True``): what a model reads at
    inference and, in :func:`encode_chat`, the part of a training sample that gets no loss.
    Introduced in lesson 05."""
    msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
    return tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)


def encode_chat(tokenizer, messages: Sequence[Mapping[str, str]], *, max_len: int | None = None) -> dict:
    """The one place the course builds an SFT example: chat formatting plus answer-only labels.

    ``messages`` ends with the assistant's answer. The prompt (everything before it, rendered with
    ``add_generation_prompt=True``) and the answer (its text and the template's end-of-turn token,
    ``<|im_end|>`` for ChatML, so the model learns to stop; not the newline after it) are tokenized
    separately and concatenated, as LLaMA-Factory does; labels are ``-100`` on the prompt
    (:func:`answer_only_labels`). Returns ``input_ids``, ``labels``, ``attention_mask``,
    ``prompt_len`` and ``text``. Introduced in lesson 05.
    """
    messages = list(messages)
    if not messages or messages[-1].get("role") != "assistant":
        raise ValueError("encode_chat needs messages that end with the assistant's answer")
    prompt_text = tokenizer.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True)
    full_text = tokenizer.apply_chat_template(messages, tokenize=False)
    if not full_text.startswith(prompt_text):
        raise ValueError("the chat template renders the prompt differently with and without the answer; "
                         "the answer-only mask needs the prompt to be a prefix")
    end = full_text.rstrip("\n")  # the template's trailing newline after <|im_end|> is not trained on
    prompt_ids = list(tokenizer(prompt_text, add_special_tokens=False)["input_ids"])
    ids = prompt_ids + list(tokenizer(end[len(prompt_text):], add_special_tokens=False)["input_ids"])
    if max_len is not None:
        ids = ids[:max_len]
    return {"input_ids": ids, "labels": answer_only_labels(ids, len(prompt_ids)), "attention_mask": [1] * len(ids),
            "prompt_len": len(prompt_ids), "text": end}


def tokenize_chat(sample: Mapping[str, Any], tokenizer, *, system: str | None = None,
                  max_len: int | None = None) -> dict:
    """Format an instruction sample as a chat and build its answer-only label mask
    (:func:`encode_chat` on :func:`to_messages`). Returns ``input_ids``, ``labels``,
    ``attention_mask``, ``prompt_len`` and ``text``. Introduced in lesson 05.
    """
    return encode_chat(tokenizer, to_messages(sample, system), max_len=max_len)


def pack_sequences(examples: Sequence[Mapping[str, Sequence[int]]], max_len: int) -> list[dict]:
    """Greedy packing: concatenate tokenized samples into rows of at most ``max_len`` tokens.

    Each packed row keeps ``labels`` and gets ``position_ids`` that restart at 0 for every sample and
    ``sequence_ids`` (which sample a token belongs to) so attention can be kept inside a sample.
    Samples longer than ``max_len`` are truncated. Introduced in lesson 05.
    """
    rows: list[dict] = []
    cur = {"input_ids": [], "labels": [], "position_ids": [], "sequence_ids": []}
    for k, ex in enumerate(examples):
        ids, labels = list(ex["input_ids"])[:max_len], list(ex["labels"])[:max_len]
        if cur["input_ids"] and len(cur["input_ids"]) + len(ids) > max_len:
            rows.append(cur)
            cur = {"input_ids": [], "labels": [], "position_ids": [], "sequence_ids": []}
        cur["input_ids"] += ids
        cur["labels"] += labels
        cur["position_ids"] += list(range(len(ids)))
        cur["sequence_ids"] += [k] * len(ids)
    if cur["input_ids"]:
        rows.append(cur)
    return rows


def packing_efficiency(rows: Sequence[Mapping[str, Sequence[int]]], max_len: int) -> float:
    """Share of the ``len(rows) * max_len`` slots filled with real tokens. Introduced in lesson 05."""
    return sum(len(r["input_ids"]) for r in rows) / max(1, len(rows) * max_len)


def mask_html(tokenizer, input_ids: Sequence[int], labels: Sequence[int]) -> str:
    """HTML showing each token, grey where the loss ignores it, green where it trains.

    Introduced in lesson 05.
    """
    spans = []
    for tid, lab in zip(input_ids, labels):
        piece = tokenizer.decode([tid])
        trained = lab != IGNORE_INDEX
        colour = "#c8f7c5" if trained else "#e6e6e6"
        text = html.escape(piece).replace("\n", "↵<br>")
        spans.append(f'<span style="background:{colour};border-right:1px solid #fff;'
                     f'font-family:monospace;white-space:pre">{text}</span>')
    legend = ('<div style="margin-bottom:4px"><span style="background:#e6e6e6">prompt: label -100 '
              '(no loss)</span> <span style="background:#c8f7c5">answer: trained</span></div>')
    return legend + "<div>" + "".join(spans) + "</div>"


def load_instruction_set(profile: ProfileLike = "ci", *, rebuild: bool = False,
                         run_many: Callable[..., list] | None = None) -> InstructionSet:
    """The profile's instruction set, harvested from the course corpus (:func:`corpus_sources`) and
    verified with ``run_many`` (:func:`build_instruction_set`; without it nothing runs), built once and
    cached through :mod:`course_lib.store` (keyed by the settings, the Python version, whether a sandbox
    verified it, and — upstream — the corpus fingerprint). Introduced in lesson 05."""
    import json

    from course_lib import store
    from course_lib.training.tinymodel import corpus_repositories

    P = resolve_profile(profile)
    S = P.instructions
    verified = run_many is not None
    _, fingerprint = corpus_repositories(P)
    config = {"settings": dict(S), "python": sys.version, "verified": verified, "format": 4}

    def build(folder):
        ins = build_instruction_set(corpus_sources(P), max_functions=S.max_functions,
                                    seed=P.seed, run_many=run_many, timeout_s=P.sandbox.timeout_s)
        (folder / "instructions.json").write_text(json.dumps(
            {"samples": ins.samples, "skipped": dict(ins.skipped), "verified_by": ins.verified_by},
            ensure_ascii=False), encoding="utf-8")
        return {"samples": len(ins.samples)}

    art = store.get_or_build("instructions", P.name, config, build, upstream=[fingerprint], rebuild=rebuild)
    data = json.loads((art.path / "instructions.json").read_text(encoding="utf-8"))
    return InstructionSet(data["samples"], Counter(data["skipped"]), data["verified_by"])
