"""A wrong program that attacks its judge must still score 0 (issue 24), on every real backend.

The victim is ``def add(a, b): return 0`` (wrong) with hidden tests ``add(2, 3) == 5`` and
``add(-1, 1) == 0`` — the second holds for the wrong program, so a sound judge gives exactly one
``ok`` out of two, and never ``passed``. Each attack is written the way an attacker who has read the
judge's code would write it, but generically: it searches the process for what it needs (frames,
code objects, functions and closure cells that are not its own, file descriptors) instead of naming
our variables. The same attacks beat the previous in-process judge (the last test here), so the
suite has teeth.
"""
from __future__ import annotations

import pytest

from course_lib.evaluation.rewards import calculate_reward
from course_lib.evaluation.sandbox import run_code

WRONG = "def add(a, b):\n    return 0\n"
TESTS = ["assert add(2, 3) == 5", "assert add(-1, 1) == 0"]

# --- the attacks (each is a complete program; most keep the wrong `add`) ------------------------------

FRAME_WALK = WRONG + '''
import sys, gc
def neutralise():
    """Walk every frame above this one, and every code object in reach, and replace what looks like a
    test (code that mentions `add` or asserts) with `pass`; call anything that looks like a reporter."""
    blank = compile("pass", "<blank>", "exec")
    f = sys._getframe()
    while f is not None:
        for scope in (f.f_globals, f.f_locals):
            for k, v in list(scope.items()):
                if type(v) is type(blank) and v is not blank:
                    try: scope[k] = blank
                    except Exception: pass
                if isinstance(v, list):
                    for i, x in enumerate(v):
                        if type(x) is type(blank):
                            v[i] = blank
        f = f.f_back
    for o in gc.get_objects():
        if isinstance(o, list) and o and all(type(x) is type(blank) for x in o):
            o[:] = [blank] * len(o)
neutralise()
_real = add
def add(a, b):
    neutralise()
    return _real(a, b)
'''

FD_ANSWER = WRONG + r'''
import os, stat, json, struct
def forge_everywhere():
    """Write plausible 'passed' answers, in every framing we can think of, to every writable fd."""
    lines = [b"ok\n", b"passed\n", b"G\n", b"ok \n" * 4, json.dumps({"status": "passed", "tests": ["ok", "ok"]}).encode() + b"\n",
             b"\nEND-OF-RUN-" + b"0" * 32 + b" passed ok,ok -\n"]
    frames = [json.dumps(m).encode() for m in ([0, "v", 5], [1, "ok", {"D": []}], {"ok": True}, [0, "v", True])]
    blobs = lines + [struct.pack(">I", len(f)) + f for f in frames]
    for fd in range(3, 256):
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            continue
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode):
            for blob in blobs:
                try: os.write(fd, blob)
                except OSError: pass
forge_everywhere()
_real = add
def add(a, b):
    forge_everywhere()
    return _real(a, b)
'''

CLOSURE_REWRITE = WRONG + r'''
import gc, sys, types
def rewrite():
    """Find every function that is not ours and replace its closure cells and code with ones that
    answer 'success' — the judge's reply function, if it were here, would then say ok."""
    def yes(*a, **k):
        return True
    mine = __file__
    for o in gc.get_objects():
        if isinstance(o, types.FunctionType) and o.__code__.co_filename != mine:
            for cell in o.__closure__ or ():
                try:
                    if callable(cell.cell_contents):
                        cell.cell_contents = yes
                except ValueError:
                    pass
            if o.__code__.co_argcount <= 2 and o.__code__.co_name in ("reply", "answer", "finish", "report", "call", "send"):
                try: o.__code__ = yes.__code__
                except Exception: pass
rewrite()
'''

