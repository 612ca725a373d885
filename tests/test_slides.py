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
    assert "<title>第00课 环境准备与课程导览 (Setup and tour)</title>" in html.read_text(encoding="utf-8")
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
    problems, scrolling = [], []
    try:
        for html in _decks_to_measure(repo, tmp_path):
            boxes: list[str] = []
            count, found = measure_deck(driver, html, scrolling=boxes)
            assert count > 0, f"{html.name}: no slides"
            problems += [f"{html.name}: {p}" for p in found]
            scrolling += [f"{html.name}: {b}" for b in boxes]
    finally:
        driver.quit()
    # boxes that still scroll hold only code or text (a figure or a table in one is a problem above)
    print(f"{len(scrolling)} boxes need scrolling:\n" + "\n".join(scrolling))
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


def _failed_notebook(path: Path) -> Path:
    """A lesson whose second code cell failed in a hidden test (the traceback quotes the hidden lines)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        md("# 第99课 失败的一课 (A failing lesson)", slide="slide"),
        code("x = 1", slide="slide"),
        code("def f():\n    ### BEGIN SOLUTION\n    return 41\n    ### END SOLUTION\n\n"
             "### BEGIN HIDDEN TESTS\nassert f() == 42, 'SECRET_EXPECTED_42'\n### END HIDDEN TESTS", slide="-"),
        md("## 后面的一节", slide="slide"),
        code("print('never ran')", slide="-"),
    ]
    nb.cells[2].execution_count = 2
    nb.cells[2].outputs = [nbformat.v4.new_output(
        "error", ename="AssertionError", evalue="SECRET_EXPECTED_42",
        traceback=["\x1b[0;31m----------------------------------------\x1b[0m",
                   "Cell \x1b[0;32mIn[2], line 7\x1b[0m\n\x1b[1;32m      3\x1b[0m     return 41\n"
                   "\x1b[1;32m      5\x1b[0m ### BEGIN HIDDEN TESTS\n"
                   "\x1b[0;32m----> 7\x1b[0m assert f() == 42, 'SECRET_EXPECTED_42'\n"
                   "\x1b[1;32m      8\x1b[0m ### END HIDDEN TESTS\n",
                   "\x1b[0;31mAssertionError\x1b[0m: SECRET_EXPECTED_42"])]
    nbformat.write(nb, path)
    return path


def test_a_failed_notebooks_deck_opens_with_the_failure_and_shows_no_hidden_test(tmp_path, vendor):
    html = export_slides(_failed_notebook(tmp_path / "99_failing.ipynb"), tmp_path / "out")
    text = html.read_text(encoding="utf-8")
    for secret in ("BEGIN HIDDEN", "END HIDDEN", "SECRET_EXPECTED_42", "assert f() == 42", "return 41",
                   "BEGIN SOLUTION"):
        assert secret not in text, f"the deck shows {secret!r}"
    _, headings = slide_outline(html)
    assert headings[0][0] == 2 and "执行失败" in headings[0][1], headings   # right after the title slide
    assert "cell 3" in text and "In [2]" in text and "AssertionError" in text and "hidden test" in text
    assert "<title>第99课 失败的一课 (A failing lesson)</title>" in text


def test_a_traceback_keeps_its_own_lines_and_loses_only_the_secret_ones():
    from course_lib.tooling.slides import HIDDEN_TEST_FAILED, scrub_error

    out = {"output_type": "error", "ename": "ZeroDivisionError", "evalue": "division by zero",
           "traceback": ["Cell In[3], line 2\n      1 y = 0\n----> 2 print(1 / y)\n      3 ### BEGIN HIDDEN TESTS\n"
                         "      4 assert y == 1\n", "ZeroDivisionError: division by zero"]}
    assert scrub_error(out, {"### BEGIN HIDDEN TESTS", "assert y == 1", "### END HIDDEN TESTS"})
    assert "print(1 / y)" in out["traceback"][0] and "assert y" not in out["traceback"][0]
    assert out["evalue"] == "division by zero" and HIDDEN_TEST_FAILED not in "".join(out["traceback"])


def test_a_long_output_shows_its_head_and_tail_with_a_note():
    from course_lib.tooling.slides import HEAD_LINES, TAIL_LINES, prepare_for_slides, shorten_text

    text = "".join(f"line {i}\n" for i in range(200))
    short = shorten_text(text)
    assert short.startswith("line 0\n") and short.endswith("line 199\n")
    assert f"省略了中间 {200 - HEAD_LINES - TAIL_LINES} 行" in short
    assert len(short.splitlines()) == HEAD_LINES + TAIL_LINES + 1
    assert shorten_text("a\nb\n") == "a\nb\n"
    nb = nbformat.v4.new_notebook()
    nb.cells = [code("for i in range(200): print(f'line {i}')", slide="slide")]
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", text=text)]
    shown = [c for c in prepare_for_slides(nb).cells if c.outputs]
    assert shown[0].outputs[0]["text"] == short


def test_a_tall_figure_and_a_long_code_cell_are_fitted_not_cut(tmp_path, vendor):
    """Boxes are sized to the space the slide has left: a figure taller than the slide is scaled to fit
    (no scroll box hides part of it), and no slide runs past the screen."""
    import base64
    import io

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from course_lib.tooling.slides import SlidesError, browser, measure_deck

    if vendor is None:
        pytest.skip("npm could not vendor reveal.js here (see README, Troubleshooting)")
    fig, ax = plt.subplots(figsize=(6, 9), dpi=100)
    ax.plot([0, 1], [0, 1])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    cell = code("\n".join(f"a{i} = {i}" for i in range(6)), slide="slide", tags=["slide-output-inline"])
    cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": base64.b64encode(buf.getvalue()).decode(),
                                                                   "text/plain": "<Figure>"})]
    long_code = code("\n".join(f"value_{i} = compute({i})  # step {i}" for i in range(22)), slide="slide")
    nb_path = write_notebook(tmp_path / "t.ipynb", [
        md("# T", slide="slide"), code("PROFILE = 'ci'", slide="skip", tags=["parameters"]),
        md("## 图", slide="slide"), cell, md("## 代码", slide="slide"), long_code])
    html = export_slides(nb_path, tmp_path / "out")
    try:
        driver = browser(1280, 720)
    except SlidesError as exc:
        pytest.fail(str(exc))
    scrolling: list[str] = []
    try:
        _, problems = measure_deck(driver, html, scrolling=scrolling)
    finally:
        driver.quit()
    assert not problems, problems
    assert not scrolling, scrolling
