"""Dependency order of the files in a repository: import parsing, module resolution, topological sort.

Lesson 03 builds it in this order:

1. :func:`regex_imports` — the one-regex parser most tutorials start from, and where it fails;
2. :func:`ast_imports` — an AST parser that sees relative imports, ``from . import x``, aliases and
   where an import sits (top level, ``try``, function, ``if TYPE_CHECKING``); :func:`tolerant_imports`
   for files ``ast`` cannot parse (Python 2), via the tokenizer, so strings/comments are never read;
3. :func:`module_index` / :func:`resolve_import` — module names of the repository's own files
   (packages, ``__init__.py``, ``src/`` layouts, top-level modules) and which file an import means;
4. :func:`import_graph` — a networkx DiGraph, edge ``dependency -> importer``;
5. orderings — :func:`order_alphabetical`, :func:`order_kahn_fallback` (topological, cycles in name
   order), :func:`order_deepseek` (DeepSeek-Coder's smallest-in-degree rule), :func:`order_scc`
   (condense strongly connected components, DeepSeek's rule inside each); :func:`edge_respect` measures
   the share of import edges an order respects;
6. :func:`order_files` and :func:`repo_to_sample` — the public functions; :func:`load_ordered_corpus`
   gives lesson 04 one training sample per repository.

C/C++ (``language="cpp"``): the edges come from local ``#include "..."`` lines
(:func:`course_lib.data.clike.include_graph`, re-exported here with ``parse_includes``,
``resolve_include``, ``default_include_dirs``, ``IncludeStats``) and go through the same orderings.

Introduced in lesson 03.
"""
from __future__ import annotations

import ast
import heapq
import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import networkx as nx

from course_lib.data.clike import (  # noqa: F401  (lesson 03's C/C++ half lives beside the lexer; re-exported)
    IncludeRef,
    IncludeStats,
    default_include_dirs,
    include_graph,
    parse_includes,
    resolve_include,
)
from course_lib.data.corpus import quiet_datasets
from course_lib.profiles import ProfileLike, resolve_profile

# --- 1. the lesson's regex parser -------------------------------------------------------------------

REGEX_IMPORT = re.compile(r"^\s*(?:from\s+(\S+)\s+import|import\s+(\S+))", re.MULTILINE)


def regex_imports(source: str) -> list[str]:
    """Module names imported by ``source`` according to one regular expression: ``import X`` and
    ``from X import ...`` at the start of a line. It is the starting point of lesson 03 and is wrong in
    known ways: it reads strings and comments, loses ``a, b`` lists and ``as`` aliases
    (``import a.b as c`` gives ``a.b``), and keeps relative dots without knowing the package.
    Introduced in lesson 03."""
    return [m.group(1) or m.group(2).rstrip(",") for m in REGEX_IMPORT.finditer(source)]


# The lecture's own version (§4 "代码实战：简易拓扑排序"), restated: one regex that takes the first word
# after a line-initial ``from``/``import``; an edge ``{module}.py -> importer`` when that file exists; and
# when networkx finds a cycle, a warning and the files in their input order.
LECTURE_IMPORT_RE = re.compile(r"^(?:from|import)\s+(\w+)", re.MULTILINE)


def lecture_parse_imports(file_content: str) -> list[str]:
    """The lecture's import parser, as the lecture gives it: ``re.findall`` of
    ``^(?:from|import)\\s+(\\w+)`` (MULTILINE) — the first word after a line-initial ``from`` or
    ``import``. It misses indented imports (``try``/function bodies), keeps only the first of
    ``import a, b``, gives nothing for ``from . import x`` / ``from .m import x`` (``\\w`` cannot match
    a dot) and reads ``import`` lines inside strings. Introduced in lesson 03."""
    return LECTURE_IMPORT_RE.findall(file_content)


