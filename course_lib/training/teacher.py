"""The teacher behind the codegen pipeline: an OpenAI-compatible HTTP server on 127.0.0.1.

LazyLLM's codegen operators talk to a model through ``lazyllm.OnlineChatModule(source='openai',
base_url=...)``. In the ``full`` profile that URL is a vLLM server running the lesson's teacher
(Qwen3-30B-A3B-Instruct). In ``ci`` it is :class:`TeacherServer` serving :class:`OfflineTeacher` —
**not a language model** but three documented rules, one per operator prompt:

1. instruction standardisation (``CodeInstructionGenerator``): rules rewrite the raw request into
   "Write a Python function that …" plus a skeleton whose signature comes from the reference code;
2. script synthesis (``ScriptSynthesizer``): the dataset's own reference answer, returned verbatim
   (lesson 07's :class:`~course_lib.training.rule_teacher.RuleTeacher` instead writes new code from the
   instruction alone, as the lecture's teacher does);
3. audit (``LogicIntegrityAuditor``): an *execution-grounded* score — the code is compiled and, when
   the caller gives a ``run_code`` (lesson 06's ``course_lib.evaluation.sandbox.run_code``), run with
   the row's tests when it has any; the score follows a fixed rubric (:data:`AUDIT_RUBRIC`). Without
   ``run_code`` the code is only compiled and the feedback says it was NOT executed.

Every answer says ``"model": "course-offline-teacher"`` and carries ``"system_fingerprint":
"offline-rules"``, so nothing it writes can pass for an LLM's output.

Introduced in lesson 05.
"""
from __future__ import annotations

import ast
import json
import os
import re
import sys
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterable, Sequence

OFFLINE_MODEL_NAME = "course-offline-teacher"

RunCode = Callable[..., object]
"""``run_code(code, tests, timeout_s=...)`` → a result with ``.status``, ``.stderr``, ``.detail``,
``.duration_s``, ``.backend``: :func:`course_lib.evaluation.sandbox.run_code` or a stand-in."""

AUDIT_RUBRIC = {
    "no code": 0,
    "syntax error": 2,
    "crashes or times out when run": 4,
    "its tests fail": 5,
    "runs cleanly": 7,
    "+ defines a function or class": 1,
    "+ has a docstring or comments": 1,
    "+ its tests pass": 1,
}
"""Scores of the execution-grounded auditor: a base for what happened, plus bonuses when it ran."""

_VERBS = r"(?:write|create|build|develop|design|implement|generate|make|construct|code|program)"
_THINGS = (r"(?:python\s+)?(?:code\s+snippet|function\s+snippet|module\s+snippet|program\s+snippet|script\s+snippet|"
           r"code|function|program|script|module|snippet|method|class)")
_LEAD = re.compile(rf"^\s*(?:please\s+)?{_VERBS}\s+(?:a|an|some|the)?\s*{_THINGS}\s*(?:`[^`]*`\s*)?"
                   r"(?:in\s+python\s*)?(?P<link>that|to|which|for|in order to)?\s*", re.I)
_DOES = re.compile(r"^(?:does|do) the following:\s*", re.I)


# seconds one audit run may take when the caller gives none: the ci and full profiles' sandbox.timeout_s
# (the codegen pipeline passes its own profile's value; the default is never read from a profile here)
AUDIT_TIMEOUT_S = 10.0

def _first_sentence(text: str) -> str:
    text = " ".join(text.strip().split("\n\n")[0].split())
    m = re.search(r"(?<=[.!?])\s+(?=[A-Z])", text)
    return (text[: m.start()] if m else text).strip().rstrip(".!?:;")


def _reference_code(reference: str) -> str:
    """The Python code inside a reference answer (first ```python fence, else the whole text)."""
    m = re.search(r"```(?:python|py|python3)?[ \t]*\n(.*?)```", reference or "", re.S)
    return (m.group(1) if m else reference or "").strip()


def _skeleton(reference: str, summary: str) -> str:
    try:
        tree = ast.parse(_reference_code(reference))
        fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
        args = ast.unparse(fn.args)
        name = fn.name
    except (SyntaxError, StopIteration, ValueError):
        name, args = "solution", ""
    doc = summary.replace('"""', "'''")
    return f"def {name}({args}):\n    \"\"\"{doc}.\"\"\"\n    ..."


