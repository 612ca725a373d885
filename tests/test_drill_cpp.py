"""The drill in C++ (issue 38): taskgen's C++ rendering judged by the C++ judge for every (family, operation,
filter), the committed C++ sample, cpp fences, the C++ rule teacher, and steps 1-5 with ``language="cpp"``."""
from __future__ import annotations

import json
import os
import random
import shutil
import sys
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).parent))

import _drill_standins as standins  # noqa: E402

from course_lib.drill import config, download, evaluate, inference, orchestrate, pipeline, taskgen  # noqa: E402
from course_lib.drill.outputs import DrillPaths, read_json_output  # noqa: E402
from course_lib.evaluation import extract  # noqa: E402
from course_lib.paths import assets_dir  # noqa: E402

needs_gpp = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed (`apt-get install g++`)")


def _backend_or_skip() -> str:
    from tests._sandbox_support import unavailable

    try:
        from course_lib.evaluation import sandbox

        return sandbox.resolve_backend(None)
    except Exception as exc:  # no backend here
        unavailable("bwrap", f"no real sandbox backend: {exc}")


ALL_SIGNATURE = ("std::string course_all(long long which, const std::vector<long long>& xs, long long n, "
                 "const std::string& text)")


def one_translation_unit(functions: list[tuple[str, str, str, str]]) -> tuple[str, list]:
    """One C++ source holding taskgen's rendering of each (family, op, filter, name) and a dispatcher
    ``course_all(which, xs, n, text)`` that calls function ``which`` on its family's argument and returns
    its answer as text (``n:`` + a number, ``s:`` + a string), so the C++ judge checks every rendering
    with one compile; and the cases (hidden-test inputs and fresh ones, expected from ``expected_value``)."""
    headers, bodies, branches, cases = {"string", "vector"}, [], [], []
    for i, (fam, op, flt, name) in enumerate(functions):
        arg = taskgen.FAMILIES[fam]["args"][i % len(taskgen.FAMILIES[fam]["args"])]
        var = next(v for v in taskgen.CPP_LOOP_VARS[fam][i % 4:] + taskgen.CPP_LOOP_VARS[fam] if v != arg)
        code = taskgen.render_code(fam, op, flt, name, arg, var, language="cpp")
        headers.update(line[len("#include <"):-1] for line in code.splitlines() if line.startswith("#include"))
        bodies.append("\n".join(line for line in code.splitlines() if not line.startswith("#include")))
        call = {"list": f"{name}(xs)", "range": f"{name}(n)", "string": f"{name}(text)"}[fam]
        number = taskgen.cpp_return_type(fam, op) == "long long"
        branches.append(f"    if (which == {i}) return " + (f'"n:" + std::to_string({call});' if number
                                                             else f'"s:" + {call};'))
        rng = random.Random(i)
        for v in taskgen._test_inputs(fam, rng) + taskgen.fresh_test_inputs(fam, rng, set(), language="cpp"):
            exp = taskgen.expected_value(fam, op, flt, v)
            args = (i, v if fam == "list" else [], v if fam == "range" else 0, v if fam == "string" else "")
            cases.append((args, ("n:" if isinstance(exp, int) else "s:") + str(exp)))
    source = ("".join(f"#include <{h}>\n" for h in sorted(headers)) + "\n" + "\n\n".join(bodies)
              + f"\n\n{ALL_SIGNATURE} {{\n" + "\n".join(branches) + '\n    return "none";\n}\n')
    return source, cases


# --- taskgen in C++ -----------------------------------------------------------------------------------

@needs_gpp
def test_every_cpp_rendering_compiles_and_passes_its_hidden_tests():
    from course_lib.evaluation.sandbox.cpp import run_cpp_tests

    backend = _backend_or_skip()
    combos = taskgen.task_combinations()
    source, cases = one_translation_unit([(f, o, k, f"task{i}") for i, (f, o, k) in enumerate(combos)])
    res = run_cpp_tests(source, ALL_SIGNATURE, cases, backend=backend)
    assert res.status == "passed", (res.status, res.detail, res.stderr[-2000:])
    assert res.tests == ["ok"] * len(cases) and len(cases) == 9 * len(combos)


