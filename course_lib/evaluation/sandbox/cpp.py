"""The C++ judge: compile a candidate function with g++ (C++17) in the sandbox, run it in the sandbox, and
judge its answers **outside the program**, as the Python judge does.

    from course_lib.evaluation.sandbox.cpp import run_cpp_tests
    r = run_cpp_tests("#include <vector>\\nlong long total(const std::vector<long long>& xs) {\\n"
                      "  long long s = 0; for (long long x : xs) s += x; return s; }",
                      "long long total(const std::vector<long long>& xs)",
                      [(([1, 2, 3],), 6), (([],), 0)])
    r.status, r.tests   # 'passed', ['ok', 'ok']

Two sandbox runs per sample, each under the backend's full policy (bwrap or Docker: no network, no host
files, a fresh cgroup, a leased uid, the course's seccomp filter, Landlock):

1. **Compile.** The in-sandbox server (:func:`course_lib.evaluation.sandbox.inside._compile`) writes one
   translation unit — the candidate's source, then the course's driver — and runs
   :func:`compile_command` (``g++ -std=c++17 -O1``) with the compile limits: wall clock
   ``compile_timeout_s`` (default :data:`DEFAULT_COMPILE_TIMEOUT_S`), memory ``compile_memory_mb`` for
   the compiler's processes together (:data:`DEFAULT_COMPILE_MEMORY_MB`), files (the binary) up to
   :data:`MAX_BINARY_BYTES`, diagnostics kept up to :data:`DIAGNOSTICS_CAP`. The compiler sees only what
   the sandbox shows (the toolchain under ``/usr``, a scratch ``/tmp``): ``#include "/etc/passwd"``
   finds the sandbox's ``/etc``, never the host's. Every way compiling can fail — an error, the time or
   memory limit (template and ``constexpr`` bombs), a binary over the limit — is ``syntax_error`` (the
   lecture's SER for C++ is a compile error), with the compiler's first error line (or the limit) in
   ``detail``, so a bomb is never rewarded above an honest compile error.
2. **Run.** The binary travels back to the host as bytes and into a second sandbox, where the
   supervisor execs it with the request pipe on fd 3 and the reply pipe on fd 4 (fd 1/2 are relayed
   and capped at 64 KiB like a Python program's output). The driver's ``main`` answers the host's
   requests: ``hello`` (the program reached ``main``), ``call`` (decode the arguments, call the
   candidate, encode its return value or the exception it threw), ``finish``. The host compares the
   answers with the expected values, which never enter the sandbox.

**Why nothing the program does produces a pass.** Every request carries a fresh random id that its
reply must echo, and :class:`~course_lib.evaluation.sandbox.judge.Channel` refuses a reply that was
not asked for or comes twice; expected values are never sent; outcomes are decided here. A static
constructor that writes frames before ``main`` (it cannot know the ids), an ``exit()``/``_exit()``/
``quick_exit()`` before the tests (no ``ready``: an exit at load), an ``asm`` block, a candidate
``main`` (renamed by ``-Dmain=course_candidate_main``; one that undoes the macro or names a symbol
``main`` collides with the driver's and does not link: ``syntax_error``), a redefined
``__libc_start_main``, ``read``/``write`` interposed on the driver, macros that rewrite the driver's
code: each can at most answer wrongly, answer late, or break the protocol — a failed run. What the
program can do is compute answers: that is what is judged.

Types that cross (:data:`TYPES`): ``long long``, ``int``, ``bool``, ``std::string``, and
``std::vector`` of ``long long``, ``int`` or ``std::string``; parameters may be taken by value, by
reference or by const reference (the call is compiled in the candidate's translation unit, so C++'s
own conversions apply as in a one-file test program). Arguments are not sent back after the call.

Introduced for issue 38 (lesson 11).
"""
from __future__ import annotations

import os
import re
import secrets
import subprocess
import time
import uuid
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from course_lib.evaluation.sandbox import backends as _b
from course_lib.evaluation.sandbox.cgroups import RunCgroup, cgroup_support
from course_lib.evaluation.sandbox.execute import STARTUP_S, _kill_tree
from course_lib.evaluation.sandbox.judge import Abort, Channel, Judge, init_message, one_line
from course_lib.evaluation.sandbox.limits import CPUS, MAX_PROCS, OUTPUT_CAP, TMP_BYTES, Limits, UidLease
from course_lib.evaluation.sandbox.policy import resolve_backend
from course_lib.evaluation.sandbox.result import SandboxResult
from course_lib.evaluation.sandbox.run import retry_sandbox_error
from course_lib.evaluation.sandbox.seccomp import filter_bytes
from course_lib.evaluation.sandbox.wire import MAX_FRAME, RUN_BUDGET, frame

