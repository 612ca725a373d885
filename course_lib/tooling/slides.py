"""``./course slides``: reveal.js slides of the lesson notebooks that open without internet.

nbconvert's reveal template loads reveal.js 4.0.2, require.js, jQuery and MathJax 2.7 from CDNs (plus a
mermaid import). The course instead:

* vendors those files once with npm (``reveal.js@4.0.2 mathjax@2.7.9 requirejs@2.3.8 jquery@3.7.1``,
  about 7 MB after trimming) into the course cache (``cache_dir("slides_vendor")``) — they are not
  committed to the repository;
* copies them into a ``vendor/`` folder beside the exported HTML and points the template's URLs there
  (relative URLs, so the folder can be zipped and moved);
* uses the template ``course_lib/tooling/templates/course_reveal`` (nbconvert's ``reveal`` without the mermaid
  and Jupyter-widgets imports);
* removes the cells papermill adds (``injected-parameters``, the error banner).

Without npm and without a cached copy the slides still export, with CDN URLs, and a warning says they
need internet to display.

Introduced in lesson 00.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path

from course_lib import store
from course_lib.paths import build_dir

VENDOR_PACKAGES = {"reveal.js": "4.0.2", "mathjax": "2.7.9", "requirejs": "2.3.8", "jquery": "3.7.1"}
TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
TEMPLATE_NAME = "course_reveal"
REMOVED_TAGS = ("injected-parameters", "papermill-error-cell-tag", "remove-slide")
# The tag vocabulary a lesson cell may carry to change what its slide shows (README, "How to add a lesson"):
TAG_HIDE_CODE = "slide-hide-code"        # show the cell's output only
TAG_HIDE_OUTPUT = "slide-hide-output"    # show the cell's code only
TAG_OUTPUT_OWN = "slide-output-own"      # the output goes to its own sub-slide after the code
TAG_OUTPUT_INLINE = "slide-output-inline"  # keep the output under the code even when the cell is tall
# Automatic rule: a cell whose code plus output is taller than this many lines (an image counts
# IMAGE_LINES, a table TABLE_LINES) shows its output on its own sub-slide.
TALL_CELL_LINES = 16
IMAGE_LINES = 14
TABLE_LINES = 10
MATHJAX_CONFIG = "?config=TeX-AMS_CHTML-full,Safe"
# A text output longer than this many lines shows its first HEAD_LINES and last TAIL_LINES on the slide,
# with a line saying how many were cut (the executed notebook keeps all of it).
LONG_OUTPUT_LINES = 30
HEAD_LINES = 14
TAIL_LINES = 10

# (path inside node_modules, path inside vendor/) — what the reveal template actually loads.
_VENDOR_FILES = [
    ("reveal.js/dist", "reveal.js/dist"),
    ("reveal.js/plugin/notes", "reveal.js/plugin/notes"),
    ("reveal.js/LICENSE", "reveal.js/LICENSE"),
    ("requirejs/require.js", "require.js"),
    ("jquery/dist/jquery.min.js", "jquery.min.js"),
    ("mathjax/MathJax.js", "mathjax/MathJax.js"),
    ("mathjax/LICENSE", "mathjax/LICENSE"),
    ("mathjax/config/TeX-AMS_CHTML-full.js", "mathjax/config/TeX-AMS_CHTML-full.js"),
    ("mathjax/config/Safe.js", "mathjax/config/Safe.js"),
    ("mathjax/extensions", "mathjax/extensions"),
    ("mathjax/jax/input/TeX", "mathjax/jax/input/TeX"),
    ("mathjax/jax/output/CommonHTML", "mathjax/jax/output/CommonHTML"),
    ("mathjax/jax/element", "mathjax/jax/element"),
    ("mathjax/fonts/HTML-CSS/TeX/woff", "mathjax/fonts/HTML-CSS/TeX/woff"),
]
_REQUIRED = ["reveal.js/dist/reveal.js", "reveal.js/dist/reveal.css", "reveal.js/plugin/notes/notes.js",
             "require.js", "jquery.min.js", "mathjax/MathJax.js"]


_vendor_failed = False


class SlidesError(RuntimeError):
    """Slides could not be exported (one sentence saying why and what to do)."""


def _vendor_key() -> str:
    return "-".join(f"{k.replace('.', '')}{v}" for k, v in VENDOR_PACKAGES.items())


def vendor_cache() -> Path:
    """Where the vendored reveal.js/MathJax/require.js/jQuery files live once fetched (an artefact of
    :mod:`course_lib.store`, keyed by the package versions)."""
    return store.artefact_path("slides_vendor", "vendor", dict(VENDOR_PACKAGES))


class _NpmFailed(RuntimeError):
    pass


def _npm_vendor(npm: str, folder: Path, quiet: bool) -> dict:
    """Fill ``folder`` with the vendor files, installed with npm into a scratch folder inside it."""
    specs = [f"{k}@{v}" for k, v in VENDOR_PACKAGES.items()]
    if not quiet:
        print(f"slides: vendoring {' '.join(specs)} with npm (once)", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="npm-", dir=folder.parent) as tmp:
        try:
            proc = subprocess.run([npm, "install", "--prefix", tmp, "--no-audit", "--no-fund", "--no-save",
                                   "--loglevel=error", "--fetch-retries=1", "--fetch-timeout=60000", *specs],
                                  capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            raise _NpmFailed("npm install timed out") from None
        if proc.returncode != 0:
            raise _NpmFailed("npm install failed: " + " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:]))
        modules = Path(tmp) / "node_modules"
        for src_rel, dst_rel in _VENDOR_FILES:
            src, dst = modules / src_rel, folder / dst_rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.map", "*.esm.js"))
            else:
                shutil.copy2(src, dst)
    return {"packages": specs}


def ensure_vendor(*, quiet: bool = False) -> Path | None:
    """Return the vendor folder, fetching it with npm on first use; None when npm is missing or
    fails (the caller then falls back to CDN URLs). Introduced in lesson 00."""
    global _vendor_failed
    target = vendor_cache()
    if store.is_complete(target) and all((target / f).exists() for f in _REQUIRED):
        return target
    if _vendor_failed:  # tried once in this process already: do not wait on npm for every notebook
        return None
    npm = shutil.which("npm")
    if npm is None:
        _vendor_failed = True
        if not quiet:
            print("slides: npm not found, so reveal.js cannot be vendored for offline use "
                  "(install Node.js/npm, or the slides will load reveal.js from the internet)", file=sys.stderr)
        return None
    try:
        art = store.get_or_build("slides_vendor", "vendor", dict(VENDOR_PACKAGES),
                                 lambda folder: _npm_vendor(npm, folder, quiet), rebuild=True)
    except _NpmFailed as exc:
        _vendor_failed = True
        if not quiet:
            print(f"slides: {exc}; the slides will need internet", file=sys.stderr)
        return None
    return art.path


def _install_vendor(vendor: Path, out_dir: Path) -> None:
    """Copy the vendor folder beside the slides (skipped when it is already there)."""
    dst = out_dir / "vendor"
    stamp = dst / ".vendor-key"
    if stamp.exists() and stamp.read_text() == _vendor_key():
        return
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(vendor, dst)
    stamp.write_text(_vendor_key())


_SOLUTION_BLOCK = re.compile(r"^([ \t]*)### BEGIN SOLUTION[^\n]*\n.*?^[ \t]*### END SOLUTION[^\n]*(\n|$)", re.DOTALL | re.MULTILINE)
_HIDDEN_BLOCK = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS[^\n]*\n.*?^[ \t]*### END HIDDEN TESTS[^\n]*(\n|$)",
                           re.DOTALL | re.MULTILINE)
_TEXT_ESCAPED_UNDERSCORE = re.compile(r"(\\text\{[^{}]*\})")


def strip_for_slides(source: str) -> str:
    """A code cell's source as a slide shows it: each solution block becomes ``...  # exercise``
    (what the student writes), hidden-test blocks disappear."""
    source = _SOLUTION_BLOCK.sub(lambda m: f"{m.group(1)}...  # exercise\n", source)
    source = _HIDDEN_BLOCK.sub("", source)
    return source.rstrip("\n")


def _fix_markdown_math(source: str) -> str:
    """MathJax 2 (the slides) typesets ``\\_`` inside ``\\text{...}`` literally, MathJax 3 (JupyterLab)
    as ``_``: write it as ``_`` for the slides."""
    return _TEXT_ESCAPED_UNDERSCORE.sub(lambda m: m.group(1).replace("\\_", "_"), source)


def _output_lines(outputs) -> int:
    lines = 0
    for out in outputs:
        data = out.get("data", {})
        if out.get("output_type") == "stream":
            lines += len(str(out.get("text", "")).splitlines())
        elif out.get("output_type") == "error":
            lines += 8
        elif any(k.startswith("image/") for k in data):
            lines += IMAGE_LINES
        elif "text/html" in data:
            lines += TABLE_LINES
        elif "text/plain" in data:
            lines += len(str(data["text/plain"]).splitlines())
    return lines


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def frozen_widget(output) -> bool:
    """A Jupyter-widget output (a tqdm bar under ``tqdm.auto``): a saved notebook keeps only its first
    state as text ("0%|"), so it shows a bar that never moves. Introduced in lesson 00."""
    return WIDGET_VIEW in output.get("data", {})


def _last_state(text: str) -> str:
    """A stream's text as a terminal shows it: on each line only what follows the last carriage return
    (a text progress bar redraws itself with ``\r``)."""
    return "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_TRACEBACK_SOURCE = re.compile(r"^\s*(?:-*>\s*)?\d+\s(.*)$")   # "----> 3 assert x" / "      2 y = 1"
_BLOCK_LINES = re.compile(r"^[ \t]*### BEGIN (SOLUTION|HIDDEN TESTS)[^\n]*\n(.*?)^[ \t]*### END \1[^\n]*$",
                          re.DOTALL | re.MULTILINE)
HIDDEN_TEST_FAILED = "一个隐藏测试 (hidden test) 没有通过；它的内容不在 slides 上显示"


def _secret_lines(source: str) -> set[str]:
    """The stripped, non-blank lines of a cell's solution and hidden-test blocks (markers included)."""
    found = set()
    for m in _BLOCK_LINES.finditer(source):
        found |= {ln.strip() for ln in m.group(0).splitlines() if ln.strip()}
    return found


