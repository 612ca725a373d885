"""``./course run``: execute every lesson notebook in order with papermill, export slides, print a table.

One function, :func:`execute_notebook`, runs one notebook in a fresh kernel and summarises the result
(status, seconds, first error as "cell N: Error: message", per-cell durations, recorded values); the
course command and the notebook regression test (``tests/test_notebooks.py``) both use it.

Where notebooks run: each notebook's working directory is a fresh scratch folder
``<out>/work/<notebook>/`` — never the repository — so a notebook cannot depend on its current directory
and whatever a library drops into the cwd (LazyLLM's temp folders, logs) stays out of the repository.
Lessons find their files through ``course_lib.paths`` (cache, assets, build).

The kernel gets ``PROFILE`` as a papermill parameter, ``COURSE_PROFILE`` in its environment, the
repository on ``PYTHONPATH`` (so the checkout's ``course_lib`` is imported) and, for solution
notebooks, ``COURSE_CHECKS=strict`` (a wrong exercise answer raises).

Introduced in lesson 00.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

from course_lib.paths import repo_root
from course_lib.tooling.nbtools import KERNEL_NAME

DEFAULT_TIMEOUT_S = 900          # per notebook; the ci budget is 3 min a lesson (8 for the drill)
# notebooks whose clean-cache run needs more than the default: the drill trains two SFT models on the CPU
# (about 7 minutes on 2 idle cores with bf16 instructions, longer in fp32 or on busy cores; docs/drill.md "Times")
NOTEBOOK_TIMEOUT_S = {"07_tiny_codes_drill": 1800, "10_rl_execution_feedback": 1800}   # they train; 2x their budget on a loaded CPU
_SKIPPED_TAGS = {"injected-parameters", "papermill-error-cell-tag"}


class SetupProblem(RuntimeError):
    """Something outside the notebooks is missing (kernel, package, writable folder): one sentence."""


@dataclass
class CellTiming:
    """How long one code cell of the source notebook ran (``index`` counts cells of the source)."""

    index: int
    seconds: float
    status: str


@dataclass
class NotebookRun:
    """The outcome of executing one notebook. ``status`` is ``ok``, ``failed``, ``timeout`` or
    ``error`` (could not run at all). ``error_cell`` is the 0-based index of the failing cell in the
    source notebook (``nb.cells[i]``); ``error`` the exception's last line."""

    name: str
    source: str
    output: str | None
    status: str
    seconds: float
    error_cell: int | None = None
    error: str = ""
    cells: list[CellTiming] = field(default_factory=list)
    records: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def first_error(self) -> str:
        """``cell 7: ValueError: bad input`` (or the message alone when no cell is to blame)."""
        if not self.error:
            return ""
        return f"cell {self.error_cell}: {self.error}" if self.error_cell is not None else self.error

    def slowest_cells(self, n: int = 3) -> list[CellTiming]:
        return sorted(self.cells, key=lambda c: -c.seconds)[:n]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# --- preflight: one clear sentence per problem ---------------------------------------------------

def _import_or_explain(module: str):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as exc:
        raise SetupProblem(
            f"the Python package {module!r} is missing from {sys.executable} ({exc}); "
            f"run `./course setup` (or `pip install -e .[dev]`)") from None


def check_kernel(name: str = KERNEL_NAME) -> str:
    """Raise :class:`SetupProblem` unless the Jupyter kernel ``name`` is registered and its Python
    exists; return the kernel's Python. Introduced in lesson 00."""
    kernelspec = _import_or_explain("jupyter_client.kernelspec")
    try:
        spec = kernelspec.KernelSpecManager().get_kernel_spec(name)
    except kernelspec.NoSuchKernel:
        raise SetupProblem(
            f"the Jupyter kernel {name!r} is not registered; run `./course setup` "
            f"(it runs `python -m ipykernel install --sys-prefix --name {name}`)") from None
    python = spec.argv[0] if spec.argv else ""
    if os.path.isabs(python) and not os.path.exists(python):
        raise SetupProblem(
            f"the Jupyter kernel {name!r} points at {python}, which does not exist; "
            f"run `./course setup` to register it again")
    return python