CO_CONSTS = r'''
import gc, sys, types
def add(a, b):
    """Read the expected values out of every code object in reach: if a constant tuple/list holds our
    arguments, answer with the constant that follows them."""
    best = None
    for o in gc.get_objects():
        if isinstance(o, types.CodeType):
            consts = [c for c in o.co_consts if isinstance(c, int) and not isinstance(c, bool)]
            for i in range(len(consts) - 2):
                if consts[i] == a and consts[i + 1] == b:
                    best = consts[i + 2]
    f = sys._getframe()
    while f is not None and best is None:
        consts = [c for c in f.f_code.co_consts if isinstance(c, int)]
        for i in range(len(consts) - 2):
            if consts[i] == a and consts[i + 1] == b:
                best = consts[i + 2]
        f = f.f_back
    return 0 if best is None else best
'''

ALWAYS_EQUAL = {
    "object": "class E:\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n        return False\n"
              "    __hash__ = object.__hash__\ndef add(a, b):\n    return E()\n",
    "int subclass": "class E(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
                    "def add(a, b):\n    return E(0)\n",
    "str subclass": "class E(str):\n    def __eq__(self, other):\n        return True\n    __hash__ = str.__hash__\n"
                    "def add(a, b):\n    return E('')\n",
    "list subclass": "class E(list):\n    def __eq__(self, other):\n        return True\ndef add(a, b):\n    return E()\n",
    "float with __abs__": "class E(float):\n    def __sub__(self, o):\n        return self\n"
                          "    def __abs__(self):\n        return 0.0\n"
                          "    def __eq__(self, o):\n        return True\n    __hash__ = float.__hash__\n"
                          "def add(a, b):\n    return E(0.0)\n",
}

BUILTIN_SHADOW = WRONG + "def abs(x):\n    return 0\ndef len(x):\n    return 5\ndef sorted(x, **k):\n    return x\n" \
                         "def isinstance(*a):\n    return True\n"
BUILTIN_TESTS = ["assert abs(add(2, 3) - 5) < 1e-9", "assert add(-1, 1) == 0"]

HANDLE_TRICKS = r'''
class Tricky:
    def __eq__(self, other): return True
    def __bool__(self): return True
    def __len__(self): return 5
    def __iter__(self): return iter([5])
    def __contains__(self, x): return True
    def __lt__(self, o): return True
    def __gt__(self, o): return True
    def __sub__(self, o): return self
    def __abs__(self): return 0
def add(a, b):
    return Tricky()
'''
HANDLE_TESTS = ["assert add(2, 3) == 5", "assert not (add(2, 3) != 5)", "assert abs(add(2, 3) - 5) < 1e-9",
                "assert 5 in [add(2, 3)] and add(2, 3) in [5]", "assert add(2, 3) <= 5 and add(2, 3) >= 5",
                "assert sorted([add(2, 3), 5]) == [5, 5]", "assert {add(2, 3)} == {5}", "assert add(-1, 1) == 0"]

FORGED_EXCEPTIONS = r'''
import builtins
class AssertionError(Exception): pass          # a name the judge might treat specially
class Abort(BaseException): pass
class KeyboardInterrupt(BaseException): pass
class SystemExit(BaseException): pass
def add(a, b):
    for exc in (Abort("passed: ok"), KeyboardInterrupt(), SystemExit(0), builtins.StopIteration(5)):
        if (a, b) == (2, 3):
            raise exc
    return 0
'''
FORGED_EXCEPTION_TESTS = ["assert add(2, 3) == 5", "assert add(-1, 1) == 0",
                          "for _ in range(3):\n    assert add(2, 3) == 5"]

HUGE_AND_DEEP = r'''
def add(a, b):
    if (a, b) == (2, 3):
        return "x" * (40 << 20)           # bigger than a reply may be
    x = 0
    for _ in range(100000):
        x = [x]
    return x                              # deeper than a value may be
'''

COLLIDING_KEYS = r'''
import os, stat, struct
M = (1 << 61) - 1   # hash(k * M) == 0 for every k: a dict of these keys takes hours to build
def add(a, b):
    # the program writes the reply itself (building such a dict here would be just as slow)
    body = ('[0,"v",{"D":[' + ",".join("[%d,0]" % (k * M) for k in range(200000)) + ']}]').encode()
    for fd in range(3, 64):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, struct.pack(">I", len(body)) + body)
        except OSError:
            pass
    return 0
'''

