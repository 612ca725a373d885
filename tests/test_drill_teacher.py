"""The drill's ci teacher (course_lib.training.rule_teacher): it writes code and tests from the instruction
alone, as the lecture's Qwen3-30B-A3B does, and the drill's pipeline never sees a hidden test."""
from __future__ import annotations

import json

import pytest

from course_lib.drill import taskgen
from course_lib.evaluation import sandbox
from course_lib.evaluation.extract import extract_code
from course_lib.training import codegen
from course_lib.training import rule_teacher as rt


@pytest.fixture(scope="module")
def sample():
    rows, tests = taskgen.generate_rows()
    by_idx = {t["idx"]: t for t in tests}
    return [(r, by_idx[r["idx"]]) for r in rows if r["programming_language"] == "Python"]


def test_the_rules_read_every_instruction_of_the_sample_and_write_correct_code(sample):
    """Every Python row's prompt is read; the code the rules write passes the row's hidden tests (checked
    here only: the teacher never gets them) and the teacher's own tests; the standardised instruction
    reads back to the same task."""
    for row, t in sample:
        spec = rt.read_instruction(row["prompt"])
        if t["eval_part"] == "new instances":   # eval wordings are not the training templates the rules read;
            continue                            # the pipeline never gets an eval row
        assert spec is not None, row["prompt"]
        assert (spec.name, spec.arg) == (t["entry_point"], t["signature"][4:].split("(")[1].rstrip("):"))
        assert rt.read_instruction(rt.standard_instruction(spec)) == spec
        code = rt.write_code(spec)
        namespace: dict = {}
        exec(code + t["tests"] + rt.write_tests(spec), namespace)   # our own generated code


def test_the_teachers_tests_are_its_own_and_catch_wrong_code(sample):
    """The teacher's tests use its own inputs (only the trivial ones — empty, 0, 1 — also occur in hidden
    tests) and fail the sample's "wrong code" answers (another operation) for most rows."""
    def inputs(tests: str) -> set[str]:
        return {line.split("(", 1)[1].rsplit(") == ", 1)[0] for line in tests.splitlines()}

    hidden_inputs = set().union(*(inputs(t["tests"]) for _, t in sample))
    caught = wrong = 0
    for row, t in sample:
        spec = rt.read_instruction(row["prompt"])
        if spec is None:                        # a new-instances wording (not a training template)
            continue
        own = rt.write_tests(spec)
        assert inputs(own) & hidden_inputs <= {"[]", "''", "0", "1"}, inputs(own) & hidden_inputs
        if t["defect"] == "wrong code":
            wrong += 1
            namespace: dict = {}
            try:
                exec(extract_code(row["response"]) + own, namespace)   # our own generated code
            except AssertionError:
                caught += 1
    assert wrong and caught >= 0.9 * wrong, (caught, wrong)


@pytest.mark.parametrize("text", [
    "Write a Python function `f(xs)` that takes a list of integers and returns the vowels of the numbers.",
    "Write a Python function `f(s)` that takes a string and returns the sum of the even characters.",
    "Write a Python function that takes a list of integers and returns the sum of all the numbers.",  # no name
    "Build a Python module snippet that Checks Extreme Travel: Local Attractions for Engineers.",
])
def test_what_the_rules_cannot_read_gets_no_code(text):
    assert rt.read_instruction(text) is None
    teacher = rt.RuleTeacher()
    assert teacher.synthesize(teacher.standardize(text)) == rt.CANNOT_WRITE


def test_the_rule_teacher_takes_no_references():
    with pytest.raises(TypeError, match="no reference"):
        rt.RuleTeacher().register([("1", "Write …", "def f(): pass", "assert f() is None")])


def test_the_auditor_scores_with_its_own_tests():
    spec = rt.read_instruction("Write a Python function `castle(nums)` that takes a list of integers and "
                               "returns the sum of the even numbers.")
    teacher = rt.RuleTeacher(run_code=sandbox.run_code)
    good = teacher.audit(rt.standard_instruction(spec), rt.write_code(spec))
    assert good["score"] >= 7 and "the teacher's own 4 tests" in good["feedback"]
    wrong = teacher.audit(rt.standard_instruction(spec), rt.write_code(spec).replace("% 2 == 0", "% 2 == 1"))
    assert wrong["score"] == 5 and wrong["feedback"].startswith("its tests fail")
    renamed = teacher.audit(rt.standard_instruction(spec), rt.write_code(spec).replace("castle", "other"))
    assert renamed["score"] < 7                                   # the function the instruction names is missing


def test_the_pipeline_with_the_rule_teacher_never_reads_the_answers(sample):
    """Same rows with their answers replaced by garbage: the same kept rows, code and scores (the
    teacher writes from the instruction alone). A row it cannot read is dropped with the reason."""
    rows = [r for r, _ in sample[:12]]
    unreadable = {"idx": 99999, "prompt": "Build a Python module snippet that Checks Extreme Travel.",
                  "response": "```python\ndef f():\n    return 1\n```"}
    kept, report = codegen.run_codegen_pipeline(rows + [unreadable], run_code=sandbox.run_code,
                                                offline_teacher=rt.RuleTeacher, verbose=False)
    garbage = [{**r, "response": "no answer"} for r in rows]
    kept2, _ = codegen.run_codegen_pipeline(garbage, run_code=sandbox.run_code, offline_teacher=rt.RuleTeacher,
                                            verbose=False)
    assert [k["row_id"] for k in kept] == [str(r["idx"]) for r in rows]
    assert json.dumps(kept, sort_keys=True) == json.dumps(kept2, sort_keys=True)
    assert "NOT an LLM" in report.teacher and "instruction alone" in report.teacher
    assert all(k["quality_score"] >= 7 and "teacher's own" in k["feedback"] for k in kept)
    (drop,) = report.dropped
    assert drop["row_id"] == "99999" and drop["stage"] == "ThresholdSieve"


def test_codegen_json_does_not_depend_on_the_hidden_tests(tmp_path):
    """`drill --only-step download,pipeline --hidden-tests <an empty file>` writes the same codegen.json
    as with the real hidden tests: the pipeline never sees them (they are for evaluation and RL)."""
    from course_lib.drill import main

    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    outputs = {}
    for name, extra in (("real", []), ("empty", ["--hidden-tests", str(empty)])):
        root = tmp_path / name
        rc = main(["--root", str(root), "--only-step", "download,pipeline", "--train-size", "40",
                   "--eval-size", "6", "--quiet", *extra])
        assert rc == 0
        outputs[name] = (root / "data" / "codegen.json").read_bytes()
        train = json.loads((root / "data" / "train_python.json").read_text())
        assert all(bool(r.get("tests")) == (name == "real") for r in train)   # kept for RL rewards
    assert outputs["real"] == outputs["empty"]
    assert len(json.loads(outputs["real"])) == 40