def check_writable(folder: Path) -> Path:
    """Create ``folder`` and prove we can write there, or raise :class:`SetupProblem`."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-"):
            pass
    except OSError as exc:
        raise SetupProblem(
            f"cannot write to {folder} ({exc.strerror or exc}); "
            f"pick another folder with --out DIR or fix its permissions") from None
    return folder


# --- executing one notebook ----------------------------------------------------------------------

@contextlib.contextmanager
def kernel_environment(profile: str, strict: bool, root: Path | None = None) -> Iterator[None]:
    """Environment variables the kernel inherits while a notebook runs (restored afterwards)."""
    root = root or repo_root()
    changes: dict[str, str | None] = {
        "COURSE_PROFILE": profile,
        "COURSE_CHECKS": "strict" if strict else None,
        # An executed notebook is read later, not watched: a progress bar (tqdm, in the kernel and in
        # the programs it starts) redraws at most once a minute, so its output is its first and final
        # line, not hundreds of updates. Interactive JupyterLab sessions keep normal bars.
        "TQDM_MININTERVAL": "60",
        # figures go inline into the notebook: a backend set for the calling process (pytest's
        # MPLBACKEND=Agg) must not reach the kernel, or plt.show() would draw nothing
        "MPLBACKEND": None,
        # a failing assert says what it compared: the kernel's startup file rewrites asserts like pytest
        # (course_lib.tooling.assertions)
        "IPYTHONDIR": str(_ipython_dir()),
    }
    if root is not None:
        parts = [str(root)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                               if p and p != str(root)]
        changes["PYTHONPATH"] = os.pathsep.join(parts)
    saved = {k: os.environ.get(k) for k in changes}
    try:
        _set_environ(changes)
        yield
    finally:
        _set_environ(saved)


def _ipython_dir() -> Path:
    """The IPython folder the course's kernels start with (a startup file that explains assertions)."""
    from course_lib.paths import build_dir
    from course_lib.tooling.assertions import startup_dir

    return startup_dir(build_dir("ipython"))


def _set_environ(values: dict[str, str | None]) -> None:
    """Set each variable; None removes it."""
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _course_engine():
    """A papermill engine that names notebook and cell in the progress bar and enforces a time
    budget for the whole notebook (each cell may use what is left of it)."""
    from nbclient.exceptions import CellExecutionError, CellTimeoutError
    from papermill.clientwrap import PapermillNotebookClient
    from papermill.engines import NBClientEngine, papermill_engines
    from papermill.utils import merge_kwargs, remove_args

    class CourseClient(PapermillNotebookClient):
        def __init__(self, nb_man, *, label: str = "", deadline: float | None = None,
                     budget_s: float | None = None, **kw):
            super().__init__(nb_man, **kw)
            self.label, self.deadline, self.budget_s = label, deadline, budget_s

        def _timed_out(self, index: int) -> None:
            self.nb.metadata.setdefault("course", {})["timed_out"] = {"cell": index, "budget_s": self.budget_s}

        def papermill_execute_cells(self):
            for index, cell in enumerate(self.nb.cells):
                if self.nb_man.pbar is not None:
                    self.nb_man.pbar.set_description(f"{self.label} · cell {index}")
                if self.deadline is not None:
                    remaining = self.deadline - time.monotonic()
                    if remaining <= 0:
                        self._timed_out(index)
                        break
                    self.timeout = max(1, int(remaining) + 1)
                try:
                    self.nb_man.cell_start(cell, index)
                    self.execute_cell(cell, index)
                except (CellExecutionError, CellTimeoutError) as ex:
                    if self.deadline is not None and time.monotonic() >= self.deadline:
                        self._timed_out(index)
                    self.nb_man.cell_exception(self.nb.cells[index], cell_index=index, exception=ex)
                    break
                except Exception as ex:  # the kernel died, lost messages ...: blame this cell, then stop
                    import nbformat

                    self.nb.cells[index].setdefault("outputs", []).append(nbformat.v4.new_output(
                        "error", ename=type(ex).__name__, evalue=str(ex).strip() or repr(ex), traceback=[]))
                    self.nb_man.cell_exception(self.nb.cells[index], cell_index=index, exception=ex)
                    raise
                finally:
                    self.nb_man.cell_complete(self.nb.cells[index], cell_index=index)
            if self.nb.metadata.get("course", {}).get("timed_out"):
                self.timeout = 10  # the kernel may still be busy: do not wait long for kernel_info

    class CourseEngine(NBClientEngine):
        @classmethod
        def execute_managed_notebook(cls, nb_man, kernel_name, log_output=False, stdout_file=None,
                                     stderr_file=None, start_timeout=60, execution_timeout=None,
                                     label="", budget_s=None, **kwargs):
            kwargs = remove_args(["input_path", "timeout", "startup_timeout"], **kwargs)
            deadline = time.monotonic() + budget_s if budget_s else None
            final = merge_kwargs(kwargs, timeout=execution_timeout, startup_timeout=start_timeout,
                                 kernel_name=kernel_name, log=__import__("papermill").log.logger,
                                 log_output=log_output, stdout_file=stdout_file, stderr_file=stderr_file,
                                 interrupt_on_timeout=True, label=label, deadline=deadline,
                                 budget_s=budget_s)
            return CourseClient(nb_man, **final).execute()

    papermill_engines.register("course", CourseEngine)
    return "course"