def test_cpp_renderings_follow_the_grammar():
    for fam, op, flt in taskgen.task_combinations():
        code = taskgen.render_code(fam, op, flt, "castle", "xs", "v", language="cpp")
        decl = taskgen.cpp_declaration(fam, op, "castle", "xs")
        assert decl + " {" in code and code.endswith("    return result;\n}\n")
        from course_lib.evaluation.sandbox.cpp import parse_signature

        sig = parse_signature(decl)                 # the judge's types
        assert sig.name == "castle" and sig.params == (
            {"list": "std::vector<long long>", "range": "long long", "string": "std::string"}[fam],)
    assert "% 2 != 0" in taskgen.render_code("list", "sum", "odd", "f", "xs", "x", language="cpp")  # C++'s % keeps the sign
    with pytest.raises(ValueError, match="language"):
        taskgen.render_code("list", "sum", "odd", "f", "xs", "x", language="java")


def test_committed_cpp_sample_is_the_generators_output(tmp_path):
    paths = taskgen.write_tiny_codes_sample(tmp_path, language="cpp")
    for key, name in (("rows", "tiny_codes_sample.jsonl"), ("tests", "hidden_tests.jsonl"), ("split", taskgen.SPLIT_FILE)):
        assert paths[key].read_bytes() == assets_dir("tiny_codes_cpp", name).read_bytes(), name


def test_cpp_sample_has_the_python_samples_shape():
    rows, tests = taskgen.generate_rows(language="cpp")
    py_rows, py_tests = taskgen.generate_rows()
    assert all(tuple(r) == taskgen.HUB_COLUMNS for r in rows)
    assert len(tests) == len(py_tests)
    cpp_rows = [r for r in rows if r["programming_language"] == "C++"]
    assert len(cpp_rows) == len(tests) and len(rows) - len(cpp_rows) == 24        # other-language rows to drop
    assert {r["programming_language"] for r in rows} - {"C++"} <= {"Python", "JavaScript", "Rust", "Bash"}
    by_part = lambda ts: {p: sum(t["eval_part"] == p for t in ts) for p in ("", *taskgen.EVAL_PARTS)}  # noqa: E731
    assert by_part(tests) == by_part(py_tests)                                     # the same eval parts
    assert {t["defect"] for t in tests} == {t["defect"] for t in py_tests}         # the same defect kinds
    for t in tests:
        assert t["language"] == "cpp" and isinstance(t["tests"], list)
        assert all(taskgen.expected_value(t["family"], t["operation"], t["filter"], a) == e for a, e in t["tests"])
    clean = next(r for r in rows if r["idx"] == next(t["idx"] for t in tests if not t["defect"]))
    assert "```cpp\n" in clean["response"] and "C++ function" in clean["prompt"]


@needs_gpp
def test_cpp_defects_are_what_they_say():
    from course_lib.evaluation.sandbox.cpp import run_cpp_many

    backend = _backend_or_skip()
    rows, tests = taskgen.generate_rows(n_per_combo=2, n_new_per_combo=0, n_other_language=0, language="cpp",
                                        defect_rates={"wrong code": 0.1, "does not run": 0.1},
                                        format_defect_rates={})
    by_idx = {r["idx"]: r for r in rows}
    picked = [t for t in tests if t["defect"]][:12]
    items = [{"source": extract.extract_code(by_idx[t["idx"]]["response"], "cpp"), "signature": t["signature"],
              "cases": [tuple(c) for c in t["tests"]]} for t in picked]
    for t, res in zip(picked, run_cpp_many(items, workers=2, backend=backend)):
        want = {"wrong code": "failed", "does not run": "syntax_error"}[t["defect"]]
        assert res.status == want, (t, res.detail)


# --- extraction of cpp fences -------------------------------------------------------------------------

def test_extraction_of_cpp_fences():
    body = "#include <vector>\n\nlong long f(const std::vector<long long>& xs) {\n    return 0;\n}\n"
    for tag in ("cpp", "c++", "cc", "CPP", "cxx", ""):
        answer = f"Here:\n\n```{tag}\n{body}```\nDone."
        assert extract.extract_code(answer, "cpp") == body and extract.has_fenced_code(answer, "cpp"), tag
    assert extract.extract_code(f"```python\n{body}```", "cpp") is None       # another language's fence
    assert extract.extract_code(f"```cpp\n{body}```") is None                 # Python's default is unchanged
    assert not extract.has_fenced_code(f"```cpp\n{body}", "cpp")               # not closed: no FCR
    assert extract.extract_code(f"```cpp\n{body}", "cpp") == body              # but the code counts
    lead = extract.answer_lead_in(f"Sure.\n```cpp\n{body}```", "cpp")
    assert lead == "Sure.\n```cpp\n#include <vector>\n\n"                     # its #include lines stay
    assert extract.answer_lead_in("```cpp\nint x = f(2);\n```", "cpp") is None
    with pytest.raises(ValueError, match="language"):
        extract.extract_code(body, "java")