def lecture_topological_sort_files(files: Mapping[str, str]) -> tuple[list[str], bool]:
    """The lecture's ``topological_sort_files``: nodes are the file names, an edge ``f"{module}.py" ->
    filename`` for each module :func:`lecture_parse_imports` finds whose file is in ``files`` (no
    self-loops), then ``networkx.topological_sort``; on a cycle (``NetworkXUnfeasible``) the files in
    their input order. Returns ``(order, fell_back)`` — the lecture prints a warning instead of the flag.
    Introduced in lesson 03."""
    dag = nx.DiGraph()
    dag.add_nodes_from(files)
    for filename, content in files.items():
        for module in lecture_parse_imports(content):
            dependency = f"{module}.py"
            if dependency in files and dependency != filename:
                dag.add_edge(dependency, filename)
    try:
        return list(nx.topological_sort(dag)), False
    except nx.NetworkXUnfeasible:
        return list(files), True


# --- 2. AST and tolerant parsers --------------------------------------------------------------------

@dataclass(frozen=True)
class ImportRef:
    """One imported module as written: ``module`` (dotted, may be empty for ``from . import x``),
    ``level`` (number of leading dots), ``names`` (for ``from`` imports), ``lineno`` and ``context``:
    ``top``, ``try``, ``function``, ``class``, ``type_checking`` or ``if``. Introduced in lesson 03."""

    module: str
    level: int = 0
    names: tuple[str, ...] = ()
    lineno: int = 0
    context: str = "top"

    def written(self) -> str:
        return "." * self.level + self.module


class _ImportVisitor(ast.NodeVisitor):
    def __init__(self) -> None:
        self.refs: list[ImportRef] = []
        self.context: list[str] = []

    def _ctx(self) -> str:
        return self.context[-1] if self.context else "top"

    def _nested(self, node: ast.AST, ctx: str) -> None:
        self.context.append(ctx)
        self.generic_visit(node)
        self.context.pop()

    def visit_FunctionDef(self, node):  # noqa: N802
        self._nested(node, "function")

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):  # noqa: N802
        self._nested(node, "class" if self._ctx() == "top" else self._ctx())

    def visit_Try(self, node):  # noqa: N802
        self._nested(node, "try" if self._ctx() == "top" else self._ctx())

    visit_TryStar = visit_Try

    def visit_If(self, node):  # noqa: N802
        test = ast.unparse(node.test) if hasattr(ast, "unparse") else ""
        ctx = "type_checking" if "TYPE_CHECKING" in test else "if"
        self._nested(node, ctx if self._ctx() in ("top", "if") else self._ctx())

    def visit_Import(self, node):  # noqa: N802
        for alias in node.names:
            self.refs.append(ImportRef(alias.name, 0, (), node.lineno, self._ctx()))

    def visit_ImportFrom(self, node):  # noqa: N802
        names = tuple(a.name for a in node.names)
        self.refs.append(ImportRef(node.module or "", node.level or 0, names, node.lineno, self._ctx()))


def ast_imports(source: str) -> list[ImportRef]:
    """Every import statement in ``source`` found by walking its AST (raises ``SyntaxError`` when the
    file does not parse as Python 3). Introduced in lesson 03."""
    import warnings

    visitor = _ImportVisitor()
    with warnings.catch_warnings():  # files with invalid escapes ("\.") parse with a warning
        warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
        tree = ast.parse(source)
    visitor.visit(tree)
    return visitor.refs


def tolerant_imports(source: str) -> list[ImportRef]:
    """Imports of a file the AST cannot parse (e.g. Python 2 code) or that is too large for it: the
    tokenizer's logical lines that start with ``import``/``from`` (so strings and comments are never
    read as imports); where even the tokenizer fails, a line scan with comments stripped. Context is
    ``top`` for unindented lines, else ``if``. Streams: memory stays a small multiple of the input.
    Introduced in lesson 03."""
    refs: list[ImportRef] = []
    try:
        for line in _logical_lines(source):
            _add_import_line(refs, *line)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        refs = []
        for i, raw in enumerate(io.StringIO(source), 1):
            words = raw.split("#", 1)[0].split()
            if words and words[0] in ("import", "from"):
                _add_import_line(refs, i, len(raw) - len(raw.lstrip()), words)
    return refs