def _source_cells(nb) -> list[tuple[int, Any]]:
    """(index in the source notebook, cell) for the cells of an executed notebook, skipping the
    cells papermill adds (injected parameters, error banner)."""
    out, i = [], 0
    for cell in nb.cells:
        if _SKIPPED_TAGS & set(cell.get("metadata", {}).get("tags", [])):
            continue
        out.append((i, cell))
        i += 1
    return out


def _error_line(ename: str, evalue: str, traceback: list[str] | None = None) -> str:
    """One line for the table: ``Error: message``. An assertion keeps up to four lines of its message
    (what it expected and the values this run gave, joined by `` | ``); a bare ``AssertionError`` names the
    failing ``assert`` statement from the traceback."""
    import re

    lines = [ln.strip() for ln in str(evalue).splitlines() if ln.strip()]
    if ename == "AssertionError":
        if not lines and traceback:
            text = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(traceback))
            failing = [ln.split("---->", 1)[1].strip() for ln in text.splitlines() if "---->" in ln]
            lines = [re.sub(r"^\d+\s*", "", failing[-1])] if failing else []
        text = f"{ename}: {' | '.join(lines[:4])}" if lines else ename
        return text if len(text) <= 400 else text[:397] + "..."
    text = f"{ename}: {lines[0]}" if lines else ename
    return text if len(text) <= 200 else text[:197] + "..."


def summarise_executed(nb, name: str = "notebook") -> tuple[str, int | None, str, list[CellTiming]]:
    """Status, failing cell (source index), error line and per-cell timings of an executed notebook.

    Works on a notebook papermill saved, also one that stopped half-way. Introduced in lesson 00.
    """
    timings, error_cell, error = [], None, ""
    for index, cell in _source_cells(nb):
        meta = cell.get("metadata", {}).get("papermill", {})
        if cell.get("cell_type") == "code" and meta.get("duration") is not None:
            timings.append(CellTiming(index, round(float(meta["duration"]), 3), meta.get("status", "")))
        if error_cell is None:
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error" and not (
                        out.get("ename") == "SystemExit" and str(out.get("evalue", "")) in ("", "0")):
                    error_cell, error = index, _error_line(out.get("ename", "Error"), out.get("evalue", ""),
                                                         out.get("traceback"))
                    break
            if error_cell is None and meta.get("exception") is True:
                error_cell, error = index, "the cell failed without an error message (kernel died?)"
    timed_out = nb.get("metadata", {}).get("course", {}).get("timed_out")
    if timed_out:
        where = [i for i, c in _source_cells(nb)
                 if c is nb.cells[min(timed_out["cell"], len(nb.cells) - 1)]]
        return ("timeout", where[0] if where else error_cell,
                f"TimeoutError: the notebook used up its --timeout of {timed_out['budget_s']:.0f} s", timings)
    return ("failed" if error_cell is not None else "ok"), error_cell, error, timings


