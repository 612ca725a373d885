"""Results the benchmarks recorded (``benchmarks/results/<name>.json``), read back by the lessons, so a
number a lesson states about a longer measurement comes from the file the benchmark wrote.

Introduced in lesson 04.
"""
from __future__ import annotations

import json
from typing import Any

from course_lib.paths import repo_root


def benchmark_result(name: str) -> dict[str, Any] | None:
    """The JSON a benchmark wrote to ``benchmarks/results/<name>.json``, or None when it is not there
    (run the benchmark with ``--json`` to write it). Introduced in lesson 04."""
    root = repo_root()
    path = root / "benchmarks" / "results" / f"{name}.json" if root else None
    if path is None or not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def dependency_order_benchmark(corpus_fingerprint: str | None = None) -> dict[str, Any]:
    """``benchmarks/bench_dependency_order.py``'s recorded result (several seeds of lesson 04's
    dependency-order experiment) with ``status``: ``"ok"``, ``"missing"`` (no results file) or
    ``"other corpus"`` (recorded on another corpus than ``corpus_fingerprint``; the numbers are then
    shown but say so). Introduced in lesson 04."""
    res = benchmark_result("bench_dependency_order")
    if res is None:
        return {"status": "missing", "command": "PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_dependency_order.py "
                                                "--json benchmarks/results/bench_dependency_order.json"}
    recorded = res.get("corpus_fingerprint")
    status = "ok" if corpus_fingerprint is None or recorded == corpus_fingerprint else "other corpus"
    return {**res, "status": status}