COMPILER = "/usr/bin/g++"
CPP_STANDARD = "c++17"
OPTIMIZATION = "-O1"
"""``-O1``: on drill-sized sources it compiles as fast as ``-O0`` (measured here: 0.23 s vs 0.26 s for a
function with ``<vector>``; parsing the headers dominates), while the candidate's loops run several
times faster (five passes over a 20-million-element vector: 1.31 s at ``-O0``, 0.16 s at ``-O1``,
unsandboxed, same machine: ``std::vector``'s iterators are calls at ``-O0``); it stays below ``-O2``,
which turns on ``-ffinite-loops`` (a side-effect-free endless loop could then be deleted, and a timeout
test would depend on undefined behaviour)."""
CANDIDATE_MAIN = "course_candidate_main"
SOURCE_NAME = "solution.cpp"
DRIVER_NAME = "course_driver.cpp"
OUTPUT_NAME = "prog"
DEFAULT_COMPILE_TIMEOUT_S = 20.0
DEFAULT_COMPILE_MEMORY_MB = 512     # `#include <bits/stdc++.h>` needs ~200 MB of cc1plus
MAX_BINARY_BYTES = 4 * 1024 * 1024  # a drill binary is ~20-60 KB (linked dynamically)
MAX_SOURCE_BYTES = 1024 * 1024
DIAGNOSTICS_CAP = 64 * 1024
CONSTEXPR_OPS_LIMIT = 1 << 25       # g++'s default is 2**33: a constexpr bomb fails in seconds, not minutes
COMPILE_NOFILE = 256
MAX_VALUES = RUN_BUDGET[0]          # values all replies of one run may decode to

TYPES = ("long long", "int", "bool", "std::string", "std::vector<long long>", "std::vector<int>",
         "std::vector<std::string>")
"""The C++ types a parameter or the return value may have (their canonical spelling)."""
_SCALAR_ALIASES = {"long long": "long long", "long long int": "long long", "signed long long": "long long",
                   "int64_t": "long long", "std::int64_t": "long long", "int": "int", "bool": "bool",
                   "string": "std::string", "std::string": "std::string"}
_LL = (-(1 << 63), (1 << 63) - 1)
_INT = (-(1 << 31), (1 << 31) - 1)


# --- the signature -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CppSignature:
    """A parsed C++ function declaration: its name, canonical return type, and parameter types (and
    names, ``""`` when the declaration gives none)."""

    name: str
    returns: str
    params: tuple[str, ...]
    param_names: tuple[str, ...]

    def declaration(self) -> str:
        args = ", ".join(f"{t} {n}".strip() for t, n in zip(self.params, self.param_names))
        return f"{self.returns} {self.name}({args})"


def canonical_type(text: str) -> str:
    """The canonical spelling (one of :data:`TYPES`) of a C++ type as written in a declaration:
    ``const``, ``&`` and whitespace are dropped, ``std::`` is optional, ``long long int`` and
    ``int64_t`` are ``long long``. Raises ValueError naming the type for any other type."""
    t = re.sub(r"\bconst\b|&", " ", text)
    t = re.sub(r"\s+", " ", t).strip()
    t = re.sub(r"\s*(<|>|::)\s*", r"\1", t)
    m = re.fullmatch(r"(?:std::)?vector<(.+)>", t)
    if m:
        inner = _SCALAR_ALIASES.get(m.group(1).strip())
        if inner in ("long long", "int", "std::string"):
            return f"std::vector<{inner}>"
    elif t in _SCALAR_ALIASES:
        return _SCALAR_ALIASES[t]
    raise ValueError(f"the C++ judge does not support the type {text.strip()!r}; supported: {', '.join(TYPES)}")


def _split_params(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch == "<") - (ch == ">")
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts]


def parse_signature(signature: str) -> CppSignature:
    """Parse a declaration such as ``long long total(const std::vector<long long>& xs)`` (a trailing
    ``;`` is allowed). Raises ValueError saying what is wrong: no name, an unsupported type, a default
    argument, ``void``."""
    if not isinstance(signature, str):
        raise TypeError(f"signature must be a C++ declaration string, got {type(signature).__name__}")
    m = re.fullmatch(r"\s*(?P<ret>[^()]*?)\s*\b(?P<name>[A-Za-z_]\w*)\s*\((?P<params>[^()]*)\)\s*;?\s*", signature)
    if not m or not m.group("ret").strip():
        raise ValueError(f"cannot read the C++ declaration {signature!r}: write it as "
                         "'RETURN_TYPE NAME(TYPE name, ...)', e.g. 'long long total(const std::vector<long long>& xs)'")
    returns = canonical_type(m.group("ret"))
    params, names = [], []
    raw = m.group("params").strip()
    for i, p in enumerate([] if raw in ("", "void") else _split_params(raw)):
        if "=" in p:
            raise ValueError(f"parameter {i} of {signature!r} has a default argument; the judge passes every argument")
        try:
            params.append(canonical_type(p))
            names.append("")
        except ValueError:
            pm = re.fullmatch(r"(?P<type>.*?[\s&>*])\s*(?P<name>[A-Za-z_]\w*)", p)
            if not pm:
                raise
            params.append(canonical_type(pm.group("type")))
            names.append(pm.group("name"))
    return CppSignature(m.group("name"), returns, tuple(params), tuple(names))


# --- values: host side ----------------------------------------------------------------------------------