def execute_notebook(source: str | Path, output: str | Path, *, profile: str = "ci",
                     strict: bool = False, timeout_s: float | None = DEFAULT_TIMEOUT_S,
                     kernel: str = KERNEL_NAME, workdir: str | Path | None = None,
                     parameters: dict[str, Any] | None = None, progress: bool = True) -> NotebookRun:
    """Execute notebook ``source`` in a fresh kernel with papermill, save it to ``output`` and
    summarise what happened. Never raises for a failing notebook: the failure is in the result.

    ``strict`` sets ``COURSE_CHECKS=strict`` (solutions regression); ``timeout_s`` is the budget for
    the whole notebook (the default budget becomes :data:`NOTEBOOK_TIMEOUT_S`'s for the notebooks named
    there); ``workdir`` (default: a fresh ``work/<name>`` folder beside ``output``'s folder) is the
    kernel's current directory. Introduced in lesson 00.
    """
    papermill = _import_or_explain("papermill")
    from course_lib.tooling.nbtools import read_records

    source, output = Path(source), Path(output)
    name = source.stem
    if timeout_s == DEFAULT_TIMEOUT_S:
        timeout_s = NOTEBOOK_TIMEOUT_S.get(name, timeout_s)
    output.parent.mkdir(parents=True, exist_ok=True)
    workdir = Path(workdir) if workdir else output.parent.parent / "work" / name
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True, exist_ok=True)
    params = {"PROFILE": profile, **(parameters or {})}
    engine = _course_engine()
    t0 = time.monotonic()
    crash = ""
    with kernel_environment(profile, strict):
        try:
            papermill.execute_notebook(
                str(source), str(output), parameters=params, kernel_name=kernel, engine_name=engine,
                cwd=str(workdir), progress_bar={"desc": name, "leave": False} if progress else False,
                label=name, budget_s=timeout_s or None, start_timeout=120)
        except papermill.PapermillExecutionError:
            pass  # summarised from the saved notebook below
        except Exception as exc:  # kernel died, could not start, bad notebook JSON ...
            crash = _error_line(type(exc).__name__, str(exc))
    seconds = round(time.monotonic() - t0, 2)
    if not output.exists():
        return NotebookRun(name, str(source), None, "error", seconds, None, crash or "no output written")
    import nbformat

    nb = nbformat.read(output, as_version=4)
    status, error_cell, error, timings = summarise_executed(nb, name)
    if crash and status == "ok":  # e.g. the kernel died: blame the cell that was running
        status, error = "error", crash
        running = [i for i, c in _source_cells(nb)
                   if c.get("metadata", {}).get("papermill", {}).get("status") == "running"]
        error_cell = running[0] if running else None
    records = read_records(nb)
    return NotebookRun(name, str(source), str(output), status, seconds, error_cell, error, timings, records)


# --- the course command ----------------------------------------------------------------------------

def format_table(runs: list[NotebookRun]) -> str:
    """The final table: notebook · status · seconds · first error. Introduced in lesson 00."""
    rows = [("notebook", "status", "seconds", "first error")]
    rows += [(r.name, r.status, f"{r.seconds:.1f}", r.first_error()) for r in runs]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    lines = []
    for i, (a, b, c, d) in enumerate(rows):
        lines.append(f"{a:<{w0}}  {b:<{w1}}  {c:>7}  {d}".rstrip())
        if i == 0:
            lines.append("-" * min(120, w0 + w1 + 30))
    total = sum(r.seconds for r in runs)
    failed = sum(not r.ok for r in runs)
    lines.append(f"{len(runs)} notebook(s), {failed} failed, {total:.0f} s in all")
    return "\n".join(lines)


