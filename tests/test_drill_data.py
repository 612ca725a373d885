"""The drill's data: the tiny-codes-shaped generator, the hub loader on local files, code extraction."""
from __future__ import annotations

import json

import pytest

from course_lib.drill import download, taskgen
from course_lib.evaluation.extract import extract_code, find_code_blocks, has_fenced_code
from course_lib.paths import assets_dir


def test_generator_is_deterministic_with_exactly_the_hub_columns():
    rows_a, tests_a = taskgen.generate_rows(n_per_combo=2, n_other_language=5, seed=1)
    rows_b, tests_b = taskgen.generate_rows(n_per_combo=2, n_other_language=5, seed=1)
    assert rows_a == rows_b and tests_a == tests_b
    assert all(tuple(r) == taskgen.HUB_COLUMNS for r in rows_a)
    assert len({r["idx"] for r in rows_a}) == len(rows_a)
    assert sum(r["programming_language"] != "Python" for r in rows_a) == 5


def test_reference_answers_pass_their_hidden_tests():
    rows, tests = taskgen.generate_rows(n_per_combo=1, n_other_language=0, defect_rates={}, format_defect_rates={},
                                        seed=3)
    by_idx = {t["idx"]: t for t in tests}
    for row in rows:
        namespace: dict = {}
        exec(extract_code(row["response"]) + by_idx[row["idx"]]["tests"], namespace)  # our own code


def test_holdout_combinations_cover_every_operation_and_filter_in_training():
    combos = taskgen.task_combinations()
    assert taskgen.HOLDOUT <= set(combos)
    train = [c for c in combos if c not in taskgen.HOLDOUT]
    for fam, op, flt in taskgen.HOLDOUT:
        assert any(c[0] == fam and c[1] == op for c in train), (fam, op)
        assert any(c[0] == fam and c[2] == flt for c in train), (fam, flt)


def test_committed_sample_matches_the_generator(tmp_path):
    paths = taskgen.write_tiny_codes_sample(tmp_path)
    for key, name in (("rows", "tiny_codes_sample.jsonl"), ("tests", "hidden_tests.jsonl"), ("split", taskgen.SPLIT_FILE)):
        assert paths[key].read_bytes() == assets_dir("tiny_codes", name).read_bytes(), name
    tests = taskgen.load_hidden_tests(paths["tests"])
    n_holdout = sum(t["holdout"] for t in tests.values())
    assert n_holdout >= 200 and len(tests) - n_holdout >= 1000   # ci eval_size / train_size
    split = json.loads(paths["split"].read_text())
    assert {part: set(ids) for part, ids in split.items()} == {
        part: {i for i, t in tests.items() if t["eval_part"] == part} for part in taskgen.EVAL_PARTS}


def test_training_rows_carry_each_defect_at_its_stated_rate_and_eval_rows_none():
    rows, tests = taskgen.generate_rows()
    by_idx = {r["idx"]: r for r in rows}
    train = [t for t in tests if not t["holdout"]]
    for defect, rate in {**taskgen.DEFECT_RATES, **taskgen.FORMAT_DEFECT_RATES}.items():
        marked = [t for t in train if t["defect"] == defect]
        assert len(marked) == round(rate * len(train)), defect
    assert not any(t["defect"] for t in tests if t["holdout"])
    broken = 0
    for t in train:
        resp = by_idx[t["idx"]]["response"]
        code = extract_code(resp)
        blocks = find_code_blocks(resp)
        if t["defect"] in ("prose only", "other language", "wrong fence tag"):
            assert code is None, t
        elif t["defect"] == "truncated":
            assert code is not None and not has_fenced_code(resp)
        elif t["defect"] == "wrong code":
            ns: dict = {}
            exec(code, ns)  # our own generated code
            with pytest.raises(AssertionError):
                exec(t["tests"], ns)
        elif t["defect"] == "does not run":
            ns = {}
            with pytest.raises((SyntaxError, NameError)):
                exec(code + t["tests"], ns)
            broken += 1
        else:   # clean rows and the format defects: the code itself is right
            exec(code + t["tests"], {})  # our own generated code
        if t["defect"] == "wrong fence tag":
            assert blocks[0].tag in ("javascript", "js", "java", "ruby") and "def " in blocks[0].code
        if t["defect"] == "several fences":
            assert [b.tag for b in blocks] == ["python", "python"]
        if t["defect"] == "shell block":
            assert [b.tag for b in blocks] == ["python", "bash"]
        if t["defect"] == "markdown headings":
            assert resp.startswith("## ") and "\n### " in resp
        if t["defect"] == "prose after code":
            assert len(resp.rsplit("```", 1)[1]) > 300
    assert broken


