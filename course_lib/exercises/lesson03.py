"""Lesson 03's exercises: relative imports to absolute module names, DeepSeek-Coder's ordering rule."""
from __future__ import annotations

import networkx as nx

from course_lib.data import deps
from course_lib.exercises import Exercise


def graph(edges, extra=()) -> nx.DiGraph:
    """A DiGraph from ``edges`` plus isolated nodes ``extra`` (how the lesson writes its cases)."""
    g = nx.DiGraph()
    g.add_nodes_from(extra)
    g.add_edges_from(edges)
    return g


SRC_REPO = {
    "src/demo/__init__.py": "from .api import get\n",
    "src/demo/api.py": "from .sessions import Session\nfrom . import utils\n",
    "src/demo/sessions.py": "from .adapters import Adapter\nfrom .utils import tidy\nimport requests\n",
    "src/demo/adapters.py": "from .utils import tidy\n",
    "src/demo/utils.py": "import os\n",
    "tests/test_api.py": "import demo.api\nfrom demo import get\n",
}

EXERCISES = [
    Exercise(
        id="03-1", name="relative -> absolute", reference=deps.relative_to_absolute,
        cases=[("pkg.sub.mod", False, 1, "util"), ("pkg.sub.mod", False, 2, "core"), ("pkg.sub.mod", False, 2, ""),
               ("pkg.sub", True, 1, "x"), ("pkg.sub", True, 2, ""), ("pkg.mod", False, 3, "x"),
               ("top", False, 1, "x"), ("a.b.c.d", False, 3, "e.f"), ("pkg", True, 1, ""),
               ("pkg", True, 2, "x"), ("m", False, 0, "os.path")],
        description="The absolute module a relative import names; None when the dots climb too high."),
    Exercise(
        id="03-2", name="DeepSeek smallest in-degree", reference=deps.order_deepseek,
        cases=[(graph([("a", "b"), ("b", "c")]),),
               (graph([("c", "b"), ("b", "a")], extra=["z"]),),
               (graph([("a", "b"), ("b", "a"), ("a", "c"), ("d", "c")]),),
               (graph([("x", "y"), ("y", "z"), ("z", "x"), ("z", "w"), ("w", "v")]),),
               (graph([("a", "a"), ("c", "b")]),),                    # a self-loop does not count
               (graph([("m", "k"), ("n", "k"), ("k", "j"), ("j", "b")], extra=["a"]),),
               (deps.import_graph(SRC_REPO),)],
        description="Repeatedly take the file with the smallest (in-degree from remaining files, "
                    "self-loops excluded; name)."),
]