def test_signature_prefix_in_cpp_keeps_the_includes_and_gives_the_declaration():
    row = {"signature": "long long f(const std::vector<long long>& xs)", "tests": [[[1], 1]],
           "programming_language": "C++"}
    free = "```cpp\n#include <vector>\n#include <numeric>\n\nint g(std::vector<int> v) {\n"
    assert inference.signature_prefix(row, free) == ("```cpp\n#include <vector>\n#include <numeric>\n\n"
                                                    "long long f(const std::vector<long long>& xs) {\n")
    assert inference.signature_prefix(row, "no code") == ("```cpp\n#include <vector>\n\n"
                                                          "long long f(const std::vector<long long>& xs) {\n")
    py = {"signature": "def f(xs):", "tests": "assert f([1]) == 1\n"}
    assert inference.signature_prefix(py) == "```python\ndef f(xs):\n"          # Python unchanged


# --- the C++ rule teacher -----------------------------------------------------------------------------

def test_cpp_rule_teacher_reads_every_cpp_row_and_only_those():
    from course_lib.training.rule_teacher_cpp import read_cpp_instruction, standard_cpp_instruction

    rows, tests = taskgen.generate_rows(n_per_combo=1, n_new_per_combo=1, n_other_language=6, language="cpp")
    by_idx = {t["idx"]: t for t in tests}
    for r in rows:
        found = read_cpp_instruction(r["prompt"])
        if r["idx"] not in by_idx:
            assert found is None
            continue
        t = by_idx[r["idx"]]
        if t["eval_part"] == "new instances":   # eval-only wordings (CPP_EVAL_PROMPTS): never given to the teacher
            continue
        spec, decl = found
        assert decl == t["signature"] and spec.op == t["operation"]
        assert read_cpp_instruction(standard_cpp_instruction(spec, decl))[1] == decl
    # types that do not fit the task are not guessed
    assert read_cpp_instruction("Write a C++ function `std::string f(const std::vector<long long>& xs)` that takes "
                                "a list of integers and returns the sum of all the numbers.") is None


@needs_gpp
def test_cpp_rule_teachers_kept_rows_pass_the_hidden_tests(tmp_path):
    """Step 2 in C++ with the real LazyLLM pipeline and the real C++ judge: what the teacher keeps passes
    the rows' hidden tests (which it never saw)."""
    from course_lib.evaluation.sandbox.cpp import run_cpp_many

    backend = _backend_or_skip()
    cfg = config.config_from_profile("ci", paths=DrillPaths.under(tmp_path), language="cpp", train_size=10,
                                     eval_size=2, sandbox_backend=backend)
    cfg.paths.make()
    download.step_download(cfg)
    info = pipeline.step_pipeline(cfg)
    train = {r["prompt"]: r for r in read_json_output(cfg.paths.train_json, "download")}
    kept = read_json_output(cfg.paths.codegen_json, "pipeline")
    clean = [r for r in train.values() if "```cpp" in r["response"]]
    assert info["input"] == 10 and len(kept) >= len(clean) - 1 and kept
    items = [{"source": k["output"], "signature": train[k["instruction"]]["signature"],
              "cases": [tuple(c) for c in train[k["instruction"]]["tests"]]} for k in kept]
    results = run_cpp_many(items, workers=2, backend=backend)
    assert [r.status for r in results] == ["passed"] * len(kept), [r.detail for r in results]
    funnel = json.loads((cfg.paths.data_dir / "codegen_funnel.json").read_text())
    assert "C++" in funnel["report"]["teacher"]


# --- the drill's settings ------------------------------------------------------------------------------

