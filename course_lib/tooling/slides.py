"""``./course slides``: reveal.js slides of the lesson notebooks that open without internet.

nbconvert's reveal template loads reveal.js 4.0.2, require.js, jQuery and MathJax 2.7 from CDNs (plus a
mermaid import). The course instead:

* vendors those files once with npm (``reveal.js@4.0.2 mathjax@2.7.9 requirejs@2.3.8 jquery@3.7.1``,
  about 7 MB after trimming) into the course cache (``cache_dir("slides_vendor")``) — they are not
  committed to the repository;
* copies them into a ``vendor/`` folder beside the exported HTML and points the template's URLs there
  (relative URLs, so the folder can be zipped and moved);
* uses the template ``course_lib/templates/course_reveal`` (nbconvert's ``reveal`` without the mermaid
  and Jupyter-widgets imports);
* removes the cells papermill adds (``injected-parameters``, the error banner).

Without npm and without a cached copy the slides still export, with CDN URLs, and a warning says they
need internet to display.

Introduced in lesson 00.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path

from course_lib.paths import build_dir, cache_dir

VENDOR_PACKAGES = {"reveal.js": "4.0.2", "mathjax": "2.7.9", "requirejs": "2.3.8", "jquery": "3.7.1"}
TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
TEMPLATE_NAME = "course_reveal"
REMOVED_TAGS = ("injected-parameters", "papermill-error-cell-tag", "remove-slide")
MATHJAX_CONFIG = "?config=TeX-AMS_CHTML-full,Safe"

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
    """Where the vendored reveal.js/MathJax/require.js/jQuery files live once fetched."""
    return cache_dir("slides_vendor", _vendor_key(), create=False)


def ensure_vendor(*, quiet: bool = False) -> Path | None:
    """Return the vendor folder, fetching it with npm on first use; None when npm is missing or
    fails (the caller then falls back to CDN URLs). Introduced in lesson 00."""
    global _vendor_failed
    target = vendor_cache()
    if all((target / f).exists() for f in _REQUIRED):
        return target
    if _vendor_failed:  # tried once in this process already: do not wait on npm for every notebook
        return None
    _vendor_failed = True
    npm = shutil.which("npm")
    if npm is None:
        if not quiet:
            print("slides: npm not found, so reveal.js cannot be vendored for offline use "
                  "(install Node.js/npm, or the slides will load reveal.js from the internet)", file=sys.stderr)
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="npm-", dir=target.parent) as tmp:
        specs = [f"{k}@{v}" for k, v in VENDOR_PACKAGES.items()]
        if not quiet:
            print(f"slides: vendoring {' '.join(specs)} with npm into {target} (once)", file=sys.stderr)
        try:
            proc = subprocess.run([npm, "install", "--prefix", tmp, "--no-audit", "--no-fund", "--no-save",
                                   "--loglevel=error", "--fetch-retries=1", "--fetch-timeout=60000", *specs],
                                  capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            if not quiet:
                print("slides: npm install timed out, the slides will need internet", file=sys.stderr)
            return None
        if proc.returncode != 0:
            if not quiet:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
                print("slides: npm install failed, the slides will need internet: " + " | ".join(tail),
                      file=sys.stderr)
            return None
        staging = Path(tmp) / "vendor"
        modules = Path(tmp) / "node_modules"
        for src_rel, dst_rel in _VENDOR_FILES:
            src, dst = modules / src_rel, staging / dst_rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.map", "*.esm.js"))
            else:
                shutil.copy2(src, dst)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)  # atomic: a half-copied vendor folder is never used
    _vendor_failed = False
    return target


def _install_vendor(vendor: Path, out_dir: Path) -> None:
    """Copy the vendor folder beside the slides (skipped when it is already there)."""
    dst = out_dir / "vendor"
    stamp = dst / ".vendor-key"
    if stamp.exists() and stamp.read_text() == _vendor_key():
        return
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(vendor, dst)
    stamp.write_text(_vendor_key())


def make_exporter(offline: bool = True):
    """A configured nbconvert ``SlidesExporter`` (offline URLs when ``offline``)."""
    try:
        from nbconvert import SlidesExporter
        from nbconvert.preprocessors import TagRemovePreprocessor
    except ImportError as exc:
        raise SlidesError(f"nbconvert is missing ({exc}); run `./course setup`") from None
    exporter = SlidesExporter(template_name=TEMPLATE_NAME, extra_template_basedirs=[str(TEMPLATES_DIR)])
    if offline:
        exporter.reveal_url_prefix = "vendor/reveal.js"
        exporter.require_js_url = "vendor/require.js"
        exporter.jquery_url = "vendor/jquery.min.js"
        exporter.mathjax_url = "vendor/mathjax/MathJax.js" + MATHJAX_CONFIG
    else:
        exporter.reveal_url_prefix = f"https://unpkg.com/reveal.js@{VENDOR_PACKAGES['reveal.js']}"
    exporter.register_preprocessor(TagRemovePreprocessor(remove_cell_tags=set(REMOVED_TAGS), enabled=True),
                                   enabled=True)
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
    nb.cells = [c for c in nb.cells if not set(c.get("metadata", {}).get("tags", [])) & set(REMOVED_TAGS)]
    body, _ = make_exporter(offline=vendor is not None).from_notebook_node(nb)
    target = out_dir / f"{notebook.stem}.slides.html"
    tmp = target.with_suffix(".tmp")
    tmp.write_text(body, encoding="utf-8")
    os.replace(tmp, target)
    return target


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
    """The ``## `` headings of the cells a slide show displays (not ``skip``/``notes``)."""
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
    """URLs in the export that need the internet (scripts and stylesheets), e.g. a CDN fallback."""
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
        from course_lib.nbtools import lesson_paths

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