def _shown_marker(text: str) -> bool:
    return any(marker in text for marker in SOLUTION_MARKERS)


def scrub_error(output: dict, secret: set[str]) -> bool:
    """Remove from an error output's traceback every source line of a solution or hidden-test block
    (``secret``, from :func:`_secret_lines`) and every marker line; when the failing line itself was
    secret, the error value is replaced by :data:`HIDDEN_TEST_FAILED`. Returns True when anything was
    hidden. Introduced in lesson 00."""
    hidden = False
    failing_secret = False
    frames = []
    for frame in output.get("traceback", []):
        kept = []
        for line in str(frame).split("\n"):
            plain = _ANSI.sub("", line)
            m = _TRACEBACK_SOURCE.match(plain)
            code_line = m.group(1).strip() if m else ""
            if _shown_marker(plain) or (code_line and code_line in secret):
                hidden = True
                failing_secret = failing_secret or plain.lstrip().startswith("-")
                continue
            kept.append(line)
        frames.append("\n".join(kept))
    if hidden:
        output["traceback"] = frames
    if failing_secret or _shown_marker(str(output.get("evalue", ""))):
        output["evalue"] = HIDDEN_TEST_FAILED
        output["traceback"] = [f for f in frames if not _ANSI.sub("", f).startswith(str(output.get("ename", "")))]
        output["traceback"].append(f"{output.get('ename', 'Error')}: {HIDDEN_TEST_FAILED}")
        hidden = True
    return hidden


