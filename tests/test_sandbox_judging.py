"""Judging like the lecture's ``docker run python``: the sample runs as a file with ``site``; exit status
0 is a pass when there are no hidden tests; the program's own unittests count; numpy and pandas import.
Every case runs on both real backends (Docker's daemon is started only for its cases)."""
from __future__ import annotations

import pytest

from course_lib.evaluation.sandbox import run_code

UNITTEST = ("import unittest\n"
            "def add(a, b):\n    return a + b{bug}\n"
            "class T(unittest.TestCase):\n"
            "    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n"
            "if __name__ == '__main__':\n    unittest.main()\n")

# program -> status, the table of docs/sandbox.md and lesson 06 (no hidden tests)
JUDGING = [
    ("print('hi')", "passed"),
    ("import sys\ndef main():\n    return 0\nsys.exit(main())", "passed"),
    ("import sys\nsys.exit(0)", "passed"),
    ("exit()", "passed"),
    ("quit()", "passed"),
    ("import sys\nsys.exit(1)", "failed"),
    ("import sys\nsys.exit('bad input')", "failed"),
    ("import sys\nsys.exit(0.0)", "failed"),          # not an int: Python prints it and exits 1
    ("import sys\nsys.exit(False)", "passed"),        # a bool is an int: 0
    ("\ufeffprint('a UTF-8 BOM')", "passed"),          # Python accepts a BOM at the start of a file
    ("print(__file__.endswith('solution.py'))\nassert __name__ == '__main__'", "passed"),
    (UNITTEST.format(bug=""), "passed"),
    (UNITTEST.format(bug=" + 1"), "failed"),
    ("import numpy as np, pandas as pd\nprint(pd.DataFrame({'a': np.arange(3)}).a.sum())", "passed"),
    ("from multiprocessing import Pool\ndef sq(x):\n    return x * x\n"
     "if __name__ == '__main__':\n    with Pool(2) as p:\n        assert p.map(sq, [1, 2, 3]) == [1, 4, 9]", "passed"),
    ("x = input()", "runtime_error"),
    ("raise ValueError('no')", "runtime_error"),
]


@pytest.mark.parametrize("code, status", JUDGING, ids=[f"{i}:{s}" for i, (_, s) in enumerate(JUDGING)])
def test_judging_table(backend, code, status):
    r = run_code(code, timeout_s=20, memory_mb=256, backend=backend)
    assert r.status == status, (r, r.stdout[-300:], r.stderr[-500:])


def test_input_on_empty_stdin_is_an_eof_error(backend):
    r = run_code("x = input()", backend=backend)
    assert r.status == "runtime_error" and "EOFError" in r.detail, r
