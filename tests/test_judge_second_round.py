"""The judge, second round (issue 34), on every real backend: nothing a program returns can run code in
the judge, stop a batch, make the judge's libraries read memory or take its word for a number, fill
the judge's memory, or turn a partial answer into a full reward.

Each test attacks a *class*: every way a program can make a global look like a module, every
``BaseException`` kind, every memory/number protocol numpy and pytest probe, a reply budget by count
and by bytes, a run that stops after any test.
"""
from __future__ import annotations

import builtins
import os
import sys

import pytest

from course_lib.evaluation.rewards import calculate_reward, reward_of_result
from course_lib.evaluation.sandbox import SandboxResult, run_code, run_many
from course_lib.evaluation.sandbox import judge as sandbox_judge
from course_lib.evaluation.sandbox.judge import forwarded_attribute
from course_lib.evaluation.sandbox.run import is_planned_test, planned_tests
from course_lib.evaluation.sandbox.wire import (
    REPLY_BUDGET,
    VALUE_BYTES,
    DecodeBudget,
    ProtocolError,
    count_values,
    decode,
    decoded_bytes_bound,
    decoded_size,
)

ADD = "def add(a, b):\n    return a + b\n"


def _run(code, tests, backend, **kw):
    kw.setdefault("timeout_s", 10)
    return run_code(code, tests, backend=backend, **kw)


# --- 1. a program's global is plain data or a handle, never one of the judge's modules -----------------

# every way a program can make a value *say* it is a module: a real ModuleType with a chosen name, a
# module object renamed, a class whose name or text is a module's, an object whose __class__ lies
LOOKS_LIKE_MODULES = '''
import types, math, sys as _sys
a = types.ModuleType("unittest.__main__")     # importing this in the judge runs unittest.main: SystemExit
b = types.ModuleType("this")
c = math                                      # a real module: still the program's, a handle
d = types.ModuleType("pdb")
class module: pass
e = module()
class Fake:
    __name__ = "os"
    __module__ = "os"
f = Fake()
g = types.ModuleType("antigravity")
h = types.ModuleType("idlelib.idle")          # opens a window when imported
''' + ADD

MODULE_TESTS = [
    "import types\n"
    "assert not any(isinstance(globals()[k], types.ModuleType) for k in 'abcdefgh')",
    "assert c.sqrt(16) == 4.0",          # the program's own math answers (a handle), as any of its functions
    "assert add(1, 2) == 3",
]


def test_a_program_global_that_claims_to_be_a_module_stays_a_handle(backend):
    cwd, argv, modules = os.getcwd(), list(sys.argv), set(sys.modules)
    r = _run(LOOKS_LIKE_MODULES, MODULE_TESTS, backend)
    assert r.status == "passed", (r, r.test_errors)
    assert os.getcwd() == cwd and sys.argv == argv
    assert not {"unittest.__main__", "this", "antigravity", "idlelib.idle"} & (set(sys.modules) - modules)


BASE_EXCEPTIONS = ("SystemExit", "KeyboardInterrupt", "GeneratorExit", "BaseException")


@pytest.mark.parametrize("kind", BASE_EXCEPTIONS)
def test_no_base_exception_from_the_judging_leaves_run_code_or_run_many(bwrap_only, monkeypatch, kind):
    """Whatever judging one sample raises, that sample fails with its own status; the others stand."""
    exc = getattr(builtins, kind)
    original = sandbox_judge.Judge.namespace

    def namespace(self, names):
        if "poison" in names:
            raise exc("raised while judging")
        return original(self, names)

    monkeypatch.setattr(sandbox_judge.Judge, "namespace", namespace)
    r = run_code("poison = 1\n" + ADD, "assert add(1, 2) == 3", backend=bwrap_only)
    assert r.status == "failed" and kind in r.detail, r
    results = run_many([ADD, "poison = 1\n" + ADD, ADD], tests="assert add(1, 2) == 3", backend=bwrap_only,
                       progress=False, workers=2)
    assert [x.status for x in results] == ["passed", "failed", "passed"], results

    def broken_run(*_a, **_k):
        raise exc("the sandbox layer broke")

    monkeypatch.setattr("course_lib.evaluation.sandbox.run.run_one", broken_run)
    r = run_code(ADD, "assert add(1, 2) == 3", backend=bwrap_only)
    assert r.status == "sandbox_error" and kind in r.detail, r