def shorten_text(text: str, *, limit: int = LONG_OUTPUT_LINES, head: int = HEAD_LINES, tail: int = TAIL_LINES) -> str:
    """A long text output as a slide shows it: its first ``head`` and last ``tail`` lines with a line
    saying how many were cut, when it has more than ``limit`` lines; else unchanged. Introduced in lesson 00."""
    lines = text.split("\n")
    ends_with_newline = text.endswith("\n")
    if ends_with_newline:
        lines = lines[:-1]
    if len(lines) <= limit:
        return text
    cut = len(lines) - head - tail
    note = f"… [slides 省略了中间 {cut} 行 (lines cut); notebook 里有完整输出] …"
    return "\n".join(lines[:head] + [note] + lines[-tail:]) + ("\n" if ends_with_newline else "")


def _shorten_output(out: dict) -> None:
    if out.get("output_type") == "stream":
        out["text"] = shorten_text(str(out.get("text", "")))
    elif out.get("output_type") in ("execute_result", "display_data"):
        data = out.get("data", {})
        if "text/plain" in data and not any(k.startswith("image/") or k == "text/html" for k in data):
            data["text/plain"] = shorten_text(str(data["text/plain"]))


def first_failure(nb) -> tuple[int, object, dict] | None:
    """(cell number counted from 1, the cell, its error output) of the first cell with an error output,
    or None. Introduced in lesson 00."""
    for i, cell in enumerate(nb.cells, 1):
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return i, cell, out
    return None