def test_cpp_config_has_its_own_folder_sample_and_no_rl_or_humaneval(tmp_path, capsys):
    cfg = config.config_from_profile("ci", language="cpp")
    assert cfg.paths.data_dir.parent.name == "ci-cpp" and cfg.paths.train_json.name == "train_cpp.json"
    assert Path(cfg.data_files[0]).parent.name == "tiny_codes_cpp" and cfg.humaneval_subset == 0
    py = config.config_from_profile("ci")
    assert py.paths.data_dir.parent.name == "ci" and py.paths.train_json.name == "train_python.json"
    with pytest.raises(ValueError, match="Python-only"):
        config.config_from_profile("ci", language="cpp", use_rl=True)
    with pytest.raises(ValueError, match="HumanEval"):
        config.config_from_profile("ci", language="cpp", humaneval_subset=5)
    with pytest.raises(ValueError, match="language"):
        config.config_from_profile("ci", language="java")
    from course_lib.drill import command

    args = command.build_parser().parse_args(["--language", "cpp", "--root", str(tmp_path)])
    cfg = command.config_from_args(args)
    assert cfg.language == "cpp" and not cfg.use_rl and cfg.paths.eval_json == tmp_path / "data" / "eval_cpp.json"
    assert "Python-only" in capsys.readouterr().err                    # said, not silently dropped
    assert command.main(["--language", "cpp", "--only-step", "rl", "--root", str(tmp_path)]) == 2


def test_download_keeps_cpp_rows(tmp_path):
    cfg = config.config_from_profile("ci", paths=DrillPaths.under(tmp_path), language="cpp", train_size=40,
                                     eval_size=10)
    cfg.paths.make()
    info = download.step_download(cfg)
    train, evals = read_json_output(cfg.paths.train_json, "download"), read_json_output(cfg.paths.eval_json, "download")
    assert (len(train), len(evals)) == (40, 10) and info["cpp"] == info["seen"] - info["other_language"]
    assert info["other_language"] == 24
    assert all(r["programming_language"] == "C++" for r in train + evals)
    assert {r["eval_part"] for r in evals} == set(taskgen.EVAL_PARTS)
    assert all(r["signature"] and isinstance(r["tests"], list) for r in evals)
    assert "HIDDEN TESTS" in download.hidden_tests_text(evals[0]) and "==" in download.hidden_tests_text(evals[0])


@needs_gpp
def test_cpp_answers_get_the_lessons_categories():
    backend = _backend_or_skip()
    sig = "long long f(const std::vector<long long>& xs)"
    good = "```cpp\n#include <vector>\n\nlong long f(const std::vector<long long>& xs) {\n    long long s = 0;\n" \
           "    for (long long x : xs) s += x;\n    return s;\n}\n```"
    records = [
        {"idx": 0, "response": good, "tests": [[[1, 2], 3], [[], 0]], "entry_point": "f", "signature": sig,
         "signature_response": good},
        {"idx": 1, "response": good.replace("s += x;", "s += x"), "tests": [[[1, 2], 3]], "entry_point": "f",
         "signature": sig, "signature_response": good},                 # does not compile; given: right
        {"idx": 2, "response": "no code here", "tests": [[[1], 1]], "entry_point": "f", "signature": sig},
        {"idx": 3, "response": good.replace("return s;", "return s + 1;"), "tests": [[[1], 1]], "entry_point": "f",
         "signature": sig},                                              # builds, wrong
        {"idx": 4, "response": "```cpp\n#include <cstdlib>\nstruct A { A() { std::abort(); } } a;\n```"},
    ]
    rows = evaluate.evaluate_answers(records, workers=2, backend=backend, language="cpp")
    assert [r["category"] for r in rows] == ["Pass", "SyntaxError", "NoCode", "Pass", "Fail"]
    assert [r["correct"] for r in rows] == [True, True, False, False, None]
    assert [r["correct_free"] for r in rows] == [True, False, False, False, None]
    assert rows[1]["sandbox_status"] == "syntax_error" and "expected" in rows[1]["error"]
    assert [r["defines_entry_point"] for r in rows] == [True, True, False, True, None]
    summary = evaluate.summarize(rows)
    assert summary["runs_but_wrong"] == 1 and summary["counts"]["SyntaxError"] == 1
    with pytest.raises(ValueError, match="eval row 7: .*tiny_codes_cpp"):   # the Python sample's tests given
        evaluate.evaluate_answers([{"idx": 7, "response": good, "tests": "assert f([1]) == 1\n", "signature": sig}],
                                  backend=backend, language="cpp")


# --- steps 1-5 end to end at toy size --------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_cpp_model(tmp_path_factory):
    rows = [json.loads(line) for line in open(assets_dir("tiny_codes_cpp", "tiny_codes_sample.jsonl"))][:200]
    return standins.make_tiny_model(tmp_path_factory.mktemp("tinycpp") / "model",
                                    [r["prompt"] + "\n" + r["response"] for r in rows])