def select_lessons(folder: str, only: str | None) -> list[Path]:
    """The lesson notebooks of ``folder``, restricted to the comma-separated ids in ``only``;
    an unknown id raises :class:`SetupProblem` listing the ids that exist."""
    from course_lib.tooling.nbtools import lesson_paths

    paths = lesson_paths(folder)
    if not paths:
        hint = "; run `./course notebooks` to generate them" if folder == "notebooks" else ""
        raise SetupProblem(f"no lesson notebooks (NN_slug.ipynb) in {folder}/{hint}")
    if not only:
        return paths
    by_id = {p.name[:2]: p for p in paths}
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    wanted = [w.zfill(2) if w.isdigit() else w for w in wanted]
    unknown = [w for w in wanted if w not in by_id]
    if unknown:
        raise SetupProblem(f"unknown lesson id(s) {', '.join(unknown)} in --only; {folder}/ has: "
                           + ", ".join(f"{k} ({p.stem})" for k, p in by_id.items()))
    return [by_id[w] for w in sorted(set(wanted))]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="course run",
        description="Execute the lesson notebooks in order with papermill (fresh kernel each), write "
                    "executed copies and reveal.js slides under the output folder, print a table.")
    p.add_argument("--only", help="comma-separated lesson ids, e.g. 02,03 (default: all)")
    p.add_argument("--profile", default="ci", help="ci (default: CPU, offline) or full (GPU, internet)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                   help=f"seconds per notebook (default {DEFAULT_TIMEOUT_S}, the drill {NOTEBOOK_TIMEOUT_S['07_tiny_codes_drill']}; "
                        "0 = no limit)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: build/)")
    p.add_argument("--student", action="store_true",
                   help="run notebooks/ (student versions, unfinished exercises allowed) instead of solutions/")
    p.add_argument("--seed", type=int, default=0,
                   help="the notebooks' SEED parameter (default 0); another seed is what another machine "
                        "would perturb: every lesson must still pass (executed copies go to executed-seedN/)")
    p.add_argument("--no-slides", action="store_true", help="do not export slides")
    p.add_argument("--kernel", default=KERNEL_NAME, help=f"Jupyter kernel (default {KERNEL_NAME})")
    return p


def main(argv: list[str] | None = None) -> int:
    """``./course run``. Returns 0 when every notebook ran, 1 when one failed, 2 on a setup problem.
    Introduced in lesson 00."""
    args = _parser().parse_args(argv)
    from course_lib.paths import build_dir
    from course_lib.profiles import PROFILES

    folder = "notebooks" if args.student else "solutions"
    try:
        if args.profile not in PROFILES:
            raise SetupProblem(f"unknown profile {args.profile!r}; the course has: {', '.join(PROFILES)}")
        lessons = select_lessons(folder, args.only)
        out = check_writable(args.out.resolve() if args.out else build_dir(create=False))
        _import_or_explain("papermill")
        _import_or_explain("nbconvert")
        check_kernel(args.kernel)
    except SetupProblem as exc:
        print(f"course run: {exc}", file=sys.stderr)
        return 2
    suffix = f"-seed{args.seed}" if args.seed else ""
    executed = out / (("executed-student" if args.student else "executed") + suffix)
    mode = "student notebooks (unfinished exercises allowed)" if args.student else \
        "solutions (COURSE_CHECKS=strict)"
    print(f"Running {len(lessons)} notebook(s) from {folder}/ — {mode}, profile {args.profile!r}, "
          f"SEED={args.seed}, timeout {args.timeout:.0f} s each; output in {out}", flush=True)
    runs: list[NotebookRun] = []
    for i, path in enumerate(lessons, 1):
        print(f"[{i}/{len(lessons)}] {path.stem} ...", flush=True)
        run = execute_notebook(path, executed / path.name, profile=args.profile, strict=not args.student,
                               timeout_s=args.timeout or None, kernel=args.kernel,
                               parameters={"SEED": args.seed} if args.seed else None)
        runs.append(run)
        print(f"[{i}/{len(lessons)}] {path.stem}: {run.status} in {run.seconds:.1f} s"
              + (f" — {run.first_error()}" if run.error else ""), flush=True)
    if not args.no_slides and not args.student:
        from course_lib.tooling.slides import SlidesError, export_slides

        for run in runs:
            if run.output:
                try:
                    html = export_slides(run.output, out / ("slides" + suffix))
                    print(f"slides: {html}")
                except SlidesError as exc:
                    print(f"slides for {run.name} failed: {exc}", file=sys.stderr)
    report = out / (("run-report-student" if args.student else "run-report") + suffix + ".json")
    report.write_text(json.dumps({"profile": args.profile, "folder": folder, "seed": args.seed,
                                  "runs": [r.to_json() for r in runs]}, indent=1, ensure_ascii=False))
    print()
    print(format_table(runs))
    print(f"per-cell durations: {report}")
    failed = [r for r in runs if not r.ok]
    if failed:
        print(failure_advice(failed))
    return 0 if not failed else 1


def failure_advice(failed: list[NotebookRun]) -> str:
    """What a student or an instructor does about failed notebooks: where to look, what the message means, what
    to send. Introduced in lesson 00."""
    lines = ["", "What to do about the failed notebook(s):"]
    for r in failed:
        where = f"cell {r.error_cell}" if r.error_cell is not None else "the start"
        lines.append(f"  - {r.name}: open {r.output or r.source} at {where}; the error there reads: {r.error or r.status}")
    lines += [
        "  - A message that compares numbers (`AssertionError: assert 0.39 > 0.40` and what produced them) is a check",
        "    the course makes; docs/claims.md lists which outcomes are asserted and why they should hold on any CPU.",
        "    If one fails on your machine, that is a course bug: report it with build/run-report.json and your CPU",
        "    (`grep -m1 'model name' /proc/cpuinfo`).",
        "  - `timeout`: the notebook ran past --timeout (busy machine?); rerun it alone: ./course run --only NN",
        "  - ModuleNotFoundError / a missing environment: ./course setup, then rerun.",
    ]
    return "\n".join(lines)