def _add_import_line(refs: list[ImportRef], lineno: int, indent: int, words: list[str]) -> None:
    ctx = "top" if indent == 0 else "if"
    if len(words) >= 2 and words[0] == "import":
        for part in " ".join(words[1:]).split(","):
            name = part.split(" as ")[0].strip().strip("()")
            if re.fullmatch(r"[\w.]+", name):
                refs.append(ImportRef(name, 0, (), lineno, ctx))
    elif len(words) >= 4 and words[0] == "from" and words[2] == "import":
        target = words[1]
        level = len(target) - len(target.lstrip("."))
        module = target[level:]
        names = tuple(n.strip("(), ") for n in " ".join(words[3:]).split(",") if n.strip("(), "))
        names = tuple(n.split(" as ")[0].strip() for n in names)
        if re.fullmatch(r"[\w.]*", module):
            refs.append(ImportRef(module, level, names, lineno, ctx))


def _logical_lines(source: str) -> Iterator[tuple[int, int, list[str]]]:
    """(line number, indent, words) of each logical line that starts with ``import`` or ``from``,
    strings and comments removed; a ``.`` glues to the tokens it touches, so ``from .x import y``
    gives the words ``from .x import y``. A generator that keeps only the current line's words."""
    words: list[str] = []
    start, indent, prev_end, prev_string, skip = 0, 0, None, "", False
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
            if words and not skip:
                yield start, indent, words
            words, prev_end, skip = [], None, False
            continue
        if skip or tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT,
                                tokenize.STRING):
            continue
        if not words:
            start, indent = tok.start
            if tok.string not in ("import", "from"):
                skip = True  # not an import statement: nothing of this line is kept
                continue
        touching = prev_end == tok.start and words
        if touching and ("." in (tok.string, prev_string) or tok.string == "..."
                         or words[-1].endswith(".")):
            words[-1] += tok.string
        else:
            words.append(tok.string)
        prev_end, prev_string = tok.end, tok.string


# Above this many characters a file is not given to ``ast.parse`` (its tree takes ~400 bytes per byte of
# source: 5 MB -> 2 GB): it is parsed by the streaming tokenizer parser instead, with a warning.
# Equal to the corpus's file-size filter (``filters.MAX_FILE_BYTES``), so corpus files always get the AST.
MAX_AST_CHARS = 200_000


class LargeFileWarning(UserWarning):
    """A file was too large for the AST parser and was parsed by the streaming tokenizer parser."""


def parse_imports(source: str, *, name: str = "<source>") -> tuple[list[ImportRef], str]:
    """``(imports, parser)``: :func:`ast_imports` when the file parses (``parser == "ast"``), else
    :func:`tolerant_imports` (``parser == "tolerant"``). A file over :data:`MAX_AST_CHARS` characters
    is not given to the AST (whose tree would take ~400x the file's size in memory): it is streamed
    through the tokenizer parser (``parser == "tolerant"``) and a :class:`LargeFileWarning` names it
    (``name``); memory then stays within a small multiple of the input. Raises ``TypeError`` for
    anything but a ``str``; never raises on bad Python. Introduced in lesson 03."""
    if not isinstance(source, str):
        raise TypeError(f"parse_imports needs the source as a str, got {type(source).__name__}")
    if len(source) > MAX_AST_CHARS:
        import warnings

        warnings.warn(f"{name}: {len(source):,} characters is over deps.MAX_AST_CHARS "
                      f"({MAX_AST_CHARS:,}); parsed by the streaming tokenizer parser instead of the AST "
                      f"(import contexts are then only top-level vs indented)", LargeFileWarning, stacklevel=2)
        return tolerant_imports(source), "tolerant"
    try:
        return ast_imports(source), "ast"
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return tolerant_imports(source), "tolerant"


# --- 3. module resolution inside a repository -------------------------------------------------------

def module_name(path: str, package_dirs: set[str]) -> str | None:
    """The dotted module name of a repo-relative ``.py`` path: the file's directory chain is walked up
    while each directory is a package (holds ``__init__.py``); the first non-package directory is the
    import root (``src/``, the repository root, ``Lib/``...). ``pkg/__init__.py`` -> ``pkg``.
    None for non-Python files. Introduced in lesson 03."""
    if not path.endswith(".py"):
        return None
    parts = path[:-3].split("/")
    is_init = parts[-1] == "__init__"
    dirs = parts[:-1]
    keep = 0  # how many of the innermost directories are packages
    for k in range(len(dirs), 0, -1):
        if "/".join(dirs[:k]) in package_dirs:
            keep += 1
        else:
            break
    if is_init:
        return ".".join(dirs[len(dirs) - keep:]) or None
    return ".".join(dirs[len(dirs) - keep:] + [parts[-1]])