def encode_value(ctype: str, value: Any) -> bytes:
    """The wire form of one argument (trusted direction, host → driver): integers in decimal, a bool as
    ``0``/``1``, a string as ``<bytes>:<UTF-8 bytes>``, a vector as its length and then its elements, all
    separated by single spaces. Raises ValueError when the value does not fit the C++ type."""
    if ctype in ("long long", "int"):
        lo, hi = _LL if ctype == "long long" else _INT
        if type(value) is not int or not lo <= value <= hi:
            raise ValueError(f"{value!r} is not a C++ {ctype} (an int in [{lo}, {hi}])")
        return str(value).encode()
    if ctype == "bool":
        if type(value) is not bool:
            raise ValueError(f"{value!r} is not a bool")
        return b"1" if value else b"0"
    if ctype == "std::string":
        if type(value) is not str:
            raise ValueError(f"{value!r} is not a str")
        data = value.encode("utf-8")
        return str(len(data)).encode() + b":" + data
    inner = ctype[len("std::vector<"):-1]
    if type(value) not in (list, tuple):
        raise ValueError(f"{type(value).__name__} value for {ctype}: pass a list")
    return b" ".join([str(len(value)).encode()] + [encode_value(inner, x) for x in value])


class _Reader:
    """Strict decoder of one reply's value (untrusted direction): the form :func:`encode_value` writes,
    nothing else; at most ``budget[0]`` values per run."""

    _INT_RE = re.compile(rb"-?(?:0|[1-9][0-9]{0,19})")

    def __init__(self, data: bytes, budget: list[int]) -> None:
        self.data, self.at, self.budget = data, 0, budget
        self.separator_last = False     # the last byte consumed was a separator (a value's content never is)

    def _skip_separator(self, end: int) -> None:
        self.at = end + 1 if end < len(self.data) else end
        self.separator_last = end < len(self.data)

    def fail(self, why: str) -> Abort:
        return Abort("failed", f"protocol error: {why}")

    def token(self) -> bytes:
        end = self.data.find(b" ", self.at)
        end = len(self.data) if end < 0 else end
        tok = self.data[self.at:end]
        if not tok:
            raise self.fail("an empty token in a reply")
        self._skip_separator(end)
        return tok

    def integer(self, lo: int, hi: int) -> int:
        tok = self.token()
        if not self._INT_RE.fullmatch(tok):
            raise self.fail(f"not an integer: {tok[:40]!r}")
        v = int(tok)
        if not lo <= v <= hi:
            raise self.fail(f"{v} is out of range")
        return v

    def value(self, ctype: str) -> Any:
        self.budget[0] -= 1
        if self.budget[0] < 0:
            raise self.fail(f"the replies hold more than {MAX_VALUES} values")
        if ctype == "long long":
            return self.integer(*_LL)
        if ctype == "int":
            return self.integer(*_INT)
        if ctype == "bool":
            tok = self.token()
            if tok not in (b"0", b"1"):
                raise self.fail(f"not a bool: {tok[:40]!r}")
            return tok == b"1"
        if ctype == "std::string":
            colon = self.data.find(b":", self.at)
            if colon < 0 or not re.fullmatch(rb"0|[1-9][0-9]{0,9}", self.data[self.at:colon]):
                raise self.fail("a malformed string")
            n = int(self.data[self.at:colon])
            end = colon + 1 + n
            if end > len(self.data) or (end < len(self.data) and self.data[end:end + 1] != b" "):
                raise self.fail("a string whose length does not match")
            text = self.data[colon + 1:end].decode("utf-8", "surrogateescape")
            self._skip_separator(end)
            return text
        inner = ctype[len("std::vector<"):-1]
        n = self.integer(0, len(self.data))
        return [self.value(inner) for _ in range(n)]

    def done(self) -> None:
        # a separator after the last value is a trailing byte; a string's own trailing space is not
        if self.at != len(self.data) or self.separator_last:
            raise self.fail("trailing bytes after a reply's value")


# --- the driver -------------------------------------------------------------------------------------------