def _failure_cell(nb):
    """A markdown cell (its own first slide) saying which cell failed and how, or None for a notebook
    that ran to the end."""
    import nbformat

    found = first_failure(nb)
    if found is None:
        return None
    number, cell, error = found
    error = dict(error)
    scrub_error(error, _secret_lines(cell.source))   # the slide quotes the error as the deck shows it
    shown = strip_for_slides(cell.source).strip().splitlines()
    first = next((ln for ln in shown if ln.strip() and not ln.lstrip().startswith("#")), shown[0] if shown else "")
    count = cell.get("execution_count")
    where = f"cell {number}" + (f" (`In [{count}]`)" if count else "")
    value = str(error.get("evalue", "")).strip().splitlines()[0:1]
    value = value[0][:160] if value else ""
    text = (f"## ⚠ 这份 notebook 执行失败 (failed)\n\n"
            f"失败的是 {where}：`{first.strip()[:80]}`\n\n"
            f"错误 (error)：`{error.get('ename', 'Error')}`" + (f" — {value}" if value else "") + "\n\n"
            "这个 cell 之后的 slides 没有输出 (no outputs)。先修好失败的原因，再重新运行 "
            "`./course run --only NN` 并导出 slides。")
    failure = nbformat.v4.new_markdown_cell(text)
    failure.metadata["slideshow"] = {"slide_type": "slide"}
    failure.metadata["tags"] = ["slide-failure"]
    return failure