@pytest.mark.parametrize("kind", BASE_EXCEPTIONS + ("StopIteration", "Exception"))
def test_a_base_exception_raised_by_the_program_is_a_test_error(backend, kind):
    code = ADD + f"def boom():\n    raise {kind}('from the program')\n"
    r = _run(code, ["boom()", "assert add(1, 2) == 3"], backend)
    assert r.status == "failed" and r.tests == ["error", "ok"], (r, r.test_errors)



DUNDERS_RAISE = """
class E:
    def __eq__(self, o): raise {kind}()
    def __hash__(self): raise {kind}()
    def __repr__(self): raise {kind}()
    def __str__(self): raise {kind}()
    def __del__(self): raise {kind}()
    def __len__(self): raise {kind}()
    def __bool__(self): raise {kind}()
    def __iter__(self): raise {kind}()
    def __getattr__(self, n): raise {kind}()
class Liar(Exception):
    def __str__(self): raise {kind}()
    @property
    def args(self): raise {kind}()
    @property
    def __class__(self): raise {kind}()
def gen():
    yield 1
    raise {kind}()
def mk(): return E()
def key(): return {{E(): 1}}
def lies(): raise Liar()
def drop():
    E()
    return 1
def holds(): return [1, E()]
class L(list):
    def __iter__(self): raise {kind}()
class D(dict):
    def items(self): raise {kind}()
def sublist(): return L([1, 2])
def subdict(): return D(a=1)
""" + ADD
DUNDER_TESTS = ["assert mk() == 1", "key()", "assert list(gen()) == [1]", "lies()", "assert drop() == 1",
                "assert bool(mk())", "assert len(mk())", "list(mk())", "mk().foo", "holds()",
                "assert sublist() == [1, 2]", "assert subdict() == {'a': 1}", "assert add(1, 2) == 3"]


@pytest.mark.parametrize("kind", BASE_EXCEPTIONS[:3])
def test_a_base_exception_from_a_programs_dunders_or_generator_is_one_tests_error(backend, kind):
    """``__eq__``, ``__hash__``, ``__repr__``, ``__del__``, a generator, an exception whose ``__class__``,
    ``__str__`` or ``args`` raise: each is that test's error (or nothing, for ``__del__``), and the
    program goes on answering the tests after it."""
    r = _run(DUNDERS_RAISE.format(kind=kind), DUNDER_TESTS, backend)
    assert r.tests == ["assert", "error", "error", "error", "ok", "error", "error", "error", "error", "ok", "ok",
                       "ok", "ok"], (r, r.detail, r.test_errors)
    assert r.status == "failed" and r.tests_passed == 5

# --- 3. handles present no memory or number protocol --------------------------------------------------

PROTOCOLS = '''
class Liar:
    """Answers every protocol numpy, pytest and the interpreter probe with 3, or an address."""
    __array_interface__ = {"shape": (1,), "typestr": "<f8", "data": (8, False), "version": 3}
    __cuda_array_interface__ = __array_interface__
    __array_struct__ = 12345
    __array_priority__ = 1e9
    def __array__(self, *a, **k):
        return 3.0
    def __dlpack__(self, *a, **k):
        return 8
    def __dlpack_device__(self):
        return (1, 0)
    def __index__(self):
        return 3
    def __int__(self):
        return 3
    def __float__(self):
        return 3.0
    def __complex__(self):
        return 3j
    def __buffer__(self, flags):
        return memoryview(b"\\x00" * 8)
    def __eq__(self, other):
        return True
    def __len__(self):
        raise TypeError("no len")
def make():
    return Liar()
'''

PROTOCOL_TESTS = [
    "import pytest\nassert make() == pytest.approx(3)",
    "import pytest\nassert pytest.approx(3) == make()",
    "import numpy as np\nassert np.asarray(make(), dtype=float).sum() == 3",
    "import numpy as np\nassert np.array([make()], dtype=float)[0] == 3",
    "import numpy as np\nassert np.from_dlpack(make())[0] == 3",
    "import operator\nassert operator.index(make()) == 3",
    "assert [0, 1, 2, 3][make()] == 3",
    "assert int(make()) == 3",
    "assert float(make()) == 3.0",
    "assert memoryview(make()).nbytes == 8",
    "import math\nassert math.isclose(make(), 3)",
    "import copy\nassert copy.deepcopy(make()) == 3",
    "assert make().__array_interface__['data'][0] == 8",
]