_DRIVER = r'''
#line 1 "course_driver.cpp"
#undef main
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>
#include <unistd.h>
// The course's judge driver (generated; the host holds the tests and the expected values).
// Requests arrive on fd 3 and replies leave on fd 4, each a 4-byte big-endian length + payload.
namespace course_judge_driver {
struct cj_in { const std::string* s; std::size_t at; };
[[noreturn]] static void cj_bad() { ::_exit(3); }
static std::string cj_token(cj_in& in) {
  const std::string& s = *in.s;
  std::size_t b = in.at;
  while (in.at < s.size() && s[in.at] != ' ') ++in.at;
  if (in.at == b) cj_bad();
  std::string t = s.substr(b, in.at - b);
  if (in.at < s.size()) ++in.at;
  return t;
}
static long long cj_int(cj_in& in) {
  std::string t = cj_token(in);
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(t.c_str(), &end, 10);
  if (errno != 0 || end == nullptr || *end != '\0') cj_bad();
  return v;
}
static void cj_get(cj_in& in, long long& v) { v = cj_int(in); }
static void cj_get(cj_in& in, int& v) { v = static_cast<int>(cj_int(in)); }
static void cj_get(cj_in& in, bool& v) { v = cj_int(in) != 0; }
static void cj_get(cj_in& in, std::string& v) {
  const std::string& s = *in.s;
  std::size_t colon = s.find(':', in.at);
  if (colon == std::string::npos) cj_bad();
  std::size_t n = static_cast<std::size_t>(std::strtoull(s.substr(in.at, colon - in.at).c_str(), nullptr, 10));
  if (colon + 1 + n > s.size()) cj_bad();
  v.assign(s, colon + 1, n);
  in.at = colon + 1 + n;
  if (in.at < s.size()) ++in.at;
}
template <class T> static void cj_get(cj_in& in, std::vector<T>& v) {
  long long n = cj_int(in);
  if (n < 0 || n > static_cast<long long>(in.s->size())) cj_bad();
  v.clear();
  v.reserve(static_cast<std::size_t>(n));
  for (long long i = 0; i < n; ++i) { T x; course_judge_driver::cj_get(in, x); v.push_back(x); }
}
static void cj_put(std::string& o, long long v) { o += std::to_string(v); }
static void cj_put(std::string& o, int v) { o += std::to_string(v); }
static void cj_put(std::string& o, bool v) { o += v ? "1" : "0"; }
static void cj_put(std::string& o, const std::string& v) { o += std::to_string(v.size()); o += ':'; o += v; }
template <class T> static void cj_put(std::string& o, const std::vector<T>& v) {
  o += std::to_string(v.size());
  for (const T& x : v) { o += ' '; course_judge_driver::cj_put(o, x); }
}
static bool cj_read(char* p, std::size_t n) {
  while (n > 0) {
    ssize_t k = ::read(3, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}
static bool cj_request(std::string& s) {
  unsigned char h[4];
  if (!cj_read(reinterpret_cast<char*>(h), 4)) return false;
  std::size_t n = (std::size_t(h[0]) << 24) | (std::size_t(h[1]) << 16) | (std::size_t(h[2]) << 8) | std::size_t(h[3]);
  s.assign(n, '\0');
  return n == 0 || cj_read(&s[0], n);
}
static void cj_reply(const std::string& s) {
  std::size_t n = s.size();
  std::string f;
  f += static_cast<char>((n >> 24) & 255); f += static_cast<char>((n >> 16) & 255);
  f += static_cast<char>((n >> 8) & 255); f += static_cast<char>(n & 255);
  f += s;
  const char* p = f.data();
  std::size_t left = f.size();
  while (left > 0) {
    ssize_t k = ::write(4, p, left);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) ::_exit(3);
    p += k;
    left -= static_cast<std::size_t>(k);
  }
}
static void cj_flush() { std::cout.flush(); std::cerr.flush(); std::fflush(nullptr); }
static std::string cj_what(const char* w) { std::string s(w ? w : ""); return s.substr(0, 2000); }
}  // namespace course_judge_driver

int main() {
  namespace cj = course_judge_driver;
  std::string cj_req;
  while (cj::cj_request(cj_req)) {
    cj::cj_in cj_at{&cj_req, 0};
    std::string cj_out = cj::cj_token(cj_at);
    std::string cj_op = cj::cj_token(cj_at);
    if (cj_op == "hello") {
      cj_out += " ready";
    } else if (cj_op == "finish") {
      cj::cj_flush();
      cj_out += " done";
      cj::cj_reply(cj_out);
      ::_exit(0);
    } else if (cj_op == "call") {
      try {
@DECODE@
        @RETURNS@ cj_result = @CALL@;
        cj_out += " v ";
        cj::cj_put(cj_out, cj_result);
      } catch (const std::bad_alloc&) {
        cj_out += " m";
      } catch (const std::exception& e) {
        cj_out += " e ";
        cj::cj_put(cj_out, cj::cj_what(e.what()));
      } catch (...) {
        cj_out += " e ";
        cj::cj_put(cj_out, std::string("an exception that is not a std::exception"));
      }
      cj::cj_flush();
    } else {
      ::_exit(3);
    }
    cj::cj_reply(cj_out);
  }
  return 0;
}
'''


def driver_source(signature: CppSignature | str) -> str:
    """The driver the course appends to the candidate's translation unit: it ``#undef``s ``main``
    (the candidate's own ``main`` was renamed by ``-Dmain=course_candidate_main``), decodes each call's
    arguments into locals of the declared types, calls the candidate, and encodes the return value,
    the exception it threw (``std::exception::what``, cut at 2,000 characters) or ``std::bad_alloc``
    (the run's ``memory_limit``). It writes only to fd 4 and reads only fd 3."""
    sig = parse_signature(signature) if isinstance(signature, str) else signature
    decode = "\n".join(f"        {t} cj_a{i}; cj::cj_get(cj_at, cj_a{i});" for i, t in enumerate(sig.params))
    call = f"{sig.name}(" + ", ".join(f"cj_a{i}" for i in range(len(sig.params))) + ")"
    return (_DRIVER.replace("@DECODE@", decode or "        // no arguments")
            .replace("@RETURNS@", sig.returns).replace("@CALL@", call))


def translation_unit(source: str, signature: CppSignature | str) -> str:
    """The one file g++ compiles: ``#line 1 "solution.cpp"``, the candidate's source (so its diagnostics
    name its own lines), two newlines (a trailing backslash or ``//`` comment cannot swallow the
    driver's first line), then :func:`driver_source`."""
    return f'#line 1 "{SOURCE_NAME}"\n{source}\n\n{driver_source(signature)}'


