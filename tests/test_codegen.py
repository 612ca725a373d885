"""Tests of course_lib.training.codegen / course_lib.training.teacher (lesson 05): the LazyLLM codegen pipeline with
the offline teacher, end to end on a few rows, and every kind of bad input."""
import json
import socket
import time

import pytest

from course_lib.evaluation import sandbox
from course_lib.profiles import get_profile
from course_lib.training import codegen, teacher

GOOD = {"idx": 10, "prompt": "Write a Python function to add two numbers. Keep it short.",
        "response": "Here you go:\n```python\ndef add(a, b):\n    \"\"\"Add.\"\"\"\n    return a + b\n```\nDone."}
PY_FENCE = {"idx": 11, "prompt": "Create a Python module snippet that squares a number.",
            "response": "```py\ndef square(x):\n    # square it\n    return x * x\n```"}
NOT_CODE = {"idx": 12, "prompt": "Write a Python function that greets.", "response": "Sorry, I cannot help."}
NO_RESPONSE = {"idx": 13, "prompt": "Write a function."}
NO_PROMPT = {"idx": 14, "response": "```python\nx = 1\n```"}
EMPTY_OUT = {"idx": 15, "prompt": "Write a function that returns 1.", "response": "   "}


def test_gpt2_is_registered_offline():
    import tiktoken

    codegen.register_offline_gpt2()
    assert tiktoken.get_encoding("gpt2").encode("hello world") == [31373, 995]


@pytest.mark.parametrize("value,expected", [(8, 8.0), ("8", 8.0), ("8.5", 8.5), ("9/10", 9.0),
                                            ("7 out of 10", 7.0), ("4/5", 8.0), ("great", None), (None, None)])
def test_parse_score(value, expected):
    assert codegen.parse_score(value) == expected


def test_repair_fence_leak():
    assert codegen.repair_fence_leak("py\ndef f():\n    pass") == ("def f():\n    pass",
                                                                    "fence tag 'py' leaked into the code: removed")
    code, note = codegen.repair_fence_leak("bash\nls -l")
    assert code == "bash\nls -l" and "not Python" in note
    assert codegen.repair_fence_leak("def f():\n    pass")[1] is None


def test_standardize_instruction_rules():
    text = teacher.standardize_instruction("Write a Python code snippet to Calculate the area. Consider edge cases.",
                                           "```python\ndef area(r):\n    return 3 * r * r\n```")
    head, _, rest = text.partition("\n")
    assert head == "Write a Python function to calculate the area."
    assert rest.startswith("```python\ndef area(r):")
    assert "def solution():" in teacher.standardize_instruction("Make something", "no code here")


def test_offline_teacher_audits_by_rules():
    assert teacher.audit_code("")["score"] == 0
    assert teacher.audit_code("def f(:\n")["score"] == 2
    good = teacher.audit_code('def f():\n    """Doc."""\n    return 1\n')
    assert good["score"] == 9 and "NOT executed (no sandbox given" in good["feedback"]   # only compiled


def _recording_run_code(status="passed", backend="stand-in"):
    """``sandbox.run_code``'s signature (autospec), answering ``status`` without running anything."""
    from unittest.mock import create_autospec

    from tests._drill_standins import FakeResult

    return create_autospec(sandbox.run_code, side_effect=lambda code, tests=None, **kw: FakeResult(
        status, stderr="AssertionError" if status == "failed" else "", duration_s=0.01, backend=backend))


def test_audit_code_runs_with_the_given_run_code():
    run_code = _recording_run_code("passed", backend="bwrap")
    res = teacher.audit_code("def f():\n    return 1\n", "assert f() == 1", run_code=run_code)
    assert res["score"] == 9 and "ran cleanly in the sandbox (bwrap," in res["feedback"]
    assert run_code.call_args.kwargs["timeout_s"] == get_profile().sandbox.timeout_s
    failed = teacher.audit_code("def f():\n    return 2\n", "assert f() == 1",
                                run_code=_recording_run_code("failed"), timeout_s=1.5)
    assert failed["score"] == 5 and failed["feedback"].startswith("its tests fail")

    def no_backend(code, tests=None, *, timeout_s=None, memory_mb=None, backend=None):
        raise RuntimeError("no sandbox backend works here (bwrap: missing)")

    assert "NOT executed (no sandbox backend" in teacher.audit_code("x = 1\n", run_code=no_backend)["feedback"]