def module_index(paths: Iterable[str]) -> dict[str, str]:
    """``{module name: path}`` for the repository's Python files (see :func:`module_name`); when two
    files claim one name (two import roots), the shorter, then alphabetically first path wins.
    Introduced in lesson 03."""
    paths = sorted(paths, key=lambda p: (len(p), p))
    package_dirs = {p[: -len("/__init__.py")] for p in paths if p.endswith("/__init__.py")}
    index: dict[str, str] = {}
    for p in paths:
        name = module_name(p, package_dirs)
        if name and name not in index:
            index[name] = p
    return index


def relative_to_absolute(importer: str, is_package: bool, level: int, module: str) -> str | None:
    """The absolute module a relative import names. ``importer`` is the importing module's dotted
    name, ``is_package`` whether it is a package's ``__init__.py``; ``level`` dots go up from the
    importer's package (1 = the package itself). ``from . import x`` has ``module == ""`` and gives the
    package. None when the dots climb above the top-level package.

    ``relative_to_absolute("pkg.sub.mod", False, 1, "util") == "pkg.sub.util"``;
    ``relative_to_absolute("pkg.sub", True, 2, "") == "pkg"``. Introduced in lesson 03."""
    if level <= 0:
        return module or None
    parts = importer.split(".")
    package = parts if is_package else parts[:-1]
    if level - 1 >= len(package):
        return None
    base = package[: len(package) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def resolve_import(ref: ImportRef, importer: str, index: Mapping[str, str],
                   reverse: Mapping[str, str] | None = None) -> list[str]:
    """Repository files that import ``ref`` (in file ``importer``) refers to: for ``from X import n``
    the submodule ``X.n`` when it is a file, else ``X`` itself; for ``import a.b.c`` the deepest of
    ``a.b.c``, ``a.b``, ``a`` that is a file. Relative imports are resolved against the importer's
    package. External modules give ``[]``. Introduced in lesson 03."""
    reverse = reverse if reverse is not None else {v: k for k, v in index.items()}
    if ref.level:
        own = reverse.get(importer)
        if own is None:
            return []
        base = relative_to_absolute(own, importer.endswith("__init__.py"), ref.level, ref.module)
        if base is None:
            return []
    else:
        base = ref.module
    found: list[str] = []
    if ref.names:
        for n in ref.names:
            if n != "*" and f"{base}.{n}".lstrip(".") in index:
                found.append(index[f"{base}.{n}".lstrip(".")])
    if not found or len(found) < len([n for n in ref.names if n != "*"]):
        parts = base.split(".") if base else []
        for k in range(len(parts), 0, -1):
            name = ".".join(parts[:k])
            if name in index:
                found.append(index[name])
                break
    return sorted(set(p for p in found if p != importer))


def installed_package_files(distribution: str) -> dict[str, str]:
    """``{path: source}`` of the ``.py`` files an installed distribution ships (paths relative to
    site-packages, as in its RECORD): a real repository-sized package to measure orderings on. Files
    that cannot be read as UTF-8 are left out and their number is printed. Introduced in lesson 03."""
    import importlib.metadata as md

    try:
        dist = md.distribution(distribution)
    except md.PackageNotFoundError:
        raise ValueError(f"distribution {distribution!r} is not installed here; pick one from "
                         f"`pip list`") from None
    files: dict[str, str] = {}
    skipped = 0
    for f in dist.files or []:
        name = str(f).replace("\\", "/")
        if not name.endswith(".py") or name.startswith("..") or "/__pycache__/" in name:
            continue
        try:
            files[name] = dist.locate_file(f).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            skipped += 1
    if skipped:
        print(f"{distribution}: skipped {skipped} unreadable .py files")
    return files


# --- 4. the graph -----------------------------------------------------------------------------------

@dataclass
class ParseStats:
    """What building a graph saw: files, parsers used, imports found, resolved inside the repository,
    external, unresolved relative ones, and the files that needed the tolerant parser."""

    files: int = 0
    python_files: int = 0
    parsed_ast: int = 0
    parsed_tolerant: int = 0
    imports: int = 0
    internal: int = 0
    external: int = 0
    unresolved_relative: int = 0
    tolerant_files: list[str] = field(default_factory=list)


def import_graph(files: Mapping[str, str], stats: ParseStats | None = None) -> nx.DiGraph:
    """A DiGraph over every path in ``files`` with an edge ``dependency -> importer`` for each import
    that resolves to another file of the repository (edge attribute ``contexts``: where the imports
    sit). Non-Python files are isolated nodes. Pass a :class:`ParseStats` to collect counts.
    Introduced in lesson 03."""
    stats = stats if stats is not None else ParseStats()
    g = nx.DiGraph()
    g.add_nodes_from(sorted(files))
    py = [p for p in files if p.endswith(".py")]
    index = module_index(py)
    reverse = {v: k for k, v in index.items()}
    stats.files, stats.python_files = len(files), len(py)
    for path in sorted(py):
        text = files[path]
        if not isinstance(text, str):
            text = text.decode("utf-8", "replace") if isinstance(text, (bytes, bytearray)) else ""
        refs, parser = parse_imports(text, name=path)
        if parser == "ast":
            stats.parsed_ast += 1
        else:
            stats.parsed_tolerant += 1
            stats.tolerant_files.append(path)
        for ref in refs:
            stats.imports += 1
            targets = resolve_import(ref, path, index, reverse)
            if targets:
                stats.internal += 1
            elif ref.level:
                stats.unresolved_relative += 1
            else:
                stats.external += 1
            for dep in targets:
                if g.has_edge(dep, path):
                    g[dep][path]["contexts"].add(ref.context)
                else:
                    g.add_edge(dep, path, contexts={ref.context})
    return g


def dependency_graph(files: Mapping[str, str], language: str = "python") -> nx.DiGraph:
    """:func:`import_graph` for ``"python"``, :func:`course_lib.data.clike.include_graph` for ``"cpp"``
    (C or C++): local ``#include "..."`` lines, ``<system>`` includes left out. Introduced in lesson 03."""
    from course_lib.data.clike import normalize_language

    return include_graph(files) if normalize_language(language) == "cpp" else import_graph(files)


# --- 5. orderings -----------------------------------------------------------------------------------

def order_alphabetical(g: nx.DiGraph) -> list[str]:
    """Baseline: file names in alphabetical order. Introduced in lesson 03."""
    return sorted(g.nodes)


def order_kahn_fallback(g: nx.DiGraph) -> list[str]:
    """Kahn's topological sort (alphabetical among ready files); the files left when a cycle blocks it
    are appended in name order — the "fall back to file name order" strategy. Introduced in lesson 03."""
    indeg = {n: g.in_degree(n) for n in g}
    ready = [n for n in g if indeg[n] == 0]
    heapq.heapify(ready)
    out: list[str] = []
    while ready:
        n = heapq.heappop(ready)
        out.append(n)
        for m in g.successors(n):
            indeg[m] -= 1
            if indeg[m] == 0:
                heapq.heappush(ready, m)
    placed = set(out)
    return out + sorted(n for n in g if n not in placed)


def order_deepseek(g: nx.DiGraph) -> list[str]:
    """DeepSeek-Coder's rule: repeatedly take the remaining file with the smallest in-degree (edges
    from remaining files), ties by name. It equals Kahn's sort on a DAG and always makes progress on a
    cycle, but it may place a file before a dependency outside its cycle. Introduced in lesson 03."""
    return _smallest_indegree_order(g, list(g.nodes))


def _smallest_indegree_order(g: nx.DiGraph, nodes: Sequence[str]) -> list[str]:
    members = set(nodes)
    indeg = {n: sum(1 for p in g.predecessors(n) if p in members and p != n) for n in nodes}
    heap = [(d, n) for n, d in indeg.items()]
    heapq.heapify(heap)
    done: set[str] = set()
    out: list[str] = []
    while heap:
        d, n = heapq.heappop(heap)
        if n in done or d != indeg[n]:
            continue
        done.add(n)
        out.append(n)
        for m in g.successors(n):
            if m in members and m not in done and m != n:
                indeg[m] -= 1
                heapq.heappush(heap, (indeg[m], m))
    return out


def order_scc(g: nx.DiGraph) -> list[str]:
    """Condense strongly connected components (import cycles) into single nodes, sort that DAG
    topologically (ties: the component's alphabetically first file), and order the files inside each
    component with DeepSeek's smallest-in-degree rule. Every edge between components is respected.
    Introduced in lesson 03."""
    cond = nx.condensation(g)
    first = {c: min(cond.nodes[c]["members"]) for c in cond}
    out: list[str] = []
    for c in nx.lexicographical_topological_sort(cond, key=lambda c: first[c]):
        members = sorted(cond.nodes[c]["members"])
        out.extend(members if len(members) == 1 else _smallest_indegree_order(g, members))
    return out


STRATEGIES: dict[str, Callable[[nx.DiGraph], list[str]]] = {
    "alphabetical": order_alphabetical,
    "kahn_fallback": order_kahn_fallback,
    "deepseek": order_deepseek,
    "scc": order_scc,
}


def edge_respect(order: Sequence[str], g: nx.DiGraph) -> dict[str, float]:
    """Share of import edges (self-loops excluded) whose dependency comes first in ``order``: overall,
    for edges between different strongly connected components (``acyclic``) and for edges inside a
    cycle (``cyclic``); plus the counts. An empty class scores 1.0. Introduced in lesson 03."""
    pos = {p: i for i, p in enumerate(order)}
    comp = {}
    for k, c in enumerate(nx.strongly_connected_components(g)):
        for n in c:
            comp[n] = k
    tot = ok = acyc = acyc_ok = 0
    for u, v in g.edges:
        if u == v:
            continue
        good = pos[u] < pos[v]
        tot += 1
        ok += good
        if comp[u] != comp[v]:
            acyc += 1
            acyc_ok += good
    cyc, cyc_ok = tot - acyc, ok - acyc_ok
    return {"all": ok / tot if tot else 1.0, "acyclic": acyc_ok / acyc if acyc else 1.0,
            "cyclic": cyc_ok / cyc if cyc else 1.0, "edges": tot, "cyclic_edges": cyc}


def compare_strategies(repos: Mapping[str, Mapping[str, str]]) -> list[dict[str, Any]]:
    """One row per (repository, strategy): edges, cyclic edges and the shares each strategy respects.
    Introduced in lesson 03."""
    rows = []
    for name in sorted(repos):
        g = import_graph(repos[name])
        for strategy, fn in STRATEGIES.items():
            rows.append({"repo": name, "strategy": strategy, "files": g.number_of_nodes(),
                         **edge_respect(fn(g), g)})
    return rows


# --- 6. the public functions ------------------------------------------------------------------------

def order_files(files: Mapping[str, str], language: str = "python") -> list[str]:
    """Repo-relative paths of ``files`` (path -> source) in dependency order: every path exactly once;
    for every import edge not inside a cycle the dependency comes before its dependent; files in a
    cycle follow DeepSeek-Coder's smallest-in-degree rule; ties by name, so the same input always gives
    the same output (:func:`order_scc` on :func:`import_graph`). ``language="cpp"``: the edges are
    local ``#include "..."`` lines (:func:`include_graph`; ``<system>`` includes left out), sorted by
    the same :func:`order_scc`. Introduced in lesson 03."""
    return order_scc(dependency_graph(files, language))


MARKER_STYLES = {
    "qwen": ("<|repo_name|>", "<|file_sep|>"),
}


def repo_to_sample(files: Mapping[str, str], repo_name: str | None = None, markers: bool | str = False,
                   order: Sequence[str] | None = None, comment_prefix: str = "# ",
                   language: str = "python") -> str:
    """Concatenate a repository into one training sample in dependency order (:func:`order_files`
    unless ``order`` is given).

    Without markers each file is preceded by its path as a comment line (``# pkg/mod.py``, DeepSeek-Coder
    style) and files are separated by a blank line. With ``markers=True`` (or ``"qwen"``) the
    Qwen2.5-Coder repository format is used: ``<|repo_name|>{repo_name}\\n`` once, then
    ``<|file_sep|>{path}\\n{content}\\n`` per file. ``language="cpp"`` orders by ``#include`` lines
    and, when ``comment_prefix`` is left at ``"# "`` (a preprocessor line in C), writes ``// path``.
    Introduced in lesson 03.
    """
    from course_lib.data.clike import normalize_language

    if normalize_language(language) == "cpp" and comment_prefix == "# ":
        comment_prefix = "// "
    paths = list(order) if order is not None else order_files(files, language)
    if sorted(paths) != sorted(files):
        raise ValueError("order must list every path of files exactly once")
    if markers:
        style = "qwen" if markers is True else markers
        if style not in MARKER_STYLES:
            raise ValueError(f"unknown marker style {markers!r}; known: {', '.join(MARKER_STYLES)}")
        repo_tok, sep_tok = MARKER_STYLES[style]
        head = f"{repo_tok}{repo_name}\n" if repo_name else ""
        return head + "".join(f"{sep_tok}{p}\n{files[p].rstrip(chr(10))}\n" for p in paths)
    head = f"{comment_prefix}repo: {repo_name}\n\n" if repo_name else ""
    return head + "\n".join(f"{comment_prefix}{p}\n{files[p].rstrip(chr(10))}\n" for p in paths)


def load_ordered_corpus(profile: ProfileLike = "ci", rebuild: bool = False, language: str = "python"):
    """One row per repository of the deduped corpus (lesson 02): ``repo``, ``license``, ``n_files``,
    ``paths`` (dependency order), ``text`` (:func:`repo_to_sample` with Qwen markers), ``edges``,
    ``edges_respected`` and ``tolerant_files``. Cached in ``cache_dir("deps")`` keyed by the profile's
    ``deps`` settings and the deduped corpus; rebuilt when missing. ``language="cpp"``: the deduped
    C/C++ corpus ordered by local ``#include`` lines (:func:`include_graph`), ``// path`` comments in
    the plain format, ``tolerant_files`` empty. Introduced in lesson 03."""
    import datasets

    from course_lib import store
    from course_lib.data.clike import normalize_language
    from course_lib.data.dedup import dedup_artefact, load_deduped_corpus

    P = resolve_profile(profile)
    language = normalize_language(language)
    clike_source = __file__.replace("deps.py", "clike.py")
    cfg = dict(P.deps)
    upstream = dedup_artefact(P) if language == "python" else dedup_artefact(P, language=language)

    def build(folder):
        corpus = load_deduped_corpus(P) if language == "python" else load_deduped_corpus(P, language=language)
        by_repo: dict[str, dict[str, str]] = {}
        licenses: dict[str, str] = {}
        for repo, path, text, lic in zip(corpus["repo"], corpus["path"], corpus["content"], corpus["license"]):
            by_repo.setdefault(repo, {})[path] = text
            licenses.setdefault(repo, lic)
        names = sorted(by_repo)
        if cfg.get("max_repos"):
            names = names[: cfg["max_repos"]]
        rows: dict[str, list] = {k: [] for k in ("repo", "license", "n_files", "paths", "text", "edges",
                                                 "edges_respected", "tolerant_files")}
        for name in names:
            files = by_repo[name]
            stats = ParseStats()
            g = import_graph(files, stats) if language == "python" else include_graph(files)
            order = order_scc(g)
            rows["repo"].append(name)
            rows["license"].append(licenses[name])
            rows["n_files"].append(len(files))
            rows["paths"].append(order)
            rows["text"].append(repo_to_sample(files, name, markers=True, order=order, language=language))
            rows["edges"].append(g.number_of_edges())
            rows["edges_respected"].append(edge_respect(order, g)["all"])
            rows["tolerant_files"].append(stats.tolerant_files)
        ds = datasets.Dataset.from_dict(rows)
        with quiet_datasets():
            ds.save_to_disk(str(folder / "dataset"))
        shown = P.name if language == "python" else f"{P.name}, {language}"
        print(f"ordered corpus ({shown}): {len(names)} repositories, {sum(rows['n_files'])} files, "
              f"{sum(len(t) for t in rows['tolerant_files'])} parsed by the tolerant parser")
        return {"repos": len(names)}

    art = store.get_or_build("deps", P.name if language == "python" else f"{P.name}-{language}",
                             cfg if language == "python" else {**cfg, "language": language},
                             build, upstream=[upstream.key],
                             code=[__file__] if language == "python" else [__file__, clike_source],
                             rebuild=rebuild, log=print)
    return datasets.load_from_disk(str(art.path / "dataset"))