def compile_command() -> list[str]:
    """The compiler's command line in the sandbox (cwd: the run's scratch folder)."""
    return [COMPILER, f"-std={CPP_STANDARD}", OPTIMIZATION, "-pipe", "-fdiagnostics-color=never",
            "-fmax-errors=10", f"-fconstexpr-ops-limit={CONSTEXPR_OPS_LIMIT}", f"-Dmain={CANDIDATE_MAIN}",
            "-o", OUTPUT_NAME, SOURCE_NAME]


_ERROR_LINE = re.compile(r"^.*?\b(?:fatal )?error: .*$", re.M)


def first_error_line(diagnostics: str) -> str:
    """The compiler's first line that says ``error:`` (else its first non-empty line), one line."""
    m = _ERROR_LINE.search(diagnostics)
    line = m.group(0) if m else next((x for x in diagnostics.splitlines() if x.strip()), "")
    return " ".join(line.split())[:400]


# --- one sandbox phase ---------------------------------------------------------------------------------------

def _phase(backend: str, limits: Limits, header: dict, payload: bytes, tmp_bytes: int,
           judge: Callable[[Channel], Any], *, tmp_exec: bool = False, rlimits: dict | None = None):
    """Start one sandbox run (fresh cgroup, leased uid) with ``header`` and ``payload`` as the init
    message, give its channel to ``judge``, then kill and clean up. Returns ``(judge's value or the
    Abort it raised, channel, OOM seen by the cgroup, note)``."""
    cgroup, note = None, ""
    if backend == "bwrap":
        if cgroup_support()[0]:
            try:
                cgroup = RunCgroup(limits.memory_mb, MAX_PROCS, CPUS)
            except OSError as exc:
                note = f"no cgroup for this run ({exc}): memory limits were per process"
        else:
            note = f"no cgroups ({cgroup_support()[1]}): memory limits were per process"
    channel = None
    try:
        with UidLease() as lease:
            header = dict(header, nonce=secrets.randbits(62), landlock=backend != "unsafe", paths=[])
            pass_fds: tuple[int, ...] = ()
            seccomp_fd = container = host = None
            program = filter_bytes()
            command = _b.inside_argv(str(_b.sandbox_python()), precompiled=True) if backend != "docker" else None
            if backend == "bwrap":
                if program is not None:
                    seccomp_fd = os.memfd_create("course-sandbox-seccomp", 0)
                    os.write(seccomp_fd, program)
                    os.lseek(seccomp_fd, 0, os.SEEK_SET)
                    pass_fds = (seccomp_fd,)
                argv = _b.bwrap_argv(lease.uid, seccomp_fd, tmp_bytes, command)
                header["limits"] = limits.rlimits(nproc=cgroup is None, per_sample_memory=cgroup is not None)
                if cgroup is not None:
                    argv = cgroup.enter_argv(argv)
            elif backend == "docker":
                from course_lib.evaluation.sandbox.docker import docker_host

                host = docker_host()
                container = f"course-sbx-{uuid.uuid4().hex[:12]}"
                argv = _b.docker_argv(lease.uid, limits, container, host, tmp_bytes, tmp_exec=tmp_exec)
                header["limits"] = limits.rlimits(nproc=False, per_sample_memory=True)
                if program is not None:
                    header["seccomp"] = program.hex()
            else:
                argv = _b.unsafe_argv(command)
                header["limits"] = limits.rlimits(nproc=False)
                header["cleanup"] = True
            header["limits"].update(rlimits or {})
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
            if backend == "docker":
                env.update({k: v for k, v in os.environ.items() if k.startswith("DOCKER_")})
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        start_new_session=True, env=env, cwd="/tmp" if backend == "unsafe" else None,
                                        pass_fds=pass_fds)
            except OSError as exc:
                return Abort("sandbox_error", f"could not start {argv[0]}: {exc}"), None, False, note
            finally:
                if seccomp_fd is not None:
                    os.close(seccomp_fd)
            channel = Channel(proc, OUTPUT_CAP)
            try:
                channel.send(init_message(header, payload))
                try:
                    outcome = judge(channel)
                except Abort as exc:
                    outcome = exc
                except BaseException as exc:  # noqa: BLE001 - the sample's failure, never the caller's
                    outcome = Abort("failed", f"the judge could not finish this run ({one_line(exc)})")
            finally:
                ended = channel.exit_info is not None
                if ended:
                    try:
                        proc.wait(timeout=0.5 if backend != "docker" else 5.0)
                    except subprocess.TimeoutExpired:
                        pass
                _kill_tree(proc, None if ended else container, host)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    _kill_tree(proc, container, host)
                    proc.wait(timeout=30)
                for f in (proc.stdin, proc.stdout, proc.stderr):
                    try:
                        f and f.close()
                    except OSError:
                        pass
    except FileNotFoundError as exc:
        return Abort("sandbox_error", str(exc)), channel, False, note
    finally:
        oom = False
        if cgroup is not None:
            oom = cgroup.oom_killed()
            cgroup.remove()
    return outcome, channel, oom, note


