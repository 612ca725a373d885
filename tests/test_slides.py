"""Slides: every `##` section of a lesson becomes at least one slide, the export opens offline, and in a
real browser at 1280×720 no slide scrolls as a whole and no Chinese character is drawn as a box."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from course_lib.paths import build_dir
from course_lib.tooling.nbtools import code, lesson_paths, md, write_notebook
from course_lib.tooling.slides import (
    REMOVED_TAGS,
    ensure_vendor,
    export_slides,
    offline_problems,
    section_headings,
    slide_outline,
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
        pytest.skip("npm could not vendor reveal.js here, so the export uses CDN URLs (see README, Troubleshooting)")
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


@pytest.mark.notebooks
@pytest.mark.parametrize("lesson", lesson_paths("solutions"), ids=lambda p: p.stem)
def test_every_lesson_exports_a_slide_per_section(lesson, tmp_path, vendor):
    """Runs after the notebook regression (see conftest): exports the executed copy the regression
    wrote, or the source notebook when the regression was not run in this build."""
    executed = build_dir("test-notebooks", "solutions", create=False) / lesson.name
    source = executed if executed.exists() else lesson
    html = export_slides(source, tmp_path)
    assert_one_slide_per_section(source, html)
    _assert_offline(html, vendor)


# --- every deck measured in a real headless Chromium at 1280×720 -----------------------------------

def _decks_to_measure(repo: Path, out: Path) -> list[Path]:
    """Decks of the regression's executed notebooks when present (they have outputs), else of
    solutions/ (quick; no outputs)."""
    executed = repo / "build" / "test-notebooks" / "solutions"
    decks = []
    for solution in lesson_paths("solutions"):
        source = executed / solution.name
        decks.append(export_slides(source if source.exists() else solution, out))
    return decks


def test_every_deck_fits_the_screen_in_headless_chromium(tmp_path, repo, vendor):
    from course_lib.tooling.slides import SlidesError, browser, measure_deck

    if vendor is None:
        pytest.skip("npm could not vendor reveal.js here (see README, Troubleshooting)")
    try:
        driver = browser(1280, 720)
    except SlidesError as exc:
        pytest.fail(str(exc))
    problems = []
    try:
        for html in _decks_to_measure(repo, tmp_path):
            count, found = measure_deck(driver, html)
            assert count > 0, f"{html.name}: no slides"
            problems += [f"{html.name}: {p}" for p in found]
    finally:
        driver.quit()
    assert not problems, "\n".join(problems)


def _latin_only_fontconfig(tmp_path: Path) -> dict:
    """An environment whose fontconfig sees only the DejaVu fonts (no CJK glyphs), as on a bare server."""
    import os
    import subprocess

    files = subprocess.run(["fc-list", ":family=DejaVu Sans", "file"], capture_output=True, text=True).stdout
    dirs = sorted({str(Path(line.split(":")[0]).parent) for line in files.splitlines() if line.strip()})
    if not dirs:
        pytest.skip("fontconfig lists no DejaVu fonts here")
    conf = tmp_path / "fonts.conf"
    conf.write_text('<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "fonts.dtd"><fontconfig>'
                    + "".join(f"<dir>{d}</dir>" for d in dirs)
                    + f"<cachedir>{tmp_path / 'fc-cache'}</cachedir></fontconfig>", encoding="utf-8")
    return {**os.environ, "FONTCONFIG_FILE": str(conf)}


def test_the_browser_check_catches_a_scrolling_slide_and_chinese_drawn_as_boxes(tmp_path, vendor):
    """The deck test's two newest rules, on a deck built to break them: a slide taller than the screen
    is reported (only a code or output box may scroll), and so is Chinese text when the browser has no
    font with CJK glyphs — while the same text passes where one is installed."""
    from course_lib.tooling.slides import SlidesError, browser, cjk_font_families, measure_deck

    if vendor is None:
        pytest.skip("npm could not vendor reveal.js here (see README, Troubleshooting)")
    nb_path = write_notebook(tmp_path / "t.ipynb", [
        md("# 标题 Title", slide="slide"),
        code("PROFILE = 'ci'", slide="skip", tags=["parameters"]),
        md("## 很长的一页\n\n" + "\n".join(f"- 第 {i} 条要点" for i in range(30)), slide="slide"),
        md("## 中文与代码\n\n环境检查：`代码` 和 **加粗**。", slide="slide"),
        code("x = 1  # 注释也是中文", slide="slide"),
    ])
    html = export_slides(nb_path, tmp_path / "out")
    assert cjk_font_families(), "no font with Chinese glyphs is installed: run scripts/setup.sh (fonts-wqy-microhei)"
    try:
        driver = browser(1280, 720)
    except SlidesError as exc:
        pytest.fail(str(exc))
    try:
        _, problems = measure_deck(driver, html)
    finally:
        driver.quit()
    assert [p for p in problems if "很长的一页" in p and "must not scroll as a whole" in p], problems
    assert not [p for p in problems if "CJK glyphs" in p], problems
    driver = browser(1280, 720, env=_latin_only_fontconfig(tmp_path))
    try:
        _, problems = measure_deck(driver, html, cjk_families=set())
    finally:
        driver.quit()
    boxes = [p for p in problems if "falls back to a font without CJK glyphs" in p]
    assert {"<h2>", "<p>"} <= {p.split(" in ")[1].split(" ")[0] for p in boxes}, problems


def test_slides_strip_solutions_and_hidden_tests_and_split_tall_cells(tmp_path, vendor):
    from course_lib.tooling.slides import TAG_HIDE_CODE, prepare_for_slides

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        md("# T", slide="slide"),
        code("def f():\n    ### BEGIN SOLUTION\n    return 42\n    ### END SOLUTION\n"
             "### BEGIN HIDDEN TESTS\nassert f() == 42\n### END HIDDEN TESTS", slide="slide"),
        code("\n".join(f"x{i} = {i}" for i in range(12)), slide="-"),
        code("y = 1", slide="-", tags=["slide-output-own"]),
    ]
    nb.cells[2].outputs = [nbformat.v4.new_output("stream", text="line\n" * 10)]
    nb.cells[3].outputs = [nbformat.v4.new_output("stream", text="1\n")]
    shown = prepare_for_slides(nb)
    assert "return 42" not in shown.cells[1].source and "assert" not in shown.cells[1].source
    assert "...  # exercise" in shown.cells[1].source
    own = [c for c in shown.cells if TAG_HIDE_CODE in c.metadata.get("tags", [])]
    assert len(own) == 2 and all(c.metadata.slideshow.slide_type == "subslide" for c in own)
    path = tmp_path / "t.ipynb"
    nbformat.write(nb, path)
    assert "BEGIN SOLUTION" not in export_slides(path, tmp_path).read_text(encoding="utf-8")


def test_slides_drop_frozen_widget_bars_and_show_a_text_bar_in_its_last_state():
    from course_lib.tooling.slides import WIDGET_VIEW, prepare_for_slides

    nb = nbformat.v4.new_notebook()
    nb.cells = [code("run()", slide="slide")]
    nb.cells[0].outputs = [
        nbformat.v4.new_output("display_data", data={WIDGET_VIEW: {"model_id": "x"},
                                                     "text/plain": "sandbox:   0%|          | 0/8"}),
        nbformat.v4.new_output("stream", name="stderr", text="train:   0%|  | 0/3\rtrain:  67%|# | 2/3\rtrain: 100%|##| 3/3\n"),
    ]
    shown = prepare_for_slides(nb).cells[0].outputs
    assert len(shown) == 1 and shown[0]["text"] == "train: 100%|##| 3/3\n"


@pytest.mark.notebooks
@pytest.mark.parametrize("lesson", lesson_paths("solutions"), ids=lambda p: p.stem)
def test_executed_lessons_save_no_frozen_progress_bar(lesson, notebook_records):
    """A ``tqdm.auto`` bar is a widget: the saved notebook keeps its first state ("0%|") as text, a bar
    that never moves in the executed copies and the slides. Lessons pass ``progress=False`` where they
    print a summary, and course_lib uses text bars where a bar is worth keeping."""
    from course_lib.tooling.slides import frozen_widget

    notebook_records(lesson.stem[:2])   # executed by the regression already, or now
    executed = build_dir("test-notebooks", "solutions", create=False) / lesson.name
    nb = nbformat.read(executed, as_version=4)
    frozen = [(i, str(o.get("data", {}).get("text/plain", ""))[:60]) for i, c in enumerate(nb.cells)
              for o in c.get("outputs", []) if frozen_widget(o)]
    assert not frozen, f"{lesson.name}: frozen progress bars (cell, text) in the saved outputs: {frozen}"