@needs_gpp
def test_cpp_drill_steps_1_to_5_on_tiny_data_then_cached(tmp_path, tiny_cpp_model, monkeypatch):
    """Steps 1-5 with ``language="cpp"``: the real pipeline (C++ rule teacher) and the real C++ judge; SFT is
    the stand-in that copies the base model (the real LLaMA-Factory run is the slow test below)."""
    from unittest.mock import create_autospec

    from course_lib.drill import finetune
    from course_lib.training import sft

    backend = _backend_or_skip()
    calls: list = []
    monkeypatch.setattr(sft, "finetune", create_autospec(sft.finetune, side_effect=standins.make_fake_finetune(calls)))
    monkeypatch.setattr(finetune, "sft_executor", create_autospec(finetune.sft_executor,
                                                                  side_effect=standins.thread_pool))
    cfg = config.config_from_profile(
        "ci", language="cpp", paths=DrillPaths.under(tmp_path), train_size=8, eval_size=4, max_new_tokens=12,
        batch_size=4, sft_model=str(tiny_cpp_model), inference_workers=1, eval_workers=2, sandbox_backend=backend,
        timeout_s=5.0, inference_backend="transformers", answer_while_training=False)
    done = orchestrate.run_drill(cfg)
    assert list(done) == ["download", "pipeline", "sft", "inference", "evaluation"]
    metrics = orchestrate.load_metrics(cfg)
    assert set(metrics) == {"base", "raw_sft", "pipeline_sft"}
    for v, m in metrics.items():
        assert {"Pass@1", "FCR", "SER", "RSR", "PPL", "test pass@1", "test pass@1 (new instances)",
                "test pass@1 (held-out combinations)"} <= set(m) and "HumanEval pass@1" not in m
        rep = orchestrate.load_report(cfg, v)
        assert len(rep) == 4 and list(rep.columns) == evaluate.REPORT_COLUMNS
        answers = read_json_output(cfg.paths.output_for(v) / "inference_results.json", "inference")
        assert all(a["signature_response"].count(a["signature"] + " {") == 1 for a in answers)
    kept = read_json_output(cfg.paths.codegen_json, "pipeline")
    sft_rows = finetune._to_sft_rows(kept, "cpp")
    assert kept and all(r["output"].startswith("```cpp\n") and r["output"].endswith("}\n```") for r in sft_rows)
    assert (cfg.paths.output_dir / "drill_metrics.json").exists()          # the same file names as Python's
    assert not (cfg.paths.data_dir / "train_python.json").exists()
    again = orchestrate.run_drill(cfg)
    assert again["download"] == {"skipped": True} and again["pipeline"] == {"skipped": True}
    assert all(v == {"skipped": True} for v in again["inference"].values())


@pytest.mark.slow
@needs_gpp
def test_cpp_drill_end_to_end_with_real_sft(tmp_path, tiny_cpp_model):
    """download → pipeline → SFT (LLaMA-Factory, a few steps) → inference → evaluation, all real, in C++."""
    backend = _backend_or_skip()
    cfg = config.config_from_profile(
        "ci", language="cpp", paths=DrillPaths.under(tmp_path), train_size=12, eval_size=4, max_new_tokens=12,
        batch_size=4, sft_model=str(tiny_cpp_model), inference_workers=1, eval_workers=2, sandbox_backend=backend,
        timeout_s=5.0, inference_backend="transformers", answer_while_training=False,
        sft_overrides={"max_steps": 6, "per_device_train_batch_size": 4, "learning_rate": 5e-3})
    orchestrate.run_drill(cfg)
    metrics = orchestrate.load_metrics(cfg)
    assert set(metrics) == {"base", "raw_sft", "pipeline_sft"}
    assert all(m["samples"] == 4 for m in metrics.values())


def test_judge_reads_a_string_answer_that_ends_with_a_space():
    """A string task's answer can end with a space ("keep all" of "a1 B2 c3 "): a value, not a trailing
    separator (the C++ judge's reader failed such answers as a protocol error before issue 38's drill)."""
    from course_lib.evaluation.sandbox.cpp import _Reader, encode_value
    from course_lib.evaluation.sandbox.judge import Abort

    for ctype, value in (("std::string", "a "), ("std::string", " "), ("std::vector<std::string>", ["x ", " "])):
        r = _Reader(encode_value(ctype, value), [100])
        assert r.value(ctype) == value
        r.done()
    for ctype, data in (("std::string", b"2:ab "), ("long long", b"1 "), ("std::vector<std::string>", b"1 1:a ")):
        r = _Reader(data, [100])
        r.value(ctype)
        with pytest.raises(Abort, match="trailing"):
            r.done()
