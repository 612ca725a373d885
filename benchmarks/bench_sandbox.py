"""Sandbox throughput: HumanEval through the judge (164 canonical solutions must pass, 164 stubs must
fail) against the previous in-process judge and against ``docker run``; 1,000 small samples (mostly
passing, a few percent infinite loops and crashes) on 8 workers per backend; the median overhead of one
trivial sample; the ratio bwrap / docker; and the attack x backend table.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_sandbox.py            # full run (docker part ~5 min)
    PYTHONPATH=. .venv/bin/python benchmarks/bench_sandbox.py --n 200 --humaneval-docker 40   # quicker

Targets: HumanEval through the judge on bwrap >= 30 samples/s (issue 24); bwrap >= 30 samples/s and
median overhead <= 100 ms; docker >= 2 samples/s. The peer "previous in-process judge"
(``benchmarks/_inprocess_judge.py``) ran the tests inside the program's process — forgeable, kept only
to measure what judging from outside costs; no judged path uses it.
Infinite loops use a 1 s limit here (the lesson's default is 10 s) so they do not dominate the clock.
Starts the course's dockerd when no daemon answers, and stops it again at the end.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._inprocess_judge import run_many_inprocess  # noqa: E402
from course_lib.evaluation import humaneval  # noqa: E402
from course_lib.evaluation.sandbox import run_code, run_many, summarize  # noqa: E402
from course_lib.evaluation.sandbox.attacks import run_attacks  # noqa: E402
from course_lib.evaluation.sandbox.runtime import sandbox_python  # noqa: E402


def humaneval_items() -> list[dict]:
    """164 canonical solutions (must pass) and 164 stubs that return nothing (must fail)."""
    problems = humaneval.load_humaneval()
    return ([humaneval.sandbox_item(p) for p in problems]
            + [{"code": p["prompt"] + "    pass\n", "tests": humaneval.hidden_tests(p)} for p in problems])


def humaneval_rate(judge: str, backend: str, items: list[dict], workers: int) -> tuple[float, str]:
    """samples/s and a verdict: every canonical solution passed and every stub failed."""
    t0 = time.monotonic()
    if judge == "previous in-process judge":
        results = run_many_inprocess(items, workers=workers, backend=backend)
    else:
        results = run_many(items, workers=workers, backend=backend, progress=False)
    rate = len(items) / (time.monotonic() - t0)
    half = len(items) // 2
    ok = all(r.passed for r in results[:half]) and not any(r.passed for r in results[half:])
    canon = sum(r.passed for r in results[:half])
    stubs = sum(r.passed for r in results[half:])
    return rate, f"canonical passed {canon}/{half}, stubs passed {stubs}/{len(items) - half}" + ("" if ok else "  <- WRONG")


def make_samples(n: int, seed: int = 0) -> list[dict]:
    """n small programs with tests: ~94% correct, ~2% infinite loops, ~2% crashes, ~2% wrong."""
    rng = random.Random(seed)
    items = []
    for _ in range(n):
        a, b = rng.randint(-50, 50), rng.randint(-50, 50)
        kind = rng.choices(["ok", "loop", "crash", "wrong"], weights=[94, 2, 2, 2])[0]
        body = {"ok": "return sorted(xs)[::-1][:k]", "loop": "while True:\n        pass",
                "crash": "return xs[len(xs) + k]", "wrong": "return sorted(xs)[:k]"}[kind]
        code = f"def top_k(xs, k):\n    {body}\n"
        tests = [f"assert top_k([{a}, {b}, 7, 3], 2) == sorted([{a}, {b}, 7, 3], reverse=True)[:2]",
                 "assert top_k([], 0) == []"]
        items.append({"code": code, "tests": tests, "timeout_s": 1.0})
    return items


def throughput(backend: str, items: list[dict], workers: int) -> tuple[float, dict]:
    t0 = time.monotonic()
    results = run_many(items, workers=workers, backend=backend, progress=False)
    return len(items) / (time.monotonic() - t0), summarize(results)


def median_overhead(backend: str, runs: int) -> float:
    durations = [run_code("pass", backend=backend).duration_s for _ in range(runs)]
    return statistics.median(durations)


def bare_python_startup(runs: int = 10) -> float:
    py = str(sandbox_python())
    times = []
    for _ in range(runs):
        t0 = time.monotonic()
        subprocess.run([py, "-I", "-S", "-c", "pass"], check=True)
        times.append(time.monotonic() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000, help="samples per backend (default 1000)")
    ap.add_argument("--docker-n", type=int, default=None, help="samples for docker (default: --n)")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--backends", default="bwrap,docker")
    ap.add_argument("--no-attacks", action="store_true")
    ap.add_argument("--humaneval-docker", type=int, default=None,
                    help="HumanEval samples for docker (default: all 328; half canonical, half stubs)")
    args = ap.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    daemon = None
    if "docker" in backends:
        from course_lib.evaluation.sandbox.docker import ensure_docker

        try:
            daemon = ensure_docker()
        except RuntimeError as exc:
            print(f"docker: skipped ({exc})")
            backends.remove("docker")
    try:
        he = humaneval_items()
        he_rows = []
        if "bwrap" in backends:
            for judge in ("judge (tests outside the program)", "previous in-process judge"):
                he_rows.append((judge, "bwrap", len(he)) + humaneval_rate(judge, "bwrap", he, args.workers))
        if "docker" in backends:
            n = args.humaneval_docker or len(he)
            half = len(he) // 2
            sub = he[: n // 2] + he[half: half + n // 2]
            he_rows.append(("judge (tests outside the program)", "docker", len(sub))
                           + humaneval_rate("judge", "docker", sub, args.workers))
        print(f"\nHumanEval through the sandbox ({args.workers} workers, {os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.1f} at the end):")
        print(f"{'judge':<36} {'backend':<7} {'samples':>7} {'samples/s':>10}  verdict")
        for judge, backend, n, rate, verdict in he_rows:
            print(f"{judge:<36} {backend:<7} {n:>7} {rate:>10.1f}  {verdict}")
        rates = {(j.split()[0], b): r for j, b, _n, r, _v in he_rows}
        if ("judge", "bwrap") in rates and ("previous", "bwrap") in rates:
            print(f"judge / previous in-process judge (bwrap): {rates[('judge', 'bwrap')] / rates[('previous', 'bwrap')]:.2f}x")
        if ("judge", "bwrap") in rates and ("judge", "docker") in rates:
            print(f"judge on bwrap / judge on docker run: {rates[('judge', 'bwrap')] / rates[('judge', 'docker')]:.1f}x")
        if ("judge", "bwrap") in rates:
            print(f"HumanEval target (>= 30 samples/s with bwrap): {'met' if rates[('judge', 'bwrap')] >= 30 else 'NOT met'}")
        rows = {}
        for backend in backends:
            n = args.docker_n if (backend == "docker" and args.docker_n) else args.n
            rate, counts = throughput(backend, make_samples(n), args.workers)
            overhead = median_overhead(backend, 15 if backend == "docker" else 30)
            rows[backend] = (n, rate, overhead, counts)
        base = bare_python_startup()
        print(f"\n{args.workers} workers; bare `python3 -I -S -c pass` start-up: {base * 1000:.0f} ms (no sandbox)\n")
        print(f"{'backend':<8} {'samples':>7} {'samples/s':>10} {'median ms/sample':>17}  statuses")
        for backend, (n, rate, overhead, counts) in rows.items():
            statuses = ", ".join(f"{k}={v}" for k, v in counts.items() if v)
            print(f"{backend:<8} {n:>7} {rate:>10.1f} {overhead * 1000:>17.0f}  {statuses}")
        if "bwrap" in rows and "docker" in rows:
            print(f"\nratio bwrap / docker-per-sample: {rows['bwrap'][1] / rows['docker'][1]:.1f}x samples/s; "
                  f"overhead {rows['docker'][2] / rows['bwrap'][2]:.1f}x lower with bwrap")
        if "bwrap" in rows:
            ok = rows["bwrap"][1] >= 30 and rows["bwrap"][2] <= 0.100
            print(f"bwrap targets (>= 30 samples/s, <= 100 ms median): {'met' if ok else 'NOT met'}")
        if "docker" in rows:
            print(f"docker target (>= 2 samples/s): {'met' if rows['docker'][1] >= 2 else 'NOT met'}")
        if not args.no_attacks:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                table = run_attacks(backends + ["unsafe"])
            cols = backends + ["unsafe"]
            print(f"\n{'attack':<30} " + " ".join(f"{c:<30}" for c in cols))
            for name, outcome in table.items():
                print(f"{name:<30} " + " ".join(f"{outcome[c]:<30}" for c in cols))
    finally:
        if daemon is not None:
            daemon.stop()


if __name__ == "__main__":
    main()