def standardize_instruction(raw: str, reference: str = "") -> str:
    """Rule-based instruction standardisation (what the offline teacher answers the
    CodeInstructionGenerator): one English sentence "Write a Python function that …" and a
    ```python skeleton``` whose signature is the reference code's first function.

    Introduced in lesson 05.
    """
    sentence = _first_sentence(raw) or "Solve the task"
    m = _LEAD.match(sentence)
    if m is None:  # not a "write a … function/code/program" request: keep the sentence as it is
        head = sentence[0].upper() + sentence[1:]
        return f"{head}.\n```python\n{_skeleton(reference, sentence)}\n```"
    rest = sentence[m.end():]
    link = (m.group("link") or "").lower()
    rest = rest.strip() or "solves the task"
    if _DOES.match(rest):
        rest, link = _DOES.sub("", rest), "to"
    rest = rest[0].lower() + rest[1:] if not rest[:2].isupper() else rest
    if link in ("to", "in order to", "for"):
        head = f"Write a Python function to {rest}" if link != "for" else f"Write a Python function for {rest}"
    else:
        head = f"Write a Python function that {rest}"
    return f"{head}.\n```python\n{_skeleton(reference, rest)}\n```"


@dataclass
class Reference:
    """What the offline teacher knows about one row: its answer and (optionally) tests."""

    row_id: str
    answer: str
    tests: str | None = None


class OfflineTeacher:
    """Three documented rules that answer the three codegen prompts — not a language model.

    ``register(rows)`` tells it each row's raw instruction, reference answer and tests (the
    dataset's own). ``respond(messages)`` dispatches on the system prompt of the operator asking.
    ``run_code``, ``sandbox_timeout_s`` (None: :data:`AUDIT_TIMEOUT_S`; the pipeline passes its profile's
    ``sandbox.timeout_s``) and
    ``max_parallel_runs`` go to :func:`audit_code`. Introduced in lesson 05.
    """

    model_name = OFFLINE_MODEL_NAME
    uses_references = True     # told each row's answer and tests (lesson 07's RuleTeacher is not)

    def __init__(self, *, run_code: RunCode | None = None, sandbox_timeout_s: float | None = None,
                 max_parallel_runs: int = 4):
        self._by_raw: dict[str, Reference] = {}
        self._by_standard: dict[str, Reference] = {}
        self._lock = threading.Lock()
        self._runs = threading.Semaphore(max_parallel_runs)
        self.run_code = run_code
        self.sandbox_timeout_s = sandbox_timeout_s
        self.calls: list[dict] = []

    # the table of references ------------------------------------------------------------------
    def register(self, items: Iterable[tuple[str, str, str, str | None]]) -> None:
        """Register (row_id, raw instruction, reference answer, tests) tuples."""
        with self._lock:
            for row_id, raw, answer, tests in items:
                self._by_raw[raw.strip()] = Reference(row_id, answer, tests)

    # the three rules --------------------------------------------------------------------------
    def standardize(self, raw: str) -> str:
        ref = self._by_raw.get(raw.strip())
        text = standardize_instruction(raw, ref.answer if ref else "")
        if ref is not None:
            with self._lock:
                self._by_standard[text.strip()] = ref
        return text

    def synthesize(self, instruction: str) -> str:
        ref = self._by_standard.get(instruction.strip()) or self._by_raw.get(instruction.strip())
        if ref is None:
            return "The offline teacher has no reference answer for this instruction."
        return ref.answer

    def audit(self, instruction: str, code: str) -> dict:
        ref = self._by_standard.get(instruction.strip()) or self._by_raw.get(instruction.strip())
        return audit_code(code, tests=ref.tests if ref else None, timeout_s=self.sandbox_timeout_s,
                          semaphore=self._runs, run_code=self.run_code)

    # dispatch ---------------------------------------------------------------------------------
    def role_of(self, system: str) -> str:
        s = system.lower()
        if "standardization" in s or "standardisation" in s:
            return "standardize"
        if "code reviewer" in s or '"score"' in s:
            return "audit"
        if "generate the corresponding python code" in s or "senior python engineer" in s:
            return "synthesize"
        return "unknown"

    def respond(self, messages: list[dict]) -> str:
        system = next((m.get("content", "") for m in messages if m.get("role") == "system"), "")
        user = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
        role = self.role_of(system)
        self.calls.append({"role": role, "time": time.time()})
        if role == "standardize":
            return self.standardize(user)
        if role == "synthesize":
            return self.synthesize(user)
        if role == "audit":
            m = re.search(r"Instruction:\n(.*?)\n\nCode:\n```python\n(.*)\n```\s*$", user, re.S)
            if not m:
                return json.dumps({"score": 0, "feedback": "offline teacher: could not read the audit request"})
            return json.dumps(self.audit(m.group(1), m.group(2)))
        raise ValueError("the offline teacher only answers the three codegen prompts "
                         "(standardisation, synthesis, audit); this system prompt is none of them")


