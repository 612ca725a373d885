"""Lesson 08's exercises: the tree attention mask, failed tool calls from the harness status, and
Fail-to-Pass / Pass-to-Pass. Introduced in lesson 08."""
from __future__ import annotations

from course_lib.exercises import Exercise


def reference_tree_mask(parents):
    """``mask[i][j]`` is True iff j == i or j is an ancestor of i (``parents[i]`` = -1 for a root)."""
    import torch

    from course_lib.agentic.tree import ancestor_mask

    return ancestor_mask(torch.tensor(parents, dtype=torch.long)).tolist()


def reference_failed_call_flags(messages):
    from course_lib.agentic.emsft import failed_call_flags

    return failed_call_flags(messages)


def reference_split_f2p_p2p(before, after):
    from course_lib.agentic.envs import split_f2p_p2p

    return split_f2p_p2p(before, after)


def _tool(content, error):
    return {"role": "tool", "content": content, "error": error}


def _call(content):
    return {"role": "assistant", "content": content}


RECOVERY = [
    {"role": "user", "content": "fix the bug in util.py"},
    _call('read_file({"path": "utils.py"})'),
    _tool("No such file: utils.py", True),
    _call('read_file({"path": "util.py"})'),
    _tool("def add(a, b):\n    return a - b", False),
    _call('edit_file({"path": "util.py", "patch": "return a + b"})'),
    _tool("edited util.py", False),
]

EXERCISES = [
    Exercise(
        id="08-1", name="my_tree_mask", reference=reference_tree_mask,
        description="ancestor (tree attention) mask from parent indices",
        cases=[
            ([-1, 0, 1, 2],),                       # one path: the causal mask
            ([-1, 0, 1, 1, 0],),                    # two branches after token 1, a third after token 0
            ([-1, 0, -1, 2],),                      # two roots (a forest)
            ([-1, 0, 1, 2, 2, 0, 5, 6],),           # deep branches: grandparents count too
        ]),
    Exercise(
        id="08-2", name="my_failed_call_flags", reference=reference_failed_call_flags,
        description="assistant turns whose next tool message has the harness flag error=True",
        cases=[
            (RECOVERY,),
            # a pytest run reproducing the bug, a file defining an ...Error class, a grep hit: all succeeded
            ([_call("run_tests()"), _tool("FAILED tests/test_a.py::test_add - AssertionError", False),
              _call("read_file(errors.py)"), _tool("class ParseError(ValueError):\n    pass", False),
              _call("grep Error"), _tool("src/a.py:3: raise ConfigError('x')", False)],),
            # the status decides even when the text looks harmless
            ([_call("run()"), _tool("fine", True)],),
            # a failure later in the trajectory does not make an earlier call a failure
            ([_call("ls"), _tool("a.py", False), {"role": "user", "content": "go on"}, _call("cat b.py"),
              _tool("timed out after 30 s", True)],),
            ([{"role": "user", "content": "hi"}, _call("done")],),
            # the sandbox's own statuses in the text are not the harness flag: only error=True is a failure
            ([_call("run_tests()"), _tool("status: runtime_error (the test expects it)", False),
              _call("run('x')"), _tool("status: passed", True), _call("run('y')"), _tool("timeout memory_limit", False)],),
            # only the message right after the call counts: a user turn in between, then a failed tool message
            ([_call("ls"), {"role": "user", "content": "wait"}, _tool("denied", True), _call("ls -a"),
              _call("cat a"), _tool("ok", False)],),
        ]),
    Exercise(
        id="08-3", name="my_split_f2p_p2p", reference=reference_split_f2p_p2p,
        description="Fail-to-Pass and Pass-to-Pass in the order of after",
        cases=[
            ({"a": True, "b": False}, {"a": True, "b": True}),
            ({"a": True, "b": True, "c": False}, {"a": True, "b": False, "c": False}),   # b broke; c never passes
            ({}, {"new": True}),                                                          # not run before = failed
            ({"z_old": True, "m_old": True, "a_old": False},
             {"z_old": True, "y_new": True, "m_old": True, "b_new": True, "a_old": True}),  # order of after, not sorted
            ({"b": False, "a": False, "c": True, "d": True}, {"a": True, "d": True, "b": True, "c": True}),  # before's order differs
            ({"x": True, "gone": True}, {"y": True, "x": True, "gone": False}),          # a test that broke is in neither
        ]),
]