def _started(ch: Channel, backend: str) -> None:
    ch.pump(lambda: ch.started is not None or ch.e_eof, time.monotonic() + STARTUP_S[backend],
            on_timeout="sandbox_error")
    if ch.started is None:
        early = bytes(ch.pre).decode("utf-8", "replace").strip()
        raise Abort("sandbox_error", "the sandbox exited before its server started: " + (early[-500:] or "no message"))


# --- compiling ---------------------------------------------------------------------------------------------

@dataclass
class CompileOutcome:
    """What compiling one source gave: the binary (``None`` when it did not compile), the status and
    detail of a failure, the diagnostics (capped), and how long it took."""

    binary: bytes | None
    status: str = "passed"
    detail: str = ""
    diagnostics: str = ""
    seconds: float = 0.0


def compile_cpp(unit: str, *, backend: str, timeout_s: float = DEFAULT_COMPILE_TIMEOUT_S,
                memory_mb: int = DEFAULT_COMPILE_MEMORY_MB) -> CompileOutcome:
    """Compile one translation unit (:func:`translation_unit`) with :func:`compile_command` in a sandbox
    on ``backend``. A source that does not compile within the limits is ``syntax_error`` with the reason
    in ``detail``; a sandbox that could not start is ``sandbox_error``."""
    limits = Limits.of(timeout_s, memory_mb)
    source = unit.encode("utf-8", "surrogatepass")
    header = {"compile": True, "argv": compile_command(), "source_name": SOURCE_NAME, "output_name": OUTPUT_NAME,
              "max_binary": MAX_BINARY_BYTES, "diag_cap": DIAGNOSTICS_CAP}
    t0 = time.monotonic()

    def judge(ch: Channel) -> bytes | None:
        _started(ch, backend)
        ch.deadline = time.monotonic() + limits.timeout_s
        report = ch.reply()
        try:   # the server exits by itself right after its report (and cleans its folder on `unsafe`)
            ch.pump(lambda: ch.exit_info is not None, min(ch.deadline, time.monotonic() + 2.0))
        except Abort:
            pass
        return report

    outcome, ch, oom, note = _phase(backend, limits, header, source, TMP_BYTES + len(source) + 2 * MAX_BINARY_BYTES,
                                    judge, rlimits={"fsize": MAX_BINARY_BYTES, "nofile": COMPILE_NOFILE})
    seconds = time.monotonic() - t0

    def fail(detail: str, diagnostics: str = "") -> CompileOutcome:
        return CompileOutcome(None, "syntax_error", f"compile error: {detail}", diagnostics, seconds)

    if isinstance(outcome, Abort):
        if outcome.status == "timeout":
            return fail(f"the compiler ran past the {limits.timeout_s:g} s compile time limit")
        if oom:
            return fail(f"the compiler went over the {limits.memory_mb} MiB compile memory limit")
        detail = outcome.detail + (f"; {note}" if note else "")
        return CompileOutcome(None, "sandbox_error" if outcome.status == "sandbox_error" else outcome.status,
                              detail, "", seconds)
    if outcome is None:
        if oom:
            return fail(f"the compiler went over the {limits.memory_mb} MiB compile memory limit")
        return CompileOutcome(None, "sandbox_error", "the compile sandbox ended without a report"
                              + (f"; {note}" if note else ""), "", seconds)
    import json

    try:
        info = json.loads(outcome)
        diag, rc, sig = str(info["diag"]), info["rc"], info["signal"]
        binary_hex = str(info["binary"])
    except (ValueError, KeyError, TypeError):
        return CompileOutcome(None, "sandbox_error", "a malformed compile report", "", seconds)
    if info.get("diag_bytes", 0) > DIAGNOSTICS_CAP:
        diag += f"\n[... {info['diag_bytes'] - DIAGNOSTICS_CAP} more bytes of diagnostics cut]"
    if oom or info.get("oom") or re.search(r"out of memory|virtual memory exhausted|Cannot allocate memory|Killed signal", diag):
        return fail(f"the compiler went over the {limits.memory_mb} MiB compile memory limit", diag)
    if "CPU time limit exceeded" in diag or sig == 24:
        return fail(f"the compiler ran past the {limits.timeout_s:g} s compile time limit", diag)
    if "File size limit exceeded" in diag or sig == 25 or info.get("size", 0) > MAX_BINARY_BYTES:
        return fail(f"the binary is larger than the {MAX_BINARY_BYTES // 1024} KiB limit", diag)
    if rc != 0 or sig is not None or not binary_hex:
        return fail(first_error_line(diag) or f"the compiler exited with status {rc}", diag)
    return CompileOutcome(bytes.fromhex(binary_hex), "passed", "", diag, seconds)


# --- running and judging ----------------------------------------------------------------------------------

class _CppVerdict:
    def __init__(self) -> None:
        self.status, self.detail = "failed", ""
        self.tests: list[str] = []
        self.test_errors: list[str] = []
        self.loaded = False