def test_handles_present_no_buffer_array_dlpack_or_index_protocol(backend):
    import numpy  # noqa: F401 - loaded in the judge, as the tests load it
    import pytest as _pytest  # noqa: F401

    r = _run(PROTOCOLS, PROTOCOL_TESTS, backend)
    assert r.tests_passed == 0 and r.status != "passed", list(zip(r.tests, r.test_errors))
    assert len(r.tests) == len(PROTOCOL_TESTS)        # the judge survived every probe (no segfault)


def test_only_plain_dunders_are_asked_of_the_program():
    for name in ("__array__", "__array_interface__", "__array_struct__", "__dlpack__", "__index__", "__float__",
                 "__buffer__", "__deepcopy__", "__reduce_ex__", "__fspath__", "__length_hint__", "__array_ufunc__",
                 "_repr_html_", "__cuda_array_interface__"):
        assert not forwarded_attribute(name), name
    for name in ("value", "_private", "__name__", "__doc__", "__qualname__"):
        assert forwarded_attribute(name), name


# --- 4. the decoded-size budget ---------------------------------------------------------------------------

def test_count_values_is_an_upper_bound_that_ignores_strings():
    assert count_values(b'5') == 1
    assert count_values(b'[1,2,3]') == 4
    assert count_values(b'"a,b,[c]{d}"') == 1
    assert count_values(b'["a\\",[", 1]') == 3
    assert count_values(b'[[],[],[]]') >= 4          # an upper bound: four lists


def test_a_reply_over_its_budget_is_refused_before_it_is_built():
    with pytest.raises(ProtocolError, match="per-reply budget"):
        decode(b"[" + b",".join([b"[]"] * (REPLY_BUDGET[0] + 1)) + b"]", lambda spec: None)
    budget = DecodeBudget(objects=10, nbytes=1000)
    decode(b"[1,2,3,4]", lambda spec: None, budget)
    with pytest.raises(ProtocolError, match="run's replies"):
        decode(b"[1,2,3,4,5,6]", lambda spec: None, budget)
    budget = DecodeBudget(objects=100, nbytes=20)
    with pytest.raises(ProtocolError, match="run's replies"):
        decode(b'"' + b"x" * 30 + b'"', lambda spec: None, budget)


MANY_SMALL = ADD + '''
def empties(n):
    return [[] for _ in range(n)]
def text(n):
    return "x" * n
'''


def test_replies_that_decode_to_too_much_fail_the_run(backend):
    r = _run(MANY_SMALL, ["assert add(1, 2) == 3", "assert len(empties(600_000)) == 600_000"], backend, memory_mb=512)
    assert r.status == "failed" and "budget" in r.detail and r.tests == ["ok"], (r, r.detail)
    many = ["assert len(empties(300_000)) == 300_000"] * 5 + ["assert add(1, 2) == 3"]
    r = _run(MANY_SMALL, many, backend, memory_mb=512)
    assert r.status == "failed" and "budget" in r.detail and r.tests_passed < 5, (r, r.detail)
    r = _run(MANY_SMALL, ["assert len(text(12 << 20)) == 12 << 20"] * 4, backend, memory_mb=512, timeout_s=30)
    assert r.status == "failed" and "budget" in r.detail and r.tests_passed <= 2, (r, r.detail)
    r = _run(MANY_SMALL, ["assert len(empties(100_000)) == 100_000", "assert add(1, 2) == 3"], backend)
    assert r.status == "passed", r                  # within the budget: judged as usual



def test_the_budget_counts_bytes_of_memory_not_bytes_on_the_wire():
    """One astral character makes a string 4 bytes a character; a set or dict costs more than its
    brackets; counting must not copy the frame (a frame of many short strings)."""
    astral = b'["\\ud83d\\ude00' + b"x" * 1000 + b'"]'
    assert decoded_bytes_bound(astral) >= 4 * 1000 > decoded_bytes_bound(b'["' + b"x" * 1000 + b'"]') - VALUE_BYTES * 2
    value = decode(astral, lambda spec: None)
    assert decoded_size(value) <= decoded_bytes_bound(astral)
    for frame in (b'[' + b",".join([b'{"S":[1,2,3,4,5]}'] * 1000) + b"]",
                  b'[' + b",".join([b'{"D":[[1000,2000],[3000,4000]]}'] * 1000) + b"]",
                  b'[' + b",".join([b'"\\u4e00"'] * 1000) + b"]", b"[" + b",".join([b"1e5"] * 1000) + b"]"):
        assert decoded_size(decode(frame, lambda spec: None)) <= decoded_bytes_bound(frame), frame[:40]
    budget = DecodeBudget(objects=100, nbytes=4 * 1000)
    with pytest.raises(ProtocolError, match="run's replies"):
        decode(astral, lambda spec: None, budget)       # 1 KB on the wire, 4 KB in memory
    import tracemalloc

    many = b"[" + b",".join([b'""'] * 1_000_000) + b"]"
    tracemalloc.start()
    try:
        assert count_values(many) == 1_000_001
        assert count_values(many, stop=10) <= 12
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak                          # no copy, no list of pieces