def lesson_title(nb) -> str | None:
    """The lesson's title: the first ``# `` heading of the notebook's markdown cells. Introduced in lesson 00."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return re.sub(r"[`*]", "", line[2:]).strip()
    return None


def prepare_for_slides(nb):
    """The notebook as the slides show it (a copy): papermill's cells removed, solutions and hidden
    tests stripped, widget outputs (frozen progress bars) dropped and text bars shown in their last
    state, the slide tags applied and a tall cell's output moved to its own sub-slide (the cell after
    it then starts a new sub-slide instead of joining that output). Also: error tracebacks lose every
    solution and hidden-test line, a long text output keeps its head and tail (:func:`shorten_text`),
    the deck's title is the lesson's (:func:`lesson_title`), and a notebook that failed opens with a slide
    saying which cell failed."""
    import copy

    nb = copy.deepcopy(nb)
    title = lesson_title(nb)
    if title and "title" not in nb.metadata:
        nb.metadata["title"] = title
    failure = _failure_cell(nb)
    cells = []
    after_own_output = False   # the previous cell's output has a sub-slide of its own: do not add to it
    for cell in nb.cells:
        tags = set(cell.get("metadata", {}).get("tags", []))
        if tags & set(REMOVED_TAGS):
            continue
        slide_type = cell.get("metadata", {}).get("slideshow", {}).get("slide_type", "-")
        if after_own_output and slide_type in ("-", "fragment"):
            cell.metadata["slideshow"] = {"slide_type": "subslide"}
        if slide_type not in ("skip", "notes"):
            after_own_output = False
        if cell.cell_type == "markdown":
            cell.source = _fix_markdown_math(cell.source)
            cells.append(cell)
            continue
        if cell.cell_type != "code":
            cells.append(cell)
            continue
        secret = _secret_lines(cell.source)
        cell.source = strip_for_slides(cell.source)
        cell.outputs = [o for o in cell.get("outputs", []) if not frozen_widget(o)]
        for out in cell.outputs:
            if out.get("output_type") == "stream" and "\r" in str(out.get("text", "")):
                out["text"] = _last_state(str(out["text"]))
            if out.get("output_type") == "error":
                scrub_error(out, secret)
            elif out.get("output_type") == "stream" and _shown_marker(str(out.get("text", ""))):
                out["text"] = "\n".join(ln for ln in str(out["text"]).split("\n") if not _shown_marker(ln))
            _shorten_output(out)
        outputs = cell.outputs
        if TAG_HIDE_OUTPUT in tags:
            cell.outputs = []
            outputs = []
        if TAG_HIDE_CODE in tags or not outputs or TAG_OUTPUT_INLINE in tags:
            cells.append(cell)
            continue
        slide_type = cell.metadata.get("slideshow", {}).get("slide_type", "-")
        tall = len(cell.source.splitlines()) + _output_lines(outputs) > TALL_CELL_LINES
        if slide_type != "skip" and (TAG_OUTPUT_OWN in tags or tall):
            code_only = copy.deepcopy(cell)
            code_only.outputs = []
            output_only = copy.deepcopy(cell)
            output_only.metadata["slideshow"] = {"slide_type": "subslide"}
            output_only.metadata["tags"] = sorted(tags | {TAG_HIDE_CODE})
            if "id" in output_only:
                output_only["id"] = f"{cell['id']}-out"  # cell ids stay unique (nbformat 4.5)
            cells += [code_only, output_only]
            after_own_output = True
        else:
            cells.append(cell)
    if failure is not None:   # the deck opens with it: right after the title slide when there is one
        first = 1 if cells and cells[0].cell_type == "markdown" and cells[0].source.startswith("# ") else 0
        cells.insert(first, failure)
    nb.cells = cells
    return nb


def make_exporter(offline: bool = True):
    """A configured nbconvert ``SlidesExporter`` (offline URLs when ``offline``)."""
    try:
        from nbconvert import SlidesExporter
        from nbconvert.preprocessors import TagRemovePreprocessor
    except ImportError as exc:
        raise SlidesError(f"nbconvert is missing ({exc}); run `./course setup`") from None
    exporter = SlidesExporter(template_name=TEMPLATE_NAME, extra_template_basedirs=[str(TEMPLATES_DIR)])
    exporter.reveal_theme = "white"  # local Source Sans Pro; nbconvert's "simple" imports Google Fonts
    if offline:
        exporter.reveal_url_prefix = "vendor/reveal.js"
        exporter.require_js_url = "vendor/require.js"
        exporter.jquery_url = "vendor/jquery.min.js"
        exporter.mathjax_url = "vendor/mathjax/MathJax.js" + MATHJAX_CONFIG
    else:
        exporter.reveal_url_prefix = f"https://unpkg.com/reveal.js@{VENDOR_PACKAGES['reveal.js']}"
    exporter.register_preprocessor(TagRemovePreprocessor(remove_cell_tags=set(REMOVED_TAGS),
                                                         remove_input_tags={TAG_HIDE_CODE},
                                                         remove_all_outputs_tags={TAG_HIDE_OUTPUT},
                                                         enabled=True), enabled=True)
    return exporter


def export_slides(notebook: str | Path, out_dir: str | Path | None = None, *, offline: bool = True) -> Path:
    """Export ``notebook`` as ``<out_dir>/<name>.slides.html`` (default ``build/slides``) with a
    ``vendor/`` folder beside it so it opens offline. Returns the HTML path. Introduced in lesson 00."""
    import nbformat

    notebook = Path(notebook)
    out_dir = Path(out_dir) if out_dir else build_dir("slides")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SlidesError(f"cannot create {out_dir} ({exc.strerror}); choose another --out") from None
    vendor = ensure_vendor() if offline else None
    if vendor is not None:
        _install_vendor(vendor, out_dir)
    try:
        nb = nbformat.read(notebook, as_version=4)
    except Exception as exc:
        raise SlidesError(f"cannot read {notebook}: {exc}") from None
    # Drop papermill's cells before nbconvert assigns slides: removed later, a cell without slide
    # metadata can carry the end-of-slide marker and merge two slides.
    nb = prepare_for_slides(nb)
    body, _ = make_exporter(offline=vendor is not None).from_notebook_node(nb)
    if nb.metadata.get("title"):
        body = re.sub(r"<title>(.*?) slides</title>", r"<title>\1</title>", body, count=1, flags=re.DOTALL)
    slides_part = body.split('<div class="slides">', 1)[-1]
    if _shown_marker(slides_part):
        raise SlidesError(f"{notebook.name}: the deck would show a solution or hidden-test marker; "
                          "report this as a bug of course_lib.tooling.slides")
    return store.atomic_write_text(out_dir / f"{notebook.stem}.slides.html", body)


# --- reading slides back (tests) ----------------------------------------------------------------

class _SlideParser(HTMLParser):
    def __init__(self):
        super().__init__()
        self.depth = 0          # <section> nesting depth
        self.in_slides = False
        self.slides = 0         # top-level <section>s = horizontal slides
        self.subslides = 0      # every <section> holding content
        self.headings: list[tuple[int, str]] = []  # (slide number, h2 text)
        self._h2: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "section":
            self.depth += 1
            self.subslides += 1
            if self.depth == 1:
                self.slides += 1
        elif tag == "h2":
            self._h2 = []

    def handle_endtag(self, tag):
        if tag == "section":
            self.depth = max(0, self.depth - 1)
        elif tag == "h2" and self._h2 is not None:
            self.headings.append((self.slides, "".join(self._h2).replace("¶", "").strip()))
            self._h2 = None

    def handle_data(self, data):
        if self._h2 is not None:
            self._h2.append(data)


def slide_outline(html: str | Path) -> tuple[int, list[tuple[int, str]]]:
    """(number of horizontal slides, [(slide number, ``##`` heading text), ...]) of an export."""
    is_markup = isinstance(html, str) and html.lstrip().startswith("<")
    text = html if is_markup else Path(html).read_text(encoding="utf-8")
    parser = _SlideParser()
    parser.feed(text)
    return parser.slides, parser.headings


def section_headings(notebook) -> list[str]:
    """The ``## `` headings of the cells a slide show displays (not ``skip``/``notes``).
    Public: one of the deck checks in ``tests/test_slides.py``, kept callable for authors checking a deck."""
    import nbformat

    nb = notebook if isinstance(notebook, nbformat.NotebookNode) else nbformat.read(notebook, as_version=4)
    out = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        if set(cell.metadata.get("tags", [])) & set(REMOVED_TAGS):
            continue
        if cell.metadata.get("slideshow", {}).get("slide_type") in ("skip", "notes"):
            continue
        out += [ln[3:].strip() for ln in cell.source.splitlines() if ln.startswith("## ")]
    return out


def offline_problems(html: str | Path) -> list[str]:
    """URLs in the export that need the internet (scripts and stylesheets), e.g. a CDN fallback.
    Public: one of the deck checks in ``tests/test_slides.py``, kept callable for authors checking a deck."""
    import re

    text = Path(html).read_text(encoding="utf-8")
    urls = re.findall(r'(?:src|href)\s*=\s*["\'](https?://[^"\']+)', text)
    urls += re.findall(r'["\'](https?://[^"\']+\.(?:js|css|mjs)[^"\']*)["\']', text)
    return sorted(set(urls))


# --- command line ---------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    """``./course slides [NOTEBOOK ...] [--out DIR]``. Introduced in lesson 00."""
    p = argparse.ArgumentParser(
        prog="course slides",
        description="Export reveal.js slides that open offline. Default notebooks: the executed copies "
                    "in build/executed/ (from `./course run`), else solutions/ without outputs.")
    p.add_argument("notebooks", nargs="*", type=Path)
    p.add_argument("--out", type=Path, default=None, help="output folder (default build/slides)")
    p.add_argument("--online", action="store_true", help="load reveal.js etc. from CDNs (no npm needed)")
    p.add_argument("--vendor-only", action="store_true", help="only fetch the offline files into the cache")
    args = p.parse_args(argv)
    if args.vendor_only:
        vendor = ensure_vendor()
        print(f"slides vendor folder: {vendor}" if vendor else "could not vendor the slide files")
        return 0 if vendor else 1
    notebooks = list(args.notebooks)
    if not notebooks:
        from course_lib.tooling.nbtools import lesson_paths

        executed = sorted(build_dir("executed", create=False).glob("[0-9][0-9]_*.ipynb"))
        notebooks = executed or lesson_paths("solutions")
    if not notebooks:
        print("course slides: no notebooks to export (run `./course run` first)", file=sys.stderr)
        return 2
    status = 0
    for nb in notebooks:
        t0 = time.monotonic()
        try:
            html = export_slides(nb, args.out, offline=not args.online)
        except SlidesError as exc:
            print(f"course slides: {exc}", file=sys.stderr)
            status = 1
            continue
        slides, _ = slide_outline(html)
        print(f"{html}  ({slides} slides, {time.monotonic() - t0:.1f} s)")
    return status


# --- measuring decks in a real browser (tests) ----------------------------------------------------

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage")
SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION", "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")

_MEASURE_JS = r"""
const done = arguments[arguments.length - 1];
const prefix = document.querySelector('link[href$="dist/reveal.css"]').getAttribute('href').replace(/reveal\.css$/, '');
require([prefix + 'reveal.js'], function (Reveal) {
window.__courseReveal = Reveal;
const CJK = /[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]/g;
const out = [], probes = [], scrolls = [], seen = new Set();
const slides = Reveal.getSlides();
for (let i = 0; i < slides.length; i++) {
  const s = slides[i];
  const idx = Reveal.getIndices(s);
  Reveal.slide(idx.h, idx.v);
  const where = `slide ${idx.h + 1}.${(idx.v || 0) + 1}`;
  const title = (s.querySelector('h1, h2, h3') || {}).textContent || '';
  const label = title ? ` ("${title.replace(/¶/g, '').trim().slice(0, 40)}")` : '';
  if (s.scrollHeight > s.clientHeight + 2)
    out.push(`${where}${label}: runs ${s.scrollHeight - s.clientHeight}px past the screen — ` +
             'a slide must not scroll as a whole; split it');
  if (s.scrollWidth > s.clientWidth + 2)
    out.push(`${where}${label}: content ${s.scrollWidth - s.clientWidth}px wider than the slide`);
  for (const box of s.querySelectorAll('.jp-CodeCell .jp-Cell-inputWrapper, .jp-Cell-outputArea')) {
    if (box.scrollHeight <= box.clientHeight + 2 || getComputedStyle(box).overflowY === 'visible') continue;
    const what = box.querySelector('img, svg, canvas') ? 'a figure' : box.querySelector('table') ? 'a table'
               : box.classList.contains('jp-Cell-outputArea') ? 'an output' : 'code';
    scrolls.push([`${where}${label}`, what, box.scrollHeight - box.clientHeight]);
  }
  for (const pre of s.querySelectorAll('pre')) {
    if (pre.scrollWidth > pre.clientWidth + 2 && !['auto', 'scroll'].includes(getComputedStyle(pre).overflowX))
      out.push(`${where}: a code line is cut off: ${pre.textContent.slice(0, 60)}`);
  }
  // one element per (tag, font) with Chinese text of its own: its fonts are checked afterwards
  for (const el of s.querySelectorAll('*')) {
    if (el.closest('.MathJax, .MathJax_CHTML, .mjx-chtml, script, style')) continue;
    let own = '';
    for (const n of el.childNodes) if (n.nodeType === 3) own += n.textContent;
    const cjk = (own.match(CJK) || []).length;
    if (!cjk || !el.getClientRects().length) continue;
    const st = getComputedStyle(el);
    const key = [el.tagName, st.fontFamily, st.fontWeight, st.fontStyle].join('|');
    if (seen.has(key)) continue;
    seen.add(key);
    el.setAttribute('data-course-font-probe', String(probes.length));
    probes.push({h: idx.h, v: idx.v || 0, where: where, tag: el.tagName.toLowerCase(), cjk: cjk,
                 text: own.trim().slice(0, 30), font: st.fontFamily});
  }
}
done([slides.length, out, probes, scrolls]);
});
"""


def cjk_font_families() -> set[str]:
    """Every family name (with its aliases) fontconfig lists as covering Chinese (``fc-list :lang=zh``);
    empty when fontconfig is missing. Introduced in lesson 00."""
    fc = shutil.which("fc-list")
    if not fc:
        return set()
    proc = subprocess.run([fc, ":lang=zh", "family"], capture_output=True, text=True, timeout=60)
    return {name.strip() for line in proc.stdout.splitlines() for name in line.split(",") if name.strip()}


def _font_problems(driver, probes: list[dict], cjk_families: set[str]) -> list[str]:
    """For each probe element (one per tag and font stack with Chinese text), ask Chromium which
    platform fonts drew its text; a problem when fewer of its Chinese characters than it holds were drawn
    by a font with CJK glyphs (the rest became boxes)."""
    problems = []
    driver.execute_cdp_cmd("DOM.enable", {})
    driver.execute_cdp_cmd("CSS.enable", {})
    for i, probe in enumerate(probes):
        driver.execute_script("window.__courseReveal.slide(arguments[0], arguments[1]);", probe["h"], probe["v"])
        root = driver.execute_cdp_cmd("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
        node = driver.execute_cdp_cmd("DOM.querySelector", {"nodeId": root,
                                                            "selector": f'[data-course-font-probe="{i}"]'})
        if not node.get("nodeId"):
            continue
        fonts = driver.execute_cdp_cmd("CSS.getPlatformFontsForNode", {"nodeId": node["nodeId"]}).get("fonts", [])
        drawn_cjk = sum(f.get("glyphCount", 0) for f in fonts if f.get("familyName") in cjk_families)
        if drawn_cjk < probe["cjk"]:
            used = ", ".join(f"{f.get('familyName')} ({f.get('glyphCount')} glyphs)" for f in fonts) or "no font"
            problems.append(f"{probe['where']}: Chinese text in <{probe['tag']}> ({probe['text']!r}) falls back to "
                            f"a font without CJK glyphs — drawn with {used}; install a CJK font "
                            f"(scripts/setup.sh: fonts-wqy-microhei) and name it in the deck's CSS")
    return problems


def browser(width: int = 1280, height: int = 720, *, env: dict | None = None):
    """A headless Chromium (Debian's ``chromium`` + ``chromium-driver``) driven by Selenium, logging
    every network request; ``env`` is the browser's environment (default: this process's). Raises
    :class:`SlidesError` saying what to install when one is missing."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        raise SlidesError("selenium is missing; run `./course setup`") from None
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_bin = shutil.which("chromedriver")
    if not chromium or not driver_bin:
        raise SlidesError("headless Chromium is missing; run `./course setup` as root "
                          "(apt-get install chromium chromium-driver)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={tempfile.mkdtemp(prefix='course-chromium-')}")
    opts.add_argument(f"--window-size={width},{height}")
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    return webdriver.Chrome(service=Service(driver_bin, env=env), options=opts)


def measure_deck(driver, html: str | Path, *, cjk_families: set[str] | None = None,
                 scrolling: list[str] | None = None) -> tuple[int, list[str]]:
    """Open an exported deck in ``driver`` and return (number of slides, problems): a slide taller than
    the screen (a projected slide must not scroll as a whole; only a code or output box may scroll inside
    it), a box that scrolls over a figure or a table (those are scaled to fit), content wider than the
    slide, a cut-off code line, Chinese text drawn by a font without CJK glyphs (``cjk_families``: default
    :func:`cjk_font_families`), a solution or hidden-test marker, a request that leaves the machine.
    ``scrolling``, when given, receives one line per box that still needs scrolling ("slide 3.2: code,
    120px hidden").
    Public: one of the deck checks in ``tests/test_slides.py``, kept callable for authors checking a deck."""
    import json

    html = Path(html).resolve()
    driver.get_log("performance")  # drop what earlier pages logged
    driver.get(html.as_uri())
    for _ in range(150):  # reveal.js (through require.js) and MathJax load asynchronously
        if driver.execute_script("return !!(document.querySelector('.reveal.ready') "
                                 "&& window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0)"):
            break
        time.sleep(0.1)
    else:
        return 0, [f"{html.name}: reveal.js or MathJax never finished loading"]
    driver.set_script_timeout(60)
    count, problems, probes, scrolls = driver.execute_async_script(_MEASURE_JS)
    for where, what, hidden in scrolls:
        if scrolling is not None:
            scrolling.append(f"{where}: {what}, {hidden}px hidden")
        if what in ("a figure", "a table"):
            problems.append(f"{where}: {what} is cut ({hidden}px) in a scroll box — it must be scaled to fit")
    problems += _font_problems(driver, probes, cjk_font_families() if cjk_families is None else cjk_families)
    text = driver.execute_script("return document.querySelector('.reveal .slides').textContent")
    problems += [f"shows the marker {m!r}" for m in SOLUTION_MARKERS if m in text]
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg.get("method") == "Network.requestWillBeSent":
            url = msg["params"]["request"]["url"]
            if url.startswith(("http:", "https:", "ws:", "wss:")):
                problems.append(f"requests {url}")
    return count, sorted(set(problems), key=problems.index)