def test_eval_has_new_instances_and_held_out_combinations():
    rows, tests = taskgen.generate_rows()
    train_names = {t["entry_point"] for t in tests if not t["holdout"]}
    train_tests = {line.split(" == ")[0].split("(", 1)[1] for t in tests if not t["holdout"]
                   for line in t["tests"].splitlines()}
    new = [t for t in tests if t["eval_part"] == "new instances"]
    held = [t for t in tests if t["eval_part"] == "held-out combinations"]
    assert len(new) >= 100 and len(held) >= 100
    train_combos = {(t["family"], t["operation"], t["filter"]) for t in tests if not t["holdout"]}
    assert all((t["family"], t["operation"], t["filter"]) in train_combos for t in new)
    assert not any((t["family"], t["operation"], t["filter"]) in train_combos for t in held)
    assert not {t["entry_point"] for t in new} & train_names
    new_values = {line.split(" == ")[0].split("(", 1)[1] for t in new for line in t["tests"].splitlines()}
    assert len(new_values - train_tests) >= 0.9 * len(new_values)   # mostly fresh test values


def test_names_do_not_tell_the_task():
    """A majority vote over name tokens, learnt on the training rows, guesses the eval rows' operation
    and filter no better than chance (the most common label), on both eval parts; the same guesser reads
    task-telling names (`word_<operation>_<filter>`, the sample's earlier scheme) almost perfectly."""
    rows, tests = taskgen.generate_rows()
    train = [t for t in tests if not t["holdout"]]
    for part in taskgen.EVAL_PARTS:
        evals = [t for t in tests if t["eval_part"] == part]
        for label in ("operation", "filter"):
            got = taskgen.name_guess_accuracy(train, evals, label)
            assert got["rows"] >= 100 and got["accuracy"] <= got["chance"] + 0.06, (part, label, got)
            telling = [{**t, "entry_point": f"w{t['idx'] % 7}_{t['operation']}_{t['filter']}"} for t in train + evals]
            leak = taskgen.name_guess_accuracy(telling[:len(train)], telling[len(train):], label)
            if part == "new instances":   # (held-out combinations: unseen pairs, each token still votes right)
                assert leak["accuracy"] >= 0.9, (part, label, leak)


def test_names_are_many_and_drawn_from_words_that_are_not_the_task():
    """Names come from a word pool, never from the task grammar's words; the new-instances part's words
    never occur in training; the instruction says what to compute."""
    rows, tests = taskgen.generate_rows()
    by_idx = {r["idx"]: r for r in rows}
    train_names = {t["entry_point"] for t in tests if not t["holdout"]}
    assert len(train_names) >= 500
    assert not set(taskgen.EVAL_NAME_WORDS) & set(taskgen.NAME_WORDS)
    assert not (set(taskgen.NAME_WORDS) | set(taskgen.EVAL_NAME_WORDS)) & taskgen.TASK_WORDS
    for t in tests:
        words = set(taskgen.name_tokens(t["entry_point"]))
        assert not words & taskgen.TASK_WORDS, t["entry_point"]
        pool = taskgen.EVAL_NAME_WORDS if t["eval_part"] == "new instances" else taskgen.NAME_WORDS
        assert {w for w in words if not w.isdigit()} <= set(pool), t["entry_point"]
        op, flt = taskgen._describe(t["family"], t["operation"], t["filter"])
        arg = t["signature"].split("(")[1].rstrip("):")
        assert op in by_idx[t["idx"]]["prompt"] and flt.format(arg=arg) in by_idx[t["idx"]]["prompt"]


