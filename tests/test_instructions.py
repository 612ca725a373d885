"""Tests of course_lib.training.instructions (lesson 05): four kinds of samples from real code, chat
formatting, the answer-only mask, packing."""
import shutil
import subprocess
import textwrap

import pytest

from course_lib.training import instructions as I
from tests.chat_model_for_tests import make_chat_model

SOURCE = textwrap.dedent('''
    import math

    LIMIT = 3


    def double(x):
        """Return twice the value x.

        >>> double(4)
        8
        >>> double(-1)
        -2
        """
        return 2 * x


    def hyp(a, b):
        """Return the hypotenuse of a right triangle with legs a and b."""
        return math.sqrt(a * a + b * b)


    def uses_global(x):
        """Return x plus a module-level constant."""
        return x + LIMIT


    def nodoc(x):
        return x
''')


@pytest.fixture(scope="module")
def code_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("src") / "mod.py"
    path.write_text(SOURCE)
    return path


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(make_chat_model(tmp_path_factory.mktemp("m") / "qwen2-test"))


def test_fibonacci_example_is_instruction_input_output_and_runs():
    """The lecture's unit-test sample, with its tests: they run and pass."""
    import contextlib
    import io

    ex = I.FIBONACCI_EXAMPLE
    assert set(ex) == {"instruction", "input", "output"}
    assert ex["output"].startswith("```python\n") and ex["output"].endswith("\n```")
    code = ex["output"][len("```python\n"):-len("```")]
    assert "assert fibonacci(10) == 55" in code
    ns, out = {}, io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, ns)  # our own constant, not untrusted code
    assert out.getvalue() == "All tests passed\n"
    assert [ns["fibonacci"](n) for n in range(8)] == [0, 1, 1, 2, 3, 5, 8, 13]


def test_harvest_keeps_self_contained_documented_functions(code_file):
    recs, skipped = I.functions_in_file(code_file)
    names = {r.name for r in recs}
    assert names == {"double", "hyp"}
    assert skipped["uses module globals"] == 1 and skipped["no docstring"] == 1
    hyp = next(r for r in recs if r.name == "hyp")
    assert hyp.source.startswith("import math")          # the import it needs travels with it
    double = next(r for r in recs if r.name == "double")
    assert double.doctests == [("double(4)", "8"), ("double(-1)", "-2")]


def test_four_kinds_are_built(code_file):
    ins = I.build_instruction_set([code_file], verify=False)
    kinds = ins.counts()
    assert kinds["codegen"] == 2 and kinds["explain"] == 2
    assert kinds["unittest"] == 1 and kinds["translate"] >= 1
    for s in ins.samples:
        assert {"instruction", "input", "output", "kind", "id"} <= set(s)
    ut = next(s for s in ins.samples if s["kind"] == "unittest")
    ns = {}
    exec(ut["input"] + "\n" + ut["output"], ns)   # our fixture's code: the tests pass against it
    ns["test_double"]()
    ex = next(s for s in ins.samples if s["kind"] == "explain" and "double" in s["output"])
    assert '"""' not in ex["input"] and "twice" in ex["output"]


def test_harvest_reads_real_files_and_in_memory_sources(code_file):
    import sysconfig

    from course_lib.data.repos import source_files

    root = sysconfig.get_paths()["stdlib"]
    paths = [f"{root}/{p}" for p in source_files(root) if p.endswith(".py") and "/" not in p][:60]
    recs, skipped = I.harvest_functions(paths, max_functions=20)
    assert len(recs) >= 5
    assert all(r.docstring for r in recs)
    assert sum(skipped.values()) > 0
    from_text, _ = I.harvest_functions([("fixture:mod.py", code_file.read_text())])
    assert {r.name for r in from_text} == {"double", "hyp"}
    assert {r.path for r in from_text} == {"fixture:mod.py"}


def test_corpus_sources_come_through_the_one_loader(monkeypatch):
    from course_lib.training import tinymodel

    repos = [tinymodel.RepoFiles("r", ["b.py", "a.py", "data.json"], ["x = 1\n", "y = 2\n", "{}"])]
    monkeypatch.setattr(tinymodel, "corpus_repositories", lambda profile="ci": (repos, "f" * 16))
    assert I.corpus_sources("ci") == [("r:b.py", "x = 1\n"), ("r:a.py", "y = 2\n")]