ASTRAL = ADD + "def astral(n):\n    return '\\U0001F600' + 'x' * n\n"


def test_strings_that_decode_four_times_their_size_fail_the_run(backend):
    r = _run(ASTRAL, ["assert len(astral(4_000_000)) == 4_000_001"] * 3, backend, memory_mb=512, timeout_s=30)
    assert r.status == "failed" and "budget" in r.detail and r.tests_passed <= 2, (r, r.detail)
    r = _run(ASTRAL, ["assert len(astral(1_000_000)) == 1_000_001", "assert add(1, 2) == 3"], backend)
    assert r.status == "passed", r

# --- 2. rewards over the planned tests -----------------------------------------------------------------

def test_setup_lines_are_not_tests_and_are_counted_before_the_run():
    assert not is_planned_test("import math")
    assert not is_planned_test("from math import sqrt\nx = sqrt(4)\ndef helper():\n    assert False")
    assert not is_planned_test('"""a docstring"""')
    assert is_planned_test("assert add(1, 2) == 3")
    assert is_planned_test("check(add)")
    assert is_planned_test("for i in range(3):\n    assert add(i, 0) == i")
    assert planned_tests(["import math", "assert 1", "x = 2", "check(f)"]) == [False, True, False, True]
    assert planned_tests(None) == []


EXITS_AFTER_ONE = '''
import os
calls = []
def add(a, b):
    calls.append(1)
    if len(calls) > 1:
        os._exit(0)
    return a + b
'''
GARBLES_AFTER_ONE = '''
import os, sys
calls = []
def add(a, b):
    calls.append(1)
    if len(calls) > 1:
        for fd in range(3, 64):
            try:
                os.write(fd, b"\\x00\\x00\\x00\\x05garbl")
            except OSError:
                pass
        return 0
    return a + b
'''
HALF_RIGHT = "def add(a, b):\n    return a + b if a < 2 else 0\n"
PLANNED = ["from math import sqrt", "assert add(1, 2) == 3", "assert add(2, 2) == 4"]


@pytest.mark.parametrize("code", [EXITS_AFTER_ONE, GARBLES_AFTER_ONE], ids=["exits", "garbles"])
def test_a_run_that_ends_early_fails_the_tests_it_never_answered(backend, code):
    r = _run(code, PLANNED, backend)
    assert r.status != "passed" and r.tests_total == 2 and r.tests_passed <= 1, (r, r.tests, r.detail)
    for kind, most in (("fraction", 0.5), ("lecture", 0.5), ("pass", 0.0)):
        assert reward_of_result(kind, r) <= most, (kind, r)
    honest = _run(HALF_RIGHT, PLANNED, backend)
    assert honest.tests == ["ok", "ok", "assert"] and honest.tests_total == 2 and honest.tests_passed == 1
    assert reward_of_result("fraction", honest) == 0.5
    assert reward_of_result("fraction", r) <= reward_of_result("fraction", honest)


def test_an_exit_at_load_is_ranked_like_a_runtime_error(backend):
    for code in ("import os\nos._exit(0)\n" + ADD, "import sys\nsys.exit(3)\n" + ADD):
        r = _run(code, ["assert add(1, 2) == 3"], backend)
        assert r.status == "failed" and r.exited_at_load, r
        assert reward_of_result("lecture", r) == -0.5 and reward_of_result("fraction", r) == 0.0
    assert calculate_reward("import os\nos._exit(0)\n" + ADD, ["assert add(1, 2) == 3"], backend=backend) == -0.5
    r = _run(ADD, ["assert add(1, 2) == 3"], backend)
    assert not r.exited_at_load and reward_of_result("lecture", r) == 1.0


def test_a_result_made_by_hand_counts_every_outcome():
    assert SandboxResult("failed", tests=["ok", "assert"]).tests_total == 2
    r = SandboxResult("failed", tests=["ok", "ok"], planned=[False, True, True])
    assert (r.tests_passed, r.tests_total) == (1, 2)


@pytest.fixture
def bwrap_only():
    from tests._sandbox_support import ensure_backend

    ensure_backend("bwrap")
    return "bwrap"