def rubric_score(status: str, *, defines: bool = False, documented: bool = False, has_tests: bool = False) -> int:
    """The execution-grounded auditor's rubric (:data:`AUDIT_RUBRIC`) as a function of what happened
    when the code ran: ``status`` is ``"no code"``, a sandbox status (``"passed"``, ``"failed"``,
    ``"syntax_error"``, ``"runtime_error"``, ``"timeout"``, ...) or ``"not run"`` (no sandbox: only
    compiled). Introduced in lesson 05."""
    if status == "no code":
        return 0
    if status == "syntax_error":
        return 2
    if status in ("passed", "not run"):
        return 7 + int(defines) + int(documented) + int(has_tests and status == "passed")
    if status == "failed" and has_tests:
        return 5
    return 4


def audit_code(code: str, tests: str | None = None, *, timeout_s: float | None = None,
               semaphore: threading.Semaphore | None = None, run_code: RunCode | None = None,
               timing: bool = True) -> dict:
    """Score code by running it (the execution-grounded auditor): ``{"score": int, "feedback": str}``
    following :func:`rubric_score`.

    ``run_code`` has the signature of :func:`course_lib.evaluation.sandbox.run_code` (``run_code(code,
    tests, timeout_s=...)`` → a result with ``.status``, ``.stderr``, ``.detail``, ``.duration_s``,
    ``.backend``); ``timeout_s`` None is the active profile's ``sandbox.timeout_s``; ``semaphore``
    bounds the runs in flight; ``timing`` False leaves the run's duration out of the feedback (the same
    code then always gets the same feedback). Without ``run_code`` (or when it raises ``RuntimeError``: no
    sandbox backend works) the code is only compiled and the feedback says it was NOT executed.
    Introduced in lesson 05.
    """
    code = code or ""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return {"score": rubric_score("syntax_error"), "feedback": f"syntax error: {exc.msg} (line {exc.lineno})"}
    if not tree.body or all(isinstance(n, ast.Expr) and isinstance(getattr(n, "value", None), ast.Constant)
                            for n in tree.body):
        return {"score": rubric_score("no code"), "feedback": "no code"}
    defines = any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for n in ast.walk(tree))
    documented = "#" in code or any(
        isinstance(n, (ast.FunctionDef, ast.ClassDef)) and ast.get_docstring(n) for n in ast.walk(tree))
    notes = (["defines a function or class"] if defines else []) + (["documented"] if documented else [])

    def not_run(why: str) -> dict:
        return {"score": rubric_score("not run", defines=defines, documented=documented),
                "feedback": f"compiles; NOT executed ({why}), " + ", ".join(notes or ["no bonus"])}

    if run_code is None:
        return not_run("no sandbox given: pass run_code=course_lib.evaluation.sandbox.run_code")
    if timeout_s is None:
        timeout_s = AUDIT_TIMEOUT_S
    if semaphore is not None:
        semaphore.acquire()
    try:
        try:
            res = run_code(code, tests, timeout_s=timeout_s)
        except ValueError as exc:  # the row's tests do not compile
            return {"score": 0, "feedback": f"the row's tests are broken: {exc}"}
        except RuntimeError as exc:  # no sandbox backend works here
            return not_run(str(exc))
    finally:
        if semaphore is not None:
            semaphore.release()
    score = rubric_score(res.status, defines=defines, documented=documented, has_tests=bool(tests))
    if res.status == "passed":
        where = f"{res.backend}, {res.duration_s:.2f}s" if timing else res.backend
        return {"score": score, "feedback": f"ran cleanly in the sandbox ({where})"
                + ("; its tests pass" if tests else "") + (", " + ", ".join(notes) if notes else "")}
    last = ((res.stderr or "").strip().splitlines() or [res.detail or res.status])[-1]
    if res.status == "failed" and tests:
        return {"score": score, "feedback": f"its tests fail: {last[:200]}"}
    return {"score": score, "feedback": f"{res.status} when run in the sandbox: {last[:200]}"}


# --- the HTTP server ------------------------------------------------------------------------------