def _judge_binary(ch: Channel, backend: str, sig: CppSignature, cases: list[tuple[bytes, Any]],
                  timeout_s: float, v: _CppVerdict) -> None:
    judge = Judge(ch)          # for its reading of how the worker ended (died)
    ch.waiting = False         # nothing may arrive before the first request
    _started(ch, backend)
    ch.deadline = time.monotonic() + timeout_s
    budget = [MAX_VALUES]

    def ask(payload: bytes, where: str) -> tuple[str, _Reader]:
        rid = str(secrets.randbits(62))
        if ch.replies or ch.rbuf:
            raise Abort("failed", "protocol error: a reply arrived before the request was sent")
        data = ch.request(frame(rid.encode() + b" " + payload))
        if data is None:
            raise judge.died(where)
        reader = _Reader(data, budget)
        if reader.token() != rid.encode():
            raise Abort("failed", "protocol error: a reply to another request")
        return reader.token().decode("ascii", "replace"), reader

    kind, reader = ask(b"hello", "before its main started")
    if kind != "ready":
        raise Abort("failed", f"protocol error: a first reply of kind {kind[:20]!r}")
    reader.done()
    v.loaded = True
    for i, (args, expected) in enumerate(cases):
        kind, reader = ask(b"call " + args, "while answering a request")
        if kind == "v":
            got = reader.value(sig.returns)
            reader.done()
            ok = got == expected and type(got) is type(expected)
            v.tests.append("ok" if ok else "assert")
            v.test_errors.append("" if ok else f"case {i}: {sig.name} returned {_short(got)}, expected {_short(expected)}")
        elif kind == "e":
            what = reader.value("std::string")
            reader.done()
            v.tests.append("error")
            v.test_errors.append(f"case {i}: the program threw: {' '.join(what.split())[:300]}")
        elif kind == "m":
            reader.done()
            raise Abort("memory_limit", f"std::bad_alloc in the program (case {i})")
        else:
            raise Abort("failed", f"protocol error: a reply of kind {kind[:20]!r}")
    grace = min(ch.deadline + 1.0, time.monotonic() + 2.0)
    try:   # as the Python judge's finish: flush and exit; what the program does at exit cannot hold the run
        if ch.replies or ch.rbuf:
            raise Abort("failed", "protocol error: a reply arrived before the request was sent")
        ch.request(frame(str(secrets.randbits(62)).encode() + b" finish"), grace)
        ch.pump(lambda: ch.exit_info is not None, grace)
    except Abort as exc:
        if exc.status in ("output_limit", "failed"):
            raise
    if (ch.exit_info or {}).get("oom"):
        raise Abort("memory_limit", "the sample's processes together went over the memory limit (OOM kill)")
    if all(o == "ok" for o in v.tests):
        v.status = "passed"
    else:
        v.status = "runtime_error" if "error" in v.tests and "ok" not in v.tests else "failed"
        v.detail = next((e for e in v.test_errors if e), "")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _prepare_cases(sig: CppSignature, cases: Iterable) -> list[tuple[bytes, Any]]:
    out = []
    for i, case in enumerate(cases):
        if not (isinstance(case, (tuple, list)) and len(case) == 2):
            raise ValueError(f"case {i} must be an (args, expected) pair, got {_short(case)}")
        args, expected = case
        if type(args) is not tuple:
            if len(sig.params) != 1:
                raise ValueError(f"case {i}: {sig.name} takes {len(sig.params)} arguments; give them as a tuple")
            args = (args,)
        if len(args) != len(sig.params):
            raise ValueError(f"case {i}: {sig.name} takes {len(sig.params)} arguments, the case gives {len(args)}")
        try:
            encoded = b" ".join(encode_value(t, a) for t, a in zip(sig.params, args))
            encode_value(sig.returns, expected)
        except ValueError as exc:
            raise ValueError(f"case {i}: {exc} (declaration: {sig.declaration()})") from None
        if len(encoded) > MAX_FRAME - 64:
            raise ValueError(f"case {i}: the arguments are larger than {MAX_FRAME} bytes")
        out.append((encoded, list(expected) if isinstance(expected, tuple) else expected))
    return out


_unsafe_warned = False