def test_to_javascript_simple_and_untranslatable():
    js = I.to_javascript("def f(n):\n    s = 0\n    for i in range(n):\n        s += i\n    return s\n")
    assert "for (let i = 0; i < n; i++)" in js and "let s = 0;" in js
    assert I.to_javascript("def g(x):\n    return [y for y in x]\n") is None
    if shutil.which("node"):
        out = subprocess.run(["node", "-e", js + "\nconsole.log(f(5))"], capture_output=True, text=True, timeout=30)
        assert out.stdout.strip() == "10"


def test_answer_only_mask(tokenizer):
    sample = {"instruction": "Write add.", "input": "", "output": "def add(a, b):\n    return a + b"}
    enc = I.tokenize_chat(sample, tokenizer)
    ids, labels, n = enc["input_ids"], enc["labels"], enc["prompt_len"]
    assert all(l == I.IGNORE_INDEX for l in labels[:n])
    assert labels[n:] == ids[n:]
    assert tokenizer.decode(ids[n:]) == sample["output"] + "<|im_end|>"
    assert tokenizer.decode(ids[:n]).endswith("<|im_start|>assistant\n")
    assert I.answer_only_labels([5, 6, 7], 2) == [-100, -100, 7]


def test_to_messages_needs_columns():
    with pytest.raises(KeyError, match="output"):
        I.to_messages({"id": "x1", "instruction": "hi"})


def test_packing_keeps_every_token():
    exs = [{"input_ids": list(range(n)), "labels": list(range(n))} for n in (5, 7, 3, 9, 2)]
    rows = I.pack_sequences(exs, max_len=10)
    assert all(len(r["input_ids"]) <= 10 for r in rows)
    assert sum(len(r["input_ids"]) for r in rows) == 26
    assert rows[0]["position_ids"] == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5, 6][:len(rows[0]["input_ids"])]
    assert 0 < I.packing_efficiency(rows, 10) <= 1


def test_mask_html_colours_prompt_and_answer(tokenizer):
    enc = I.tokenize_chat({"instruction": "Hi", "input": "", "output": "x = 1"}, tokenizer)
    page = I.mask_html(tokenizer, enc["input_ids"], enc["labels"])
    assert "#e6e6e6" in page and "#c8f7c5" in page


def test_references_pass_in_the_sandbox(code_file):
    from course_lib.evaluation import sandbox

    backend = sandbox.preferred_backend()
    assert backend is not None, "no sandbox backend works here: run ./course setup"
    ins = I.build_instruction_set([code_file], verify=True,
                                  run_many=lambda items, **kw: sandbox.run_many(items, backend=backend, **kw))
    assert ins.verified_by == f"sandbox ({backend})"
    assert ins.counts().get("unittest") == 1


def test_without_a_sandbox_nothing_runs_and_it_says_so(code_file):
    ins = I.build_instruction_set([code_file], verify=True)
    assert ins.verified_by.startswith("not executed (no sandbox given")
    assert ins.counts().get("unittest") == 1          # kept, unverified: nothing was dropped


def test_verify_samples_uses_the_given_run_many_and_the_profile_timeout(code_file):
    from unittest.mock import create_autospec

    from course_lib.evaluation import sandbox
    from course_lib.profiles import get_profile
    from tests._drill_standins import FakeResult

    recs, _ = I.functions_in_file(code_file)
    samples = [I.codegen_sample(r) for r in recs]
    fake = create_autospec(sandbox.run_many, side_effect=lambda items, **kw: [
        FakeResult("passed" if i == 0 else "failed") for i, _ in enumerate(items)])
    limit = get_profile().sandbox.timeout_s
    ok, reasons, verified_by = I.verify_samples(samples, {r.name + "@" + r.path: r for r in recs}, run_many=fake,
                                                timeout_s=limit)
    assert ok == [True, False] and reasons == ["", "failed"]
    assert fake.call_args.kwargs["timeout_s"] == limit           # the caller's limit reaches the sandbox
    assert verified_by == "sandbox (stand-in)"