def test_offline_teacher_and_pipeline_pass_run_code_on():
    run_code = _recording_run_code("passed")
    t = teacher.OfflineTeacher(run_code=run_code, sandbox_timeout_s=2.0)
    t.register([("1", "Write a Python function that returns 1.", "def f():\n    return 1\n", "assert f() == 1")])
    assert "ran cleanly" in t.audit("Write a Python function that returns 1.", "def f():\n    return 1\n")["feedback"]
    assert run_code.call_args.kwargs["timeout_s"] == 2.0
    run_code = _recording_run_code("passed", backend="recorded")
    kept, report = codegen.run_codegen_pipeline([GOOD], run_code=run_code, verbose=False)
    assert run_code.called and "sandbox-run auditor" in report.teacher
    assert "(recorded," in kept[0]["feedback"]


def test_pipeline_end_to_end_with_bad_rows():
    rows = [GOOD, NO_RESPONSE, PY_FENCE, NOT_CODE, NO_PROMPT, "oops", EMPTY_OUT]
    before = json.dumps(rows[:1])
    kept, report = codegen.run_codegen_pipeline(rows, run_code=sandbox.run_code, verbose=False)
    assert json.dumps(rows[:1]) == before                                  # inputs are not mutated
    assert [k["row_id"] for k in kept] == ["10", "11"]                     # order restored
    assert kept[1]["output"].startswith("def square")                      # py fence leak repaired
    assert all(k["quality_score"] >= 7 and "ran cleanly in the sandbox" in k["feedback"] for k in kept)
    assert kept[0]["standardized_instruction"].startswith("Write a Python function to add two numbers.")
    dropped = {d["row_id"]: d for d in report.dropped}
    assert set(dropped) == {"12", "13", "14", "#5", "15"}                 # every other row is accounted for
    assert "missing column 'response'" in dropped["13"]["reason"]
    assert "missing column 'prompt'" in dropped["14"]["reason"]
    assert dropped["15"]["reason"] == "empty response"
    assert dropped["12"]["stage"] == "ThresholdSieve" and "syntax error" in dropped["12"]["reason"]
    assert report.n_kept + len(report.dropped) == report.n_input == 7
    assert [s["stage"] for s in report.stages][1:] == list(codegen.STAGES)
    assert "NOT an LLM" in report.teacher
    assert any("'py' leaked" in n["note"] for n in report.notes)
    assert sum(report.score_histogram().values()) == 3


def _faulty_teacher(mode):
    base = teacher.OfflineTeacher()

    def respond(messages):
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
        user = messages[-1]["content"]
        if base.role_of(system) == "audit" and "square" in user:
            if mode == "not json":
                return "I think this code is fine, maybe an 8."
            if mode == "server error":
                raise RuntimeError("teacher crashed")
            return json.dumps({"score": mode, "feedback": "scored as text"})
        return base.respond(messages)

    return base, respond


@pytest.mark.parametrize("mode", ["8.5", "9/10"])
def test_string_scores_are_normalised_and_noted(mode):
    base, respond = _faulty_teacher(mode)
    srv = teacher.TeacherServer(respond)
    srv.teacher = base
    with srv:
        kept, report = codegen.run_codegen_pipeline([GOOD, PY_FENCE], server=srv, verbose=False)
        assert [k["row_id"] for k in kept] == ["10", "11"]
        assert any(n["row_id"] == "11" and "normalised" in n["note"] for n in report.notes)
        kept, report = codegen.run_codegen_pipeline([GOOD, PY_FENCE], server=srv, normalize_scores=False,
                                                    verbose=False)
    assert [k["row_id"] for k in kept] == ["10"]
    (d,) = report.dropped
    assert d["row_id"] == "11" and d["stage"] == "ThresholdSieve"
    assert any("int()" in n["note"] for n in report.notes)


