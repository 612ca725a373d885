"""Slides: every `##` section of a lesson becomes at least one slide, and the export opens offline."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from course_lib.nbtools import code, lesson_paths, md, write_notebook
from course_lib.paths import build_dir
from course_lib.slides import (
    REMOVED_TAGS, ensure_vendor, export_slides, offline_problems, section_headings, slide_outline,
)


def _plain(text: str) -> str:
    """A heading as the browser shows it: no markdown emphasis or code marks, single spaces."""
    return re.sub(r"\s+", " ", re.sub(r"[`*_]", "", text)).strip()


def assert_one_slide_per_section(notebook: Path, html: Path) -> None:
    headings = [_plain(h) for h in section_headings(notebook)]
    slides, found = slide_outline(html)
    found_text = [_plain(t) for _, t in found]
    missing = [h for h in headings if h not in found_text]
    assert not missing, f"{html.name}: these ## sections are not on any slide: {missing}"
    assert slides >= len(headings), f"{html.name}: {slides} slides for {len(headings)} ## sections"
    # each section heading opens its own slide (no two headings share one)
    slide_of = [n for n, t in found if _plain(t) in headings]
    assert len(set(slide_of)) == len(slide_of), f"{html.name}: two ## sections on one slide"


@pytest.fixture(scope="module")
def vendor():
    return ensure_vendor(quiet=True)


def _assert_offline(html: Path, vendor) -> None:
    if vendor is None:
        pytest.skip("npm could not vendor reveal.js here, so the export uses CDN URLs (see docs/course.md)")
    assert offline_problems(html) == []
    text = html.read_text(encoding="utf-8")
    for url in re.findall(r'(?:src|href)="(vendor/[^"?]+)', text):
        assert (html.parent / url).exists(), f"{html.name} loads {url}, which is missing"


def test_lesson_00_exports_with_a_slide_per_section(tmp_path, repo, vendor):
    nb = repo / "solutions" / "00_setup_and_tour.ipynb"
    html = export_slides(nb, tmp_path)
    assert html.name == "00_setup_and_tour.slides.html"
    assert_one_slide_per_section(nb, html)
    _assert_offline(html, vendor)


def test_injected_parameters_and_skipped_cells_are_not_shown(tmp_path, vendor):
    nb_path = write_notebook(tmp_path / "t.ipynb", [
        md("# Title", slide="slide"),
        code("PROFILE = 'ci'", slide="skip", tags=["parameters"]),
        md("## First section", slide="slide"),
        md("## Second section\n\n$$x^2$$", slide="slide"),
    ])
    nb = nbformat.read(nb_path, as_version=4)
    injected = nbformat.v4.new_code_cell("PROFILE = 'INJECTED_MARKER'")
    injected.metadata["tags"] = [REMOVED_TAGS[0]]
    nb.cells.insert(2, injected)
    nbformat.write(nb, nb_path)
    html = export_slides(nb_path, tmp_path / "out")
    text = html.read_text(encoding="utf-8")
    assert "INJECTED_MARKER" not in text
    assert_one_slide_per_section(nb_path, html)
    slides, _ = slide_outline(html)
    assert slides == 3  # title + two sections; the skipped parameters cell adds none
    _assert_offline(html, vendor)


def _executed_notebooks() -> list[Path]:
    found = []
    for folder in (build_dir("executed", create=False), build_dir("test-notebooks", "solutions", create=False)):
        found += sorted(folder.glob("[0-9][0-9]_*.ipynb")) if folder.exists() else []
    known = {p.name for p in lesson_paths("solutions")}
    return [p for p in found if p.name in known]


@pytest.mark.parametrize("executed", _executed_notebooks(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_executed_notebooks_export(executed, tmp_path, vendor):
    html = export_slides(executed, tmp_path)
    assert_one_slide_per_section(executed, html)
    _assert_offline(html, vendor)
