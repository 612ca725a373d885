"""The RL datum, multi-harness randomisation and token pass-through (KAT-Coder-V2 / V2.5 systems).

* **The RL datum** (V2): every RL sample is 环境 + 工具集 + Harness/系统提示 + 任务指令 + verifier — an
  environment that was built and checked (lesson 08's :class:`~course_lib.agentic.envs.EnvReport`), the
  tools with their required arguments, the harness that renders them, the instruction, and the verifier
  that turns a patch into test results.
* **Multi-harness randomisation** (V2.5): the same task is trained under different tool-call protocols,
  context management and control flow, with perturbations (dependency errors, truncated output), so the
  policy does not depend on one harness. What must *not* change with the harness is the verifier and the
  reward: they read canonical :class:`ToolCall` objects, never one
  protocol's text.
* **Token pass-through** (V2.5): the sampler's token ids go to the trainer as they are (``/generate``);
  decoding them to text and tokenising again (or re-applying a chat template) can give other ids, so the
  trainer would score tokens the sampler never produced.

Introduced in lesson 08.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from course_lib.profiles import ProfileLike, resolve_profile


@dataclass
class ToolCall:
    """One tool call of a trajectory: the tool name, its raw (JSON) argument string and the turn
    (assistant message) it was made in. Introduced in lesson 08."""

    name: str
    arguments: str
    turn: int = 0


def malformed_calls(calls: Sequence[ToolCall], schemas: Mapping[str, Sequence[str]]) -> int:
    """Tool calls whose arguments are not a JSON object, name an unknown tool, or miss a required key
    (``schemas[name]`` lists the required keys). Introduced in lesson 08."""
    bad = 0
    for call in calls:
        try:
            args = json.loads(call.arguments)
        except (json.JSONDecodeError, TypeError):
            bad += 1
            continue
        if not isinstance(args, dict) or call.name not in schemas or any(k not in args for k in schemas[call.name]):
            bad += 1
    return bad


PROTOCOLS = ("json", "xml", "cli")
CONTEXT_MODES = ("full", "compressed")
CONTROL_FLOWS = ("one_call_per_turn", "parallel_calls")
PERTURBATIONS = ("dependency_error", "truncated_output")


@dataclass
class RLDatum:
    """One RL sample as KAT-Coder-V2 defines it: environment + tools + harness/system prompt +
    instruction + verifier. ``verifier(patch) -> {test id: passed}``. Introduced in lesson 08."""

    env: str
    tools: Mapping[str, Sequence[str]]
    harness: str
    system_prompt: str
    instruction: str
    verifier: Callable[[str], dict[str, bool]] | None = field(repr=False, default=None)

    def validate(self) -> "RLDatum":
        """Refuse a datum missing a piece: each missing part is named."""
        missing = [name for name, ok in [("env", bool(self.env)), ("tools", bool(self.tools)),
                                         ("harness", self.harness in PROTOCOLS),
                                         ("system_prompt", bool(self.system_prompt.strip())),
                                         ("instruction", bool(self.instruction.strip())),
                                         ("verifier", callable(self.verifier))] if not ok]
        if missing:
            raise ValueError(f"RL datum for {self.env or '?'} is missing or has an invalid {', '.join(missing)} "
                             f"(harness must be one of {PROTOCOLS})")
        return self


def make_rl_datum(task, report, *, harness: str = "json", tools: Mapping[str, Sequence[str]] | None = None,
                  verifier: Callable[[str], dict[str, bool]] | None = None, profile: ProfileLike = None,
                  runner: Callable[..., object] | None = None) -> RLDatum:
    """An :class:`RLDatum` from one of lesson 08's environments: only a built-and-accepted environment
    (``report.ok`` and at least one Fail-to-Pass test) becomes RL data; the verifier defaults to
    :func:`~course_lib.agentic.envs.evaluate_patch` on that environment, with ``runner`` and the
    ``agentic.env_timeout_s`` of ``profile`` (resolved here, once). Introduced in lesson 08."""
    if not getattr(report, "ok", False):
        raise ValueError(f"environment {task.name!r} was rejected when it was built "
                         f"({'; '.join(report.reasons) or 'no reason recorded'}): it cannot be an RL datum")
    if not report.fail_to_pass:
        raise ValueError(f"environment {task.name!r} has no Fail-to-Pass test: a no-op would score as a fix")
    if verifier is None:
        from course_lib.agentic.envs import evaluate_patch

        timeout_s = resolve_profile(profile).agentic.env_timeout_s

        def verifier(patch: str, _task=task, _report=report) -> dict[str, bool]:
            return evaluate_patch(_task, _report, patch, runner=runner, timeout_s=timeout_s)

    tools = dict(tools or {"read_file": ["path"], "edit_file": ["path", "patch"], "run_tests": ["cmd"]})
    return RLDatum(env=task.name, tools=tools, harness=harness, system_prompt=harness_prompt(tools, harness),
                   instruction=task.issue, verifier=verifier).validate()


def harness_prompt(tools: Mapping[str, Sequence[str]], protocol: str) -> str:
    """The system prompt a harness of ``protocol`` shows: the tools and how to call them."""
    example = format_call(ToolCall("read_file", json.dumps({"path": "src/a.py"})), protocol)
    listed = "\n".join(f"- {name}({', '.join(args)})" for name, args in tools.items())
    return f"You can call these tools:\n{listed}\nCall a tool like this:\n{example}"


def format_call(call: ToolCall, protocol: str) -> str:
    """How a harness of ``protocol`` writes a tool call: ``json`` (a function-call object), ``xml``
    (tags, as some harnesses do), ``cli`` (a command line with ``--key value`` options).
    Introduced in lesson 08."""
    args = json.loads(call.arguments)
    if protocol == "json":
        return json.dumps({"tool": call.name, "arguments": args}, sort_keys=True)
    if protocol == "xml":
        inner = "".join(f"<{k}>{v}</{k}>" for k, v in sorted(args.items()))
        return f"<{call.name}>{inner}</{call.name}>"
    if protocol == "cli":
        return call.name + "".join(f" --{k} {json.dumps(v)}" for k, v in sorted(args.items()))
    raise ValueError(f"unknown protocol {protocol!r}; choose from {PROTOCOLS}")


def parse_call(text: str, protocol: str, turn: int = 0) -> ToolCall:
    """The canonical :class:`ToolCall` behind a harness's text (arguments as sorted JSON), so that
    rewards and verifiers read the same object whatever the harness; text that is not a call of that
    protocol raises ValueError. Introduced in lesson 08."""
    text = text.strip()
    try:
        if protocol == "json":
            obj = json.loads(text)
            name, args = obj["tool"], obj["arguments"]
        elif protocol == "xml":
            m = re.fullmatch(r"<(\w+)>(.*)</\1>", text, re.DOTALL)
            name = m.group(1)
            args = {k: v for k, v in re.findall(r"<(\w+)>(.*?)</\1>", m.group(2), re.DOTALL)}
        elif protocol == "cli":
            name, _, rest = text.partition(" ")
            args = {k: json.loads(v) for k, v in re.findall(r"--(\w+) (\"(?:[^\"\\]|\\.)*\"|\S+)", rest)}
            if not re.fullmatch(r"\w+", name):
                raise ValueError
        else:
            raise KeyError(protocol)
    except KeyError:
        raise ValueError(f"unknown protocol {protocol!r}; choose from {PROTOCOLS}") from None
    except Exception:  # noqa: BLE001 - any parse failure is a malformed call of this protocol
        raise ValueError(f"not a {protocol} tool call: {text[:60]!r}") from None
    if not isinstance(args, dict):
        raise ValueError(f"not a {protocol} tool call (arguments are not key/value pairs): {text[:60]!r}")
    return ToolCall(name, json.dumps(args, sort_keys=True), turn=turn)


def sample_harness(rng: np.random.Generator, *, perturb: float = 0.2) -> dict[str, Any]:
    """One randomised harness configuration (V2.5: 随机化调用协议、上下文管理和控制流程，并加入依赖错误、截断输出等扰动):
    a protocol, a context mode, a control flow, and each perturbation with probability ``perturb``.
    Introduced in lesson 08."""
    if not 0 <= perturb <= 1:
        raise ValueError("perturb is a probability")
    return {"protocol": str(rng.choice(PROTOCOLS)), "context": str(rng.choice(CONTEXT_MODES)),
            "control": str(rng.choice(CONTROL_FLOWS)),
            "perturbations": [p for p in PERTURBATIONS if rng.random() < perturb]}


def perturb_tool_output(text: str, perturbation: str, *, keep_chars: int = 80) -> str:
    """A tool result as a perturbed harness returns it: cut after ``keep_chars`` characters
    (``truncated_output``) or with a dependency error in front (``dependency_error``).
    Introduced in lesson 08."""
    if perturbation == "truncated_output":
        return text if len(text) <= keep_chars else text[:keep_chars] + "\n... [output truncated]"
    if perturbation == "dependency_error":
        return "ModuleNotFoundError: No module named 'yaml' (while importing conftest)\n" + text
    raise ValueError(f"unknown perturbation {perturbation!r}; choose from {PERTURBATIONS}")


# --- token pass-through --------------------------------------------------------------------------

def retokenize(ids: Sequence[int], decode: Callable[[list[int]], str],
               encode: Callable[[str], list[int]]) -> list[int]:
    """What a trainer gets when the sampler's tokens travel as text: ``encode(decode(ids))``.
    Introduced in lesson 08."""
    return list(encode(decode(list(ids))))


def token_mismatch(sampled: Sequence[int], trained: Sequence[int]) -> dict[str, int | None]:
    """Where the trainer's ids stop being the sampler's: the first differing position (None when equal)
    and both lengths. Introduced in lesson 08."""
    first = next((i for i, (a, b) in enumerate(zip(sampled, trained)) if a != b), None)
    if first is None and len(sampled) != len(trained):
        first = min(len(sampled), len(trained))
    return {"first_diff": first, "sampled": len(sampled), "trained": len(trained)}


def sample_continuations(model, prompt_ids, max_new_tokens: int, temperature: float = 1.0,
                         seed: int | None = None):
    """Plain ancestral sampling: (B, P) → (B, P + max_new_tokens) token ids, the ids the trainer gets
    as they are. A transformers model reuses its KV cache between steps; any other module that maps
    ``input_ids`` to ``.logits`` is run on the whole prefix each step. Introduced in lesson 08."""
    import torch

    g = torch.Generator().manual_seed(seed) if seed is not None else None
    ids, past, step_ids = prompt_ids, None, prompt_ids
    cached = hasattr(model, "config") and hasattr(model, "generate")
    with torch.no_grad():
        for _ in range(max_new_tokens):
            if cached:
                out = model(input_ids=step_ids, past_key_values=past, use_cache=True)
                past = out.past_key_values
            else:
                out = model(input_ids=ids)
            logits = out.logits[:, -1].float() / temperature
            nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=g)
            ids = torch.cat([ids, nxt], 1)
            step_ids = nxt
    return ids