def test_malformed_teacher_json_and_server_errors_are_reported():
    for mode, stage, words in [("not json", "ThresholdSieve", "not valid JSON"),
                               ("server error", "LogicIntegrityAuditor", "HTTP status 500")]:
        base, respond = _faulty_teacher(mode)
        srv = teacher.TeacherServer(respond)
        srv.teacher = base
        with srv:
            kept, report = codegen.run_codegen_pipeline([GOOD, PY_FENCE], server=srv, verbose=False)
        assert [k["row_id"] for k in kept] == ["10"], mode
        (d,) = report.dropped
        assert d["row_id"] == "11" and d["stage"] == stage and words in d["reason"], d


def test_teacher_down_is_reported_not_raised():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.time()
    kept, report = codegen.run_codegen_pipeline([GOOD, PY_FENCE], base_url=f"http://127.0.0.1:{port}/v1/",
                                                verbose=False)
    assert kept == [] and time.time() - t0 < 30
    assert {d["row_id"] for d in report.dropped} == {"10", "11"}
    assert all("unreachable" in d["reason"] for d in report.dropped)
    assert "DOWN" in report.teacher


@pytest.mark.slow
def test_teacher_timeout_is_reported():
    base = teacher.OfflineTeacher()

    def slow(messages):
        if base.role_of(messages[0]["content"]) == "synthesize" and "square" in messages[-1]["content"]:
            time.sleep(4)
        return base.respond(messages)

    srv = teacher.TeacherServer(slow)
    srv.teacher = base
    with srv:
        kept, report = codegen.run_codegen_pipeline([GOOD, PY_FENCE], server=srv, timeout_s=1.5, verbose=False)
    assert [k["row_id"] for k in kept] == ["10"]
    (d,) = report.dropped
    assert d["row_id"] == "11" and d["stage"] == "ScriptSynthesizer" and "timed out" in d["reason"]


def test_rubric_score():
    r = teacher.rubric_score
    assert r("no code") == 0 and r("syntax_error") == 2 and r("runtime_error", defines=True) == 4
    assert r("timeout") == 4 and r("failed", has_tests=True) == 5
    assert r("passed") == 7 and r("passed", defines=True, documented=True, has_tests=True) == 10
    assert r("not run", defines=True, documented=True, has_tests=True) == 9   # untested code never gets 10


def test_full_profile_talks_to_the_teacher_url(monkeypatch):
    """The full profile's path (a vLLM-style server named by $COURSE_TEACHER_URL), exercised against a
    scripted OpenAI-compatible server on 127.0.0.1 standing in for the LLM."""
    def scripted(messages):
        role = teacher.OfflineTeacher().role_of(messages[0]["content"])
        if role == "standardize":
            return "Write a Python function that adds two numbers.\n```python\ndef add(a, b):\n    ...\n```"
        if role == "synthesize":
            return "```python\ndef add(a, b):\n    return a + b\n```"
        return json.dumps({"score": 9, "feedback": "looks right"})

    with teacher.TeacherServer(scripted, model_name="Qwen/Qwen3-30B-A3B-Instruct-2507") as srv:
        monkeypatch.setenv("COURSE_TEACHER_URL", srv.url)
        kept, report = codegen.run_codegen_pipeline([{"idx": 1, "prompt": "add two numbers"}, NO_PROMPT],
                                                    profile="full", verbose=False)
    assert "vLLM server at" in report.teacher and srv.requests == 3
    assert [k["row_id"] for k in kept] == ["1"] and kept[0]["output"] == "def add(a, b):\n    return a + b"
    assert [d["row_id"] for d in report.dropped] == ["14"]      # no reference needed in full, a prompt is


def test_one_vllm_command_builder_serves_teacher_and_drill():
    from course_lib.evaluation.generation import VLLMKnobs
    from course_lib.evaluation.generation import vllm_server_command as drill_command
    from course_lib.training.teacher import VLLMTeacher, vllm_server_command

    teacher_cmd = VLLMTeacher(model="/m/teacher", port=8001).command()
    assert teacher_cmd == vllm_server_command("/m/teacher", port=8001, max_model_len=8192)
    assert teacher_cmd[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    drill_cmd = drill_command("/m/student", VLLMKnobs(2048, 0.5, 4, 4096, 256, 1, True, "float32"), port=8002)
    assert drill_cmd == vllm_server_command("/m/student", port=8002, max_model_len=2048,
                                            gpu_memory_utilization=0.5, max_num_seqs=4, max_num_batched_tokens=4096)