def test_eval_split_takes_equal_parts(tmp_path):
    stream = download.stream_tiny_codes(data_files=[assets_dir("tiny_codes", "tiny_codes_sample.jsonl")])
    is_eval = download.eval_split_predicate(assets_dir("tiny_codes", taskgen.SPLIT_FILE))
    train, evals = download.split_python_rows(stream, 1000, 200, is_eval=is_eval)
    download.attach_hidden_tests(evals, assets_dir("tiny_codes", "hidden_tests.jsonl"))
    parts = [r["eval_part"] for r in evals]
    assert parts.count("new instances") == parts.count("held-out combinations") == 100


def _hub_like_rows(n=12):
    rows = []
    for i in range(n):
        lang = "Python" if i % 3 else "JavaScript"
        rows.append({c: f"{c} {i}" for c in taskgen.HUB_COLUMNS} | {
            "idx": i, "programming_language": lang, "response": f"```python\nprint({i})\n```"})
    return rows


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_hub_loader_streams_local_files(tmp_path, fmt):
    import pandas as pd

    df = pd.DataFrame(_hub_like_rows())
    path = tmp_path / f"train-00000-of-00001.{fmt}"
    if fmt == "parquet":
        df.to_parquet(path)
    else:
        df.to_json(path, orient="records", lines=True)
    stats: dict = {}
    train, evals = download.split_python_rows(download.stream_tiny_codes(data_files=[path]), 5, 2, stats=stats)
    assert (len(train), len(evals)) == (5, 2) and stats["other_language"] >= 1
    assert not {r["idx"] for r in train} & {r["idx"] for r in evals}
    # the same rows in another order give the same split (hash of idx, not arrival order)
    rows = list(download.stream_tiny_codes(data_files=[path]))
    python = [r for r in rows if download.is_python(r)][:7]
    t2, e2 = download.split_python_rows(list(reversed(python)), 5, 2)
    assert {r["idx"] for r in e2} == {r["idx"] for r in evals}


def test_missing_column_is_named(tmp_path):
    bad = [{k: v for k, v in r.items() if k != "response"} for r in _hub_like_rows(3)]
    with pytest.raises(ValueError, match="response"):
        download.split_python_rows(bad, 1, 1)


def test_gated_dataset_refusal_says_a_token_is_needed(monkeypatch):
    import datasets

    def refuse(*a, **k):
        raise ConnectionError("401 Client Error: Unauthorized. Access to dataset nampdn-ai/tiny-codes is "
                              "restricted. You must have access to it and be authenticated to access it.")
    monkeypatch.setattr(datasets, "load_dataset", refuse)
    with pytest.raises(download.GatedDatasetError, match="HF_TOKEN"):
        next(download.stream_tiny_codes("nampdn-ai/tiny-codes"))


@pytest.mark.parametrize("answer, code", [
    ("```python\nx = 1\n```", "x = 1\n"),
    ("text\n```\nx = 1\n```\nmore", "x = 1\n"),                                  # untagged
    ("```py\nx = 1\n```", "x = 1\n"),                                            # `py` does not leak
    ("```python\ndef f():\n    return 1\n```\nand\n```python\nprint(f())\n```",
     "def f():\n    return 1\n\nprint(f())\n"),                                   # several blocks
    ("```bash\npip install x\n```\n```python\nx = 1\n```", "x = 1\n"),            # other language dropped
    ("no code here", None), ("", None), ("```bash\nls\n```", None),
    ("```python\nx = 1\ny = 2", "x = 1\ny = 2\n"),                               # unclosed (truncated)
    ("````python\nx = 1\n````", "x = 1\n"),                                      # four backticks
])
def test_extract_code(answer, code):
    assert extract_code(answer) == code


def test_fence_format_and_big_answers():
    assert has_fenced_code("```python\nx = 1\n```")
    assert not has_fenced_code("```python\nx = 1")        # never closed: not format-compliant
    assert not has_fenced_code("x = 1")
    big = "word " * 25_000 + "\n```python\nprint(1)\n```\n"
    assert extract_code(big) == "print(1)\n" and len(find_code_blocks(big)) == 1