Responder = Callable[[list], str]


class TeacherServer:
    """An OpenAI-compatible ``/v1/chat/completions`` + ``/v1/models`` server on 127.0.0.1 that
    answers with ``responder(messages) -> str`` (default: an :class:`OfflineTeacher`).

    Use as a context manager; ``.url`` is the ``base_url`` for ``lazyllm.OnlineChatModule``.
    A responder that raises gives HTTP 500 with the error text. Introduced in lesson 05.
    """

    def __init__(self, responder: Responder | None = None, *, model_name: str = OFFLINE_MODEL_NAME,
                 port: int = 0):
        self.teacher = responder if isinstance(responder, OfflineTeacher) else None
        if responder is None:
            self.teacher = OfflineTeacher()
            responder = self.teacher.respond
        elif isinstance(responder, OfflineTeacher):
            responder = responder.respond
        self.responder = responder
        self.model_name = model_name
        self.requests = 0
        self.errors: list[str] = []
        self._port = port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the teacher server is not running; use `with TeacherServer() as srv:`")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1/"

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep notebooks quiet
                pass

            def _send(self, code: int, payload: dict):
                body = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [
                        {"id": server.model_name, "object": "model", "owned_by": "course (offline rules)"}]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self):
                server.requests += 1
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                    body = json.loads(self.rfile.read(length) or b"{}")
                    content = server.responder(body.get("messages") or [])
                except Exception as exc:  # the error goes back to the client, who counts it
                    server.errors.append(f"{type(exc).__name__}: {exc}")
                    self._send(500, {"error": {"message": f"{type(exc).__name__}: {exc}", "type": "server_error"}})
                    return
                self._send(200, {
                    "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion",
                    "created": int(time.time()), "model": server.model_name,
                    "system_fingerprint": "offline-rules",
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}})

        return Handler

    def start(self) -> "TeacherServer":
        server = self

        class _Quiet(ThreadingHTTPServer):
            def handle_error(self, request, client_address):  # a client that gave up (timeout)
                import sys

                server.errors.append(f"connection from {client_address} failed: {sys.exc_info()[1]!r}")

        self._httpd = _Quiet(("127.0.0.1", self._port), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True,
                                        name="course-teacher-server")
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "TeacherServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def teacher_is_up(base_url: str, timeout_s: float = 3.0) -> tuple[bool, str]:
    """Ask ``GET {base_url}models``; returns (reachable, the model ids or the error).

    Introduced in lesson 05.
    """
    url = base_url.rstrip("/") + "/models"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            data = json.loads(r.read())
        return True, ", ".join(m.get("id", "?") for m in data.get("data", []))
    except Exception as exc:
        return False, f"{type(exc).__name__}: {exc}"


def vllm_server_command(model: str | os.PathLike, *, host: str = "127.0.0.1", port: int = 8000,
                        python: str | None = None, max_model_len: int | None = None,
                        gpu_memory_utilization: float | None = None, max_num_seqs: int | None = None,
                        max_num_batched_tokens: int | None = None, extra_args: Sequence[str] = ()) -> list[str]:
    """The course's one vLLM server command: vLLM's OpenAI-compatible server module run by ``python``
    (default: this interpreter; the ``vllm`` console command fails on the CPU build's package
    metadata), on ``host:port``, with the engine settings that are given. Used by the teacher (lesson
    05) and the drill's inference (lesson 07). Introduced in lesson 05."""
    cmd = [python or sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
           "--host", host, "--port", str(port)]
    for flag, value in (("--max-model-len", max_model_len), ("--gpu-memory-utilization", gpu_memory_utilization),
                        ("--max-num-seqs", max_num_seqs), ("--max-num-batched-tokens", max_num_batched_tokens)):
        if value is not None:
            cmd += [flag, str(value)]
    return cmd + list(extra_args)


@dataclass
class VLLMTeacher:
    """The full profile's teacher: a vLLM OpenAI-compatible server (:func:`vllm_server_command`).

    ``command()`` is what to run on the GPU machine; ``base_url`` is what the pipeline talks to.
    Introduced in lesson 05.
    """

    model: str = "Qwen/Qwen3-30B-A3B-Instruct-2507"
    host: str = "127.0.0.1"
    port: int = 8000
    max_model_len: int = 8192

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1/"

    def command(self) -> list[str]:
        return vllm_server_command(self.model, host=self.host, port=self.port, max_model_len=self.max_model_len)