RECURSION_BOMB = r'''
class Bomb(Exception):
    def __str__(self):
        return str(self)
    def __repr__(self):
        return repr(self)
class Obj:
    def __repr__(self):
        return repr(self)
def add(a, b):
    if a == 2:
        raise Bomb()
    return Obj()
'''

NEVER_ANSWERS = "import time\ndef add(a, b):\n    time.sleep(3600)\n"

SERVER_HIJACK = r'''
import gc, os, sys, types, marshal, json, struct
def hijack():
    """Take over the request loop: find the functions of the process that are not ours and replace
    the code of the one that reads requests with a loop that answers every request with 5."""
    mine = __file__
    def answer_all(*a, **k):
        for fd in range(3, 64):
            try:
                data = os.read(fd, 65536)
            except OSError:
                continue
            try:
                rq = marshal.loads(data[4:])
            except Exception:
                continue
            reply = json.dumps([rq[1], "v", 5]).encode()
            for out in range(1, 64):
                try: os.write(out, struct.pack(">I", len(reply)) + reply)
                except OSError: pass
    for o in gc.get_objects():
        if isinstance(o, types.FunctionType) and o.__code__.co_filename != mine and "read" in o.__code__.co_name:
            try: o.__code__ = answer_all.__code__
            except Exception: pass
hijack()
''' + WRONG


def _judge(code, backend, tests=TESTS, **kw):
    kw.setdefault("timeout_s", 10)
    return run_code(code, tests, backend=backend, **kw)


def _not_forged(r, total=2, at_most_ok=1):
    assert r.status != "passed", r
    assert r.tests_passed <= at_most_ok, (r, r.tests, r.test_errors)
    return r


def test_frame_walk_to_the_tests(backend):
    r = _not_forged(_judge(FRAME_WALK, backend))
    assert r.tests == ["assert", "ok"], (r, r.test_errors)     # judged like the plain wrong program
    assert calculate_reward(FRAME_WALK, TESTS, backend=backend) == 0.5
    as_solution = FRAME_WALK.replace("add(a, b)", "add(a, b=0)").replace("add", "solution")
    assert calculate_reward(as_solution, [(2, 5), (-1, 0)], backend=backend) == 0.5   # solution(x) -> 0


def test_answering_the_protocol_through_a_found_fd(backend):
    _not_forged(_judge(FD_ANSWER, backend))
    assert calculate_reward(FD_ANSWER, TESTS, backend=backend) <= 0.0


def test_rewriting_closures_and_code_of_the_server(backend):
    _not_forged(_judge(CLOSURE_REWRITE, backend))


def test_hijacking_the_request_loop(backend):
    _not_forged(_judge(SERVER_HIJACK, backend))


def test_reading_expected_values_from_code_objects(backend):
    r = _not_forged(_judge(CO_CONSTS, backend))
    assert r.tests == ["assert", "ok"], (r, r.test_errors)   # the expected 5 is nowhere in the sandbox


@pytest.mark.parametrize("kind", list(ALWAYS_EQUAL))
def test_answers_equal_to_everything(backend, kind):
    r = _not_forged(_judge(ALWAYS_EQUAL[kind], backend, tests=["assert add(2, 3) == 5",
                                                               "assert abs(add(2, 3) - 5) < 1e-9"]), at_most_ok=0)
    assert r.tests_passed == 0, (kind, r.test_errors)


def test_handles_compare_by_identity_and_never_forward_comparisons(backend):
    r = _judge(HANDLE_TRICKS, backend, tests=HANDLE_TESTS)
    assert r.tests_passed == 0 and r.status != "passed", (r, list(zip(r.tests, r.test_errors)))


def test_program_names_cannot_shadow_the_tests_builtins(backend):
    r = _not_forged(_judge(BUILTIN_SHADOW, backend, tests=BUILTIN_TESTS))
    assert r.tests == ["assert", "ok"], (r, r.test_errors)


