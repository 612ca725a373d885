"""The RL datum, multi-harness randomisation and token pass-through."""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from course_lib.agentic.harness import (
    CONTEXT_MODES,
    CONTROL_FLOWS,
    PROTOCOLS,
    RLDatum,
    format_call,
    make_rl_datum,
    parse_call,
    perturb_tool_output,
    retokenize,
    sample_harness,
    token_mismatch,
)
from course_lib.agentic.rule_rewards import ToolCall, Trajectory, malformed_calls, rule_reward

CALLS = [ToolCall("read_file", json.dumps({"path": "src/calc.py"})),
         ToolCall("edit_file", json.dumps({"path": "src/calc.py", "patch": "return a + b  # fix \"x\""})),
         ToolCall("run_tests", json.dumps({"cmd": "pytest -q tests/test_calc.py"}))]
SCHEMAS = {"read_file": ["path"], "edit_file": ["path", "patch"], "run_tests": ["cmd"]}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_protocol_round_trips_to_the_same_canonical_call(protocol):
    for call in CALLS:
        text = format_call(call, protocol)
        back = parse_call(text, protocol)
        assert back.name == call.name and json.loads(back.arguments) == json.loads(call.arguments)


def test_the_reward_does_not_depend_on_the_harness():
    """The same actions written by three harnesses: parsed to canonical calls, the reward is the same."""
    rewards = set()
    for protocol in PROTOCOLS:
        calls = [parse_call(format_call(c, protocol), protocol) for c in CALLS]
        traj = Trajectory("fixed", calls, ["src/calc.py"], {"t1": True, "t2": True})
        rewards.add(rule_reward(traj, ["t1"], ["t2"], ["src/calc.py"], SCHEMAS)["reward"])
        assert malformed_calls(calls, SCHEMAS) == 0
    assert len(rewards) == 1


def test_text_of_another_protocol_is_a_malformed_call():
    with pytest.raises(ValueError, match="not a xml tool call"):
        parse_call(format_call(CALLS[0], "json"), "xml")
    with pytest.raises(ValueError, match="not a json tool call"):
        parse_call(format_call(CALLS[0], "cli"), "json")
    with pytest.raises(ValueError, match="unknown protocol"):
        parse_call("x", "yaml")


def test_harness_randomisation_covers_every_choice_and_perturbs_at_its_rate():
    rng = np.random.default_rng(0)
    draws = [sample_harness(rng, perturb=0.25) for _ in range(2000)]
    for key, choices in [("protocol", PROTOCOLS), ("context", CONTEXT_MODES), ("control", CONTROL_FLOWS)]:
        counts = {c: sum(d[key] == c for d in draws) for c in choices}
        assert min(counts.values()) > 2000 / len(choices) * 0.85, counts
    rate = np.mean([len(d["perturbations"]) for d in draws]) / 2
    assert rate == pytest.approx(0.25, abs=0.03)
    out = perturb_tool_output("x" * 200, "truncated_output", keep_chars=50)
    assert out.startswith("x" * 50) and "truncated" in out and len(out) < 100
    assert perturb_tool_output("ok", "dependency_error").endswith("ok")


def test_an_rl_datum_needs_every_piece_and_an_accepted_environment():
    task = SimpleNamespace(name="calc", issue="add() subtracts")
    good = SimpleNamespace(ok=True, fail_to_pass=["t1"], reasons=[])
    d = make_rl_datum(task, good, harness="xml", verifier=lambda patch: {"t1": bool(patch)})
    assert d.harness == "xml" and "<read_file>" in d.system_prompt and d.verifier("x") == {"t1": True}
    with pytest.raises(ValueError, match="rejected"):
        make_rl_datum(task, SimpleNamespace(ok=False, fail_to_pass=[], reasons=["collected 0%"]))
    with pytest.raises(ValueError, match="no Fail-to-Pass"):
        make_rl_datum(task, SimpleNamespace(ok=True, fail_to_pass=[], reasons=[]))
    with pytest.raises(ValueError, match="verifier"):
        RLDatum("calc", {"read_file": ["path"]}, "json", "tools ...", "fix it", None).validate()
    with pytest.raises(ValueError, match="harness"):
        RLDatum("calc", {"read_file": ["path"]}, "yaml", "tools ...", "fix it", lambda p: {}).validate()


def test_text_round_trips_can_change_the_sampled_tokens():
    """A byte-level stand-in: the sampler emitted bytes that are not valid UTF-8; through text they
    come back as other ids. Passing the ids through keeps them."""
    decode = lambda ids: bytes(ids).decode("utf-8", errors="replace")
    encode = lambda text: list(text.encode("utf-8"))
    sampled = list("ok ".encode()) + [0xE6, 0xBC] + list(" done".encode())   # a cut multi-byte character
    back = retokenize(sampled, decode, encode)
    assert back != sampled and token_mismatch(sampled, back)["first_diff"] == 3
    assert token_mismatch(sampled, list(sampled))["first_diff"] is None


def test_bpe_retokenisation_merges_a_split_the_sampler_made():
    from course_lib.training.tinymodel import to_transformers_tokenizer, train_tokenizer

    tok = to_transformers_tokenizer(train_tokenizer(["return value\n", "def f():\n    return 1\n"] * 50, vocab_size=300))
    encode = lambda text: tok.encode(text, add_special_tokens=False)
    whole = encode("return")
    split = encode("ret") + encode("urn")                       # a valid sample, not the canonical one
    assert len(whole) == 1 and split != whole
    assert retokenize(split, tok.decode, encode) == whole        # through text: ids the sampler never chose
    assert token_mismatch(split, whole)["first_diff"] == 0
