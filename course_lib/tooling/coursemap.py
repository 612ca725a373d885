"""The course map: the pipeline from raw repositories to an evaluated code model, which lesson
covers which step and which earlier artefacts each step reads (drawn in lesson 00).

Introduced in lesson 00.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Stage:
    """One step of the pipeline: its name, the lessons that teach it, what comes out of it and what
    it reads (earlier lessons' artefacts from the course cache, or outside data)."""

    title: str
    lessons: str
    artefact: str
    reads: str = ""


COURSE_STAGES: tuple[Stage, ...] = (
    Stage("Raw repositories", "01", "files + licences", "stdlib + site-packages / GitHub"),
    Stage("Filters & secret redaction", "01", "clean corpus", "L01 repositories"),
    Stage("Near-dedup (MinHash LSH)", "02", "deduped corpus", "L01 corpus"),
    Stage("Dependency order", "03", "one sample per repo", "L02 deduped corpus"),
    Stage("FIM pretraining", "04", "tiny base model", "L03 samples, repo by repo"),
    Stage("Instruction data + SFT", "05", "instruct model", "L03 corpus + L04 model"),
    Stage("Sandbox evaluation, pass@k", "06", "scores", "HumanEval (assets)"),
    Stage("Drill: tiny-codes SFT + eval", "07", "before/after", "tiny-codes + L04 model"),
    Stage("Agentic coding + RL", "08-09", "agent policy", "L04 model"),
    Stage("RL on execution feedback", "10", "RL model", "L07 pipeline SFT + sandbox"),
    Stage("Beyond Python: C/C++", "11", "C/C++ corpus + judge", "L01-07 functions, language='cpp'"),
)


def draw_course_map(ax=None, stages: tuple[Stage, ...] = COURSE_STAGES, highlight: str | None = None):
    """Draw the pipeline as a snake of boxes (three per row) with arrows; each box names its lesson.

    ``highlight`` (e.g. ``"04"``) colours the boxes of that lesson. Returns the matplotlib Axes.
    Introduced in lesson 00.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    per_row = 3
    rows = (len(stages) + per_row - 1) // per_row
    if ax is None:
        _, ax = plt.subplots(figsize=(11, 1.9 * rows + 0.4))
    w, h, gx, gy = 3.0, 1.1, 0.9, 0.8
    centres = []
    for i, stage in enumerate(stages):
        row, col = divmod(i, per_row)
        if row % 2 == 1:             # snake: odd rows run right to left
            col = per_row - 1 - col
        x, y = col * (w + gx), -row * (h + gy)
        centres.append((x + w / 2, y + h / 2))
        lit = highlight is not None and highlight in stage.lessons.split("-")
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.05,rounding_size=0.15",
                                    facecolor="#ffd27f" if lit else "#dbe9f6", edgecolor="#2b5d8a", lw=1.5))
        ax.text(x + 0.12, y + h - 0.12, f"L{stage.lessons}", ha="left", va="top", fontsize=10,
                fontweight="bold", color="#b03a2e")
        ax.text(x + w / 2, y + h / 2 + 0.06, stage.title, ha="center", va="center", fontsize=10.5)
        if stage.reads:
            ax.text(x + w / 2, y + 0.34, f"← {stage.reads}", ha="center", va="bottom", fontsize=7.5,
                    color="#2b5d8a")
        ax.text(x + w / 2, y + 0.1, f"→ {stage.artefact}", ha="center", va="bottom", fontsize=8.5,
                color="#555555", style="italic")
    for (x0, y0), (x1, y1) in zip(centres, centres[1:]):
        if abs(y0 - y1) < 1e-9:      # same row: from the side of one box to the side of the next
            sx = 1 if x1 > x0 else -1
            start, end = (x0 + sx * w / 2, y0), (x1 - sx * w / 2, y1)
        else:                         # next row: straight down
            start, end = (x0, y0 - h / 2 - 0.05), (x1, y1 + h / 2 + 0.05)
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=16, lw=1.6,
                                     color="#2b5d8a"))
    ax.set_xlim(-0.3, per_row * (w + gx) - gx + 0.3)
    ax.set_ylim(-(rows - 1) * (h + gy) - 0.3, h + 0.3)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title("From raw repositories to an evaluated code model (L = lesson; ← reads, → writes)",
                 fontsize=12)
    return ax