def test_forged_exception_types_never_stop_or_fool_the_judge(backend):
    r = _judge(FORGED_EXCEPTIONS, backend, tests=FORGED_EXCEPTION_TESTS)
    assert r.status != "passed" and r.tests[1] == "ok" and r.tests[0] != "ok" and r.tests[2] != "ok", (r, r.test_errors)


def test_huge_deep_and_colliding_values_are_refused(backend):
    r = _judge(HUGE_AND_DEEP, backend, tests=["assert add(2, 3) == 'x' * (40 << 20)", "add(-1, 1)"], memory_mb=512)
    assert r.status != "passed" and r.tests_passed == 0, (r, r.test_errors)
    r = _judge(COLLIDING_KEYS, backend, tests=["assert add(2, 3) == 5"], memory_mb=512, timeout_s=20)
    assert r.status == "failed" and "protocol" in r.detail and r.duration_s < 15, (r, r.detail)


def test_recursion_bombs_in_str_and_repr(backend):
    r = _judge(RECURSION_BOMB, backend, tests=["assert add(2, 3) == 5", "assert add(-1, 1) == 0"])
    assert r.status != "passed" and r.tests_passed == 0, (r, r.test_errors)


def test_a_program_that_never_answers_times_out(backend):
    r = _judge(NEVER_ANSWERS, backend, timeout_s=2)
    assert r.status == "timeout" and r.tests == [], r


def test_the_lecture_pairs_keep_expected_values_out_of_the_program(backend):
    """``calculate_reward(code, [(input, expected), ...])``: the program sees the inputs, never the
    expected values, so reading constants gets it nothing."""
    code = CO_CONSTS.replace("def add(a, b):", "def solution(a, b=0):")
    reward = calculate_reward(code, [(2, 5), (-1, 0)], backend=backend)
    assert reward == 0.5, reward   # solution(2) -> 0 is wrong, solution(-1) -> 0 is right


def test_answering_twice_or_before_being_asked_fails_the_run(backend):
    """Write a well-formed reply to the reply pipe before the request comes, or a second one after the
    real reply: the judge sees an answer it did not ask for."""
    early = r'''
import os, stat, json, struct
def frames(n):
    return b"".join(struct.pack(">I", len(f)) + f for f in [json.dumps([i, "v", 5]).encode() for i in range(n)])
for fd in range(3, 64):
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.write(fd, frames(3))
    except OSError:
        pass
''' + WRONG
    _not_forged(_judge(early, backend), at_most_ok=0)
    twice = WRONG + r'''
import os, stat, json, struct, threading, time
def late():
    time.sleep(0.05)
    reply = json.dumps([0, "v", 5]).encode()
    for fd in range(3, 64):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, struct.pack(">I", len(reply)) + reply)
        except OSError:
            pass
_real = add
def add(a, b):
    threading.Thread(target=late).start()
    return _real(a, b)
'''
    r = _not_forged(_judge(twice, backend, tests=TESTS + ["import time\ntime.sleep(0.3)\nassert add(0, 0) == 0"]))
    assert r.status == "failed" and "protocol" in r.detail, r


def test_the_same_attacks_beat_the_previous_in_process_judge():
    """The suite has teeth: against the previous judge (tests in the program's process), the frame walk
    and the always-equal answer pass although the program is wrong (bwrap only: the peer is the same
    sandbox, another judge)."""
    from benchmarks._inprocess_judge import run_code_inprocess
    from tests._sandbox_support import ensure_backend

    ensure_backend("bwrap")
    assert run_code_inprocess(ALWAYS_EQUAL["object"], TESTS).status == "passed"
    old_walk = ("import sys\nf = sys._getframe(1)\n"
                "while f is not None:\n"
                "    for k, v in list(f.f_locals.items()):\n"
                "        if isinstance(v, list) and v and all(type(x).__name__ == 'code' for x in v):\n"
                "            v[:] = [compile('pass', '<x>', 'exec')] * len(v)\n"
                "    f = f.f_back\n" + WRONG)
    assert run_code_inprocess(old_walk, TESTS).status == "passed"
    assert run_code(old_walk, TESTS, backend="bwrap").status == "failed"