def run_cpp_tests(source: str, signature: str, cases: Sequence, *, timeout_s: float | None = None,
                  memory_mb: int | None = None, backend: str | None = None,
                  compile_timeout_s: float | None = None, compile_memory_mb: int | None = None) -> SandboxResult:
    """Compile ``source`` (C++17, g++) with the course's driver for the function declared by
    ``signature`` (e.g. ``"long long total(const std::vector<long long>& xs)"``; the entry point is the
    declared name), run it in the sandbox, and judge it on ``cases`` — ``(args, expected)`` pairs, where
    ``args`` is a tuple with one value per parameter (for a one-parameter function a value that is not a
    tuple is the single argument) — here, in the calling process: the program receives only arguments.

    Returns a :class:`~course_lib.evaluation.sandbox.result.SandboxResult` with the Python judge's
    statuses: ``syntax_error`` when the source does not compile within the compile limits (``detail``:
    the compiler's first error line, or the limit; ``stderr``: the diagnostics, capped), else as a Python
    run: ``passed`` (every case equal), ``failed`` (a wrong answer, an exit or a broken protocol),
    ``runtime_error`` (killed by a signal — a segfault, ``std::terminate`` — or every failing case threw),
    ``timeout``, ``memory_limit`` (OOM kill or ``std::bad_alloc``), ``output_limit`` (over 64 KiB),
    ``sandbox_error``. ``.tests`` holds one outcome per case (``ok``, ``assert``, ``error``) and
    ``.planned`` marks every case as a planned test, so a run that ended early failed the cases it never
    answered; ``course_lib.evaluation.rewards.reward_of_result`` scores it like a Python run. ``duration_s``
    covers compiling and running; ``compile_s`` the compile phase.

    ``timeout_s``/``memory_mb`` limit the run (defaults 10 s / 128 MiB, as for Python);
    ``compile_timeout_s``/``compile_memory_mb`` the compiler (:data:`DEFAULT_COMPILE_TIMEOUT_S`,
    :data:`DEFAULT_COMPILE_MEMORY_MB`). ``backend`` follows :func:`~course_lib.evaluation.sandbox.policy.resolve_backend`.
    Bad cases (a value that does not fit its C++ type, the wrong number of arguments) and an unsupported
    signature raise ValueError naming the case; a source over :data:`MAX_SOURCE_BYTES` raises ValueError.
    Nothing the program does makes this raise. Introduced for issue 38 (lesson 11).
    """
    global _unsafe_warned
    if not isinstance(source, str):
        raise TypeError(f"source must be a str of C++ source, got {type(source).__name__}")
    size = len(source.encode("utf-8", "surrogatepass"))
    if size > MAX_SOURCE_BYTES:
        raise ValueError(f"the source is {size / 1024:.0f} KiB; the C++ judge accepts sources up to "
                         f"{MAX_SOURCE_BYTES // 1024} KiB")
    sig = parse_signature(signature)
    prepared = _prepare_cases(sig, cases)
    limits = Limits.of(timeout_s, memory_mb)
    compile_limits = Limits.of(DEFAULT_COMPILE_TIMEOUT_S if compile_timeout_s is None else compile_timeout_s,
                               DEFAULT_COMPILE_MEMORY_MB if compile_memory_mb is None else compile_memory_mb)
    name = resolve_backend(backend)
    if name == "unsafe" and not _unsafe_warned:
        _unsafe_warned = True
        warnings.warn("SANDBOX_BACKEND=unsafe: C++ is compiled and run as plain subprocesses — this is NOT "
                      "isolation. Use bwrap or docker.", RuntimeWarning, stacklevel=2)
    unit = translation_unit(source, sig)
    result = retry_sandbox_error(lambda: _run_once(unit, sig, prepared, limits, compile_limits, name), name)
    result.planned = [True] * len(prepared)
    return result


def _run_once(unit: str, sig: CppSignature, cases: list[tuple[bytes, Any]], limits: Limits,
              compile_limits: Limits, backend: str) -> SandboxResult:
    t0 = time.monotonic()
    built = compile_cpp(unit, backend=backend, timeout_s=compile_limits.timeout_s, memory_mb=compile_limits.memory_mb)
    if built.binary is None:
        return SandboxResult(built.status, "", built.diagnostics[-OUTPUT_CAP:], time.monotonic() - t0, None, backend,
                             detail=built.detail, compile_s=built.seconds)
    v = _CppVerdict()
    outcome, ch, oom, note = _phase(
        backend, limits, {"binary": True}, built.binary, TMP_BYTES + len(built.binary),
        lambda channel: _judge_binary(channel, backend, sig, cases, limits.timeout_s, v), tmp_exec=True)
    if isinstance(outcome, Abort):
        v.status, v.detail = outcome.status, outcome.detail
    if oom:
        v.status, v.detail = "memory_limit", (f"the sample's processes together went over {limits.memory_mb} MiB "
                                              "(cgroup OOM kill)")
    if v.status == "failed" and ch is not None and ch.started is None:
        v.status = "sandbox_error"
    info = (ch.exit_info if ch is not None else None) or {}
    exit_code = info["exit"] if "exit" in info else (-info["signal"] if "signal" in info else None)
    res = SandboxResult(v.status, ch.text("stdout").rstrip("\n") if ch else "", ch.text("stderr") if ch else "",
                        time.monotonic() - t0, exit_code, backend, v.tests, v.detail, v.test_errors,
                        exited_at_load=v.status == "failed" and not v.loaded and ch is not None and ch.started is not None,
                        compile_s=built.seconds)
    if note:
        res.detail = (res.detail + "; " if res.detail else "") + note
    return res


def run_cpp_many(items: Iterable[dict], *, workers: int = 4, **kw) -> list[SandboxResult]:
    """:func:`run_cpp_tests` over many samples on a pool of ``workers`` threads; ``items`` are dicts of
    its keywords (``source``, ``signature``, ``cases``, limits...), ``kw`` gives defaults. Results come
    back in input order; a broken item is a ``sandbox_error`` result for that item, never an exception
    for the batch. Introduced for issue 38 (lesson 11)."""
    jobs = [{**kw, **dict(it)} for it in items]
    if not jobs:
        return []
    backend = resolve_backend(kw.get("backend"))
    for job in jobs:
        job.setdefault("backend", backend)

    def work(job: dict) -> SandboxResult:
        try:
            return run_cpp_tests(**job)
        except BaseException as exc:  # noqa: BLE001 - never let one sample stop the batch
            return SandboxResult("sandbox_error", backend=job["backend"], detail=one_line(exc))

    with ThreadPoolExecutor(max_workers=max(1, int(workers))) as pool:
        return list(pool.map(work, jobs))
