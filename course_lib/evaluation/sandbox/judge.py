"""The judge: it runs in the calling (host) process, holds the tests and the expected values, and only
asks the sandboxed program questions.

The program runs in the sandbox (:mod:`course_lib.evaluation.sandbox.inside`, loaded as module
``__main__`` from ``solution.py``). After loading, the sandbox reports the program's global names; the
judge binds each to plain data or to a proxy, and executes every test — an assert string, HumanEval's
``check(candidate)``, a test file's function — **here**, in a namespace where those names are proxies:

* calling a proxy sends "call NAME with these arguments" (plain data or the program's own handles)
  and gets back the return value as plain data (or a handle), plus the arguments after the call, which
  are written back into the caller's lists, dicts, sets and bytearrays (functions that work in place);
* attribute access, ``len``, ``bool``, indexing and iteration are forwarded the same way; comparisons,
  hashing and ``in`` never are: a handle is equal only to itself, and ``x in handle`` iterates plain
  values and compares them here;
* an exception raised in the program re-raises here as the same built-in class (``ValueError``…) or as
  a class created here that subclasses the nearest built-in base, so ``except ValueError`` and
  ``pytest.raises`` work; a ``SystemExit``, ``KeyboardInterrupt`` or ``GeneratorExit`` from the program
  arrives as an ``Exception`` subclass of that name and never stops the judge;
* ``import`` in a test loads standard-library modules (and numpy, pandas, pytest) here; any other
  module — the program's own package, e.g. ``from store.inventory import Inventory`` — is imported in
  the sandbox and arrives as a proxy module. The judge imports only what the tests import: a program's
  global is plain data or a handle, never mapped to one of the judge's modules by its name or its
  class's text (``import math`` in the program gives the tests a handle, answered by the program), and
  a program's global named like a built-in (``abs``) is not visible to them: the tests' own arithmetic
  never runs in the program;
* a handle presents no protocol that lets the judge's libraries read memory or take the program's word
  for a number: no buffer, ``__array__``/``__array_interface__``/``__array_struct__``, DLPack,
  ``__index__``/``__int__``/``__float__`` — dunder attributes are never forwarded (numpy and
  ``pytest.approx`` see an opaque object);
* what a reply decodes to is budgeted per reply and per run (:data:`~course_lib.evaluation.sandbox.wire.
  REPLY_BUDGET`, :data:`~course_lib.evaluation.sandbox.wire.RUN_BUDGET`), counted before the JSON is
  built: over it the run fails;
* no ``BaseException`` of any kind leaves :func:`judge_run`: a run whose judging fails is that run's
  verdict (``failed``), and the caller's batch goes on.

Expected values never enter the sandbox, nothing the program writes to any file descriptor is a
verdict, and a program that rewrites the in-sandbox server can at most answer wrongly or break the
protocol (a failed run). Each request has the run's remaining time; a reply that is not asked for,
comes twice, carries the wrong request id or is not plain data fails the run.

Introduced in lesson 06.
"""
from __future__ import annotations

import builtins
import io
import json
import marshal
import os
import secrets
import select
import sys
import time
import traceback
from collections import deque
from types import CodeType
from typing import Any

from course_lib.evaluation.sandbox.inside import MAGIC
from course_lib.evaluation.sandbox.limits import OUTPUT_CAP
from course_lib.evaluation.sandbox.wire import MAX_FRAME, DecodeBudget, ProtocolError, decode, frame, request

REPLY_AFTER_EXIT_S = 2.0   # how long a reply may trail the exit report (Docker relays the two streams apart)
LOCAL_IMPORTS = frozenset({"pytest", "numpy", "pandas"})   # besides the standard library
_NEVER_LOCAL = frozenset({"antigravity", "this", "__hello__", "__phello__", "idlelib", "tkinter", "turtle",
                          "turtledemo"})


def is_local_module(name: str) -> bool:
    """Whether ``import name`` in a test (or a program's global that is that module) means the judge's
    own copy: the standard library, numpy, pandas and pytest. Everything else — the program's own
    modules — is imported in the sandbox."""
    top = str(name).partition(".")[0]
    return top in LOCAL_IMPORTS or (top in sys.stdlib_module_names and top not in _NEVER_LOCAL)


class Abort(BaseException):
    """The run ends now (time limit, output limit, the program died, a protocol error). A BaseException,
    so a test's ``except Exception`` cannot swallow it; the judge also remembers it."""

    def __init__(self, status: str, detail: str) -> None:
        super().__init__(f"{status}: {detail}")
        self.status, self.detail = status, detail


# --- the channel ---------------------------------------------------------------------------------------

class Channel:
    """The host's end of one sandbox run: requests go to the sandbox's stdin, replies come on its
    stdout (``>I`` length + JSON), and the in-sandbox supervisor's frames on its stderr (started, the
    program's stdout/stderr chunks, how the worker ended). Every wait has a deadline."""

    def __init__(self, proc, cap: int = OUTPUT_CAP) -> None:
        self.proc, self.cap = proc, cap
        self.wfd, self.rfd, self.efd = proc.stdin.fileno(), proc.stdout.fileno(), proc.stderr.fileno()
        for fd in (self.wfd, self.rfd, self.efd):
            os.set_blocking(fd, False)
        self.rbuf, self.ebuf, self.pre = bytearray(), bytearray(), bytearray()
        self.out, self.err = bytearray(), bytearray()
        self.out_total = self.err_total = 0
        self.magic = False
        self.started: dict | None = None
        self.exit_info: dict | None = None
        self.r_eof = self.e_eof = False
        self.pending = b""
        self.write_failed = False
        self.replies: deque[bytes] = deque()
        self.waiting = True   # the init message is the first request: the load report answers it
        self.deadline = time.monotonic() + 3600.0
        self.poller = select.poll()
        self.poller.register(self.rfd, select.POLLIN)
        self.poller.register(self.efd, select.POLLIN)

    # reading ------------------------------------------------------------------------------------------
    def _read(self, fd: int) -> bytes | None:
        """What is there (b"" at the end of the stream, None when nothing is there yet)."""
        try:
            return os.read(fd, 1 << 20)
        except BlockingIOError:
            return None
        except OSError:
            return b""

    @staticmethod
    def _report(payload: bytes) -> dict:
        try:
            info = json.loads(payload)
        except ValueError:
            raise Abort("failed", "protocol error: a malformed supervisor report") from None
        if not isinstance(info, dict):
            raise Abort("failed", "protocol error: a malformed supervisor report")
        return {k: v for k, v in info.items() if type(v) in (int, bool)}

    def _on_reply_bytes(self, chunk: bytes) -> None:
        self.rbuf += chunk
        while len(self.rbuf) >= 4:
            size = int.from_bytes(self.rbuf[:4], "big")
            if size > MAX_FRAME:
                raise Abort("failed", f"protocol error: a reply of {size} bytes is over the {MAX_FRAME}-byte limit")
            if len(self.rbuf) < 4 + size:
                return
            data = bytes(self.rbuf[4:4 + size])
            del self.rbuf[:4 + size]
            if not self.waiting:
                raise Abort("failed", "protocol error: a reply arrived that was not asked for "
                                      "(answered before the request, or twice)")
            self.waiting = False
            self.replies.append(data)

    def _on_supervisor_bytes(self, chunk: bytes) -> None:
        if not self.magic:
            self.pre += chunk
            at = self.pre.find(MAGIC)
            if at < 0:
                if len(self.pre) > 1 << 20:   # what came before the server started: its last MiB is enough
                    del self.pre[:-(1 << 19)]
                return
            self.magic = True
            chunk = bytes(self.pre[at + len(MAGIC):])
            del self.pre[at:]
        self.ebuf += chunk
        while len(self.ebuf) >= 5:
            kind, size = self.ebuf[0:1], int.from_bytes(self.ebuf[1:5], "big")
            if size > MAX_FRAME:
                raise Abort("failed", f"protocol error: a supervisor frame of {size} bytes")
            if len(self.ebuf) < 5 + size:
                return
            payload = bytes(self.ebuf[5:5 + size])
            del self.ebuf[:5 + size]
            if kind == b"O":
                self.out_total += len(payload)
                self.out += payload[: max(0, self.cap + 1 - len(self.out))]
            elif kind == b"E":
                self.err_total += len(payload)
                self.err += payload[: max(0, self.cap + 1 - len(self.err))]
            elif kind == b"S":
                self.started = self._report(payload)
            elif kind == b"X":
                self.exit_info = self._report(payload)
            else:
                raise Abort("failed", f"protocol error: unknown supervisor frame {kind!r}")
        if self.out_total > self.cap or self.err_total > self.cap:
            raise Abort("output_limit", f"more than {self.cap // 1024} KiB of output")

    def pump(self, done, deadline: float | None = None, on_timeout: str = "timeout") -> None:
        """Move bytes until ``done()`` is true. Raises :class:`Abort` on the deadline (``on_timeout``),
        an output over the cap, a protocol error, or when nothing more can arrive."""
        deadline = self.deadline if deadline is None else deadline
        while not done():
            if self.r_eof and self.e_eof:
                raise Abort("failed", "the sandbox closed its pipes")
            left = deadline - time.monotonic()
            if left <= 0:
                raise Abort(on_timeout, "killed after the time limit" if on_timeout == "timeout"
                            else "the sandbox did not start in time")
            if self.pending:
                try:
                    n = os.write(self.wfd, self.pending[:1 << 20])
                    self.pending = self.pending[n:]
                except BlockingIOError:
                    pass
                except OSError:
                    self.pending, self.write_failed = b"", True
                if self.pending:
                    self.poller.register(self.wfd, select.POLLOUT)
                else:
                    try:
                        self.poller.unregister(self.wfd)
                    except KeyError:
                        pass
            for fd, _ev in self.poller.poll(max(1, min(int(left * 1000) + 1, 500))):
                if fd == self.wfd:
                    continue
                chunk = self._read(fd)
                if chunk is None:
                    continue
                if not chunk:
                    self.poller.unregister(fd)
                    if fd == self.rfd:
                        self.r_eof = True
                    else:
                        self.e_eof = True
                    continue
                if fd == self.rfd:
                    self._on_reply_bytes(chunk)
                else:
                    self._on_supervisor_bytes(chunk)
            if self.waiting and self.r_eof and not self.replies:
                return   # nobody can reply any more

    def _drain_replies(self) -> None:
        while not self.r_eof:
            chunk = self._read(self.rfd)
            if chunk is None:
                return
            if not chunk:
                self.r_eof = True
                return
            self._on_reply_bytes(chunk)

    def send(self, data: bytes) -> None:
        self.pending += data

    def request(self, data: bytes, deadline: float | None = None) -> bytes | None:
        """Send one request frame and wait for its reply frame; None when the worker ended without replying."""
        if self.replies or self.rbuf:
            raise Abort("failed", "protocol error: a reply arrived before the request was sent")
        self.send(data)
        return self.reply(deadline)

    def reply(self, deadline: float | None = None) -> bytes | None:
        """Wait for the reply to the request in flight; None when the worker ended without replying."""
        self.waiting = True
        self.pump(lambda: bool(self.replies) or self.exit_info is not None, deadline)
        if not self.replies and self.exit_info is not None:
            self._drain_replies()   # a reply written just before the worker exited
            if not self.replies and not self.r_eof:
                # Docker relays the container's stdout and stderr as two streams: the supervisor's exit frame
                # (stderr) can arrive before the last reply (stdout) has; wait for that stream to end
                until = time.monotonic() + REPLY_AFTER_EXIT_S
                try:
                    self.pump(lambda: bool(self.replies) or self.r_eof,
                              until if deadline is None else min(until, deadline))
                except Abort:
                    pass
        if self.replies:
            return self.replies.popleft()
        self.waiting = False
        return None

    def text(self, which: str) -> str:
        data = self.out if which == "stdout" else self.err
        text = bytes(data[: self.cap]).decode("utf-8", errors="replace")
        total = self.out_total if which == "stdout" else self.err_total
        return text + ("\n[... output truncated]" if total > self.cap else "")


# --- remote objects -------------------------------------------------------------------------------------

# dunder attributes a test may read from a handle: plain descriptions, never a protocol
_PLAIN_DUNDERS = frozenset({"__name__", "__qualname__", "__doc__", "__module__", "__dict__", "__annotations__"})


def forwarded_attribute(name: str) -> bool:
    """Whether ``handle.name`` is asked of the program. Dunder names are not (except plain descriptions
    such as ``__name__``): libraries probe objects for protocols by name — numpy's ``__array__``,
    ``__array_interface__`` and ``__array_struct__``, DLPack's ``__dlpack__``, ``__index__``,
    ``__float__``, ``__buffer__``, ``__deepcopy__`` — and a program's answer to one of those would be
    taken as the truth (a wrong number, or an address for numpy to read). Private names (``_x``) are
    forwarded. Introduced in lesson 06."""
    if not isinstance(name, str):
        return False
    if name.startswith("__") and name.endswith("__"):
        return name in _PLAIN_DUNDERS
    return not name.startswith(("_repr_", "_ipython_", "_array_", "_numpy_"))


class Remote:
    """A handle to an object that lives in the sandboxed program. Attribute access, calls, ``len``,
    ``bool``, indexing and iteration are forwarded; equality and hashing are identity, here."""

    __slots__ = ("_sb_judge", "_sb_id", "_sb_class", "__weakref__")

    def __init__(self, judge: "Judge", at: int, cls: str) -> None:
        object.__setattr__(self, "_sb_judge", judge)
        object.__setattr__(self, "_sb_id", at)
        object.__setattr__(self, "_sb_class", cls)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_sb_") or not forwarded_attribute(name):
            raise AttributeError(f"{name!r} of a remote object is not asked for: a handle presents no protocol")
        return self._sb_judge.ask("getattr", self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if not forwarded_attribute(name):
            raise AttributeError(f"{name!r} of a remote object cannot be set from the tests")
        self._sb_judge.ask("setattr", self, name, value)

    def __len__(self) -> int:
        n = self._sb_judge.ask("len", self)
        if type(n) is not int:
            raise TypeError("len() of a remote object did not give an int")
        return n

    def __bool__(self) -> bool:
        return bool(self._sb_judge.ask("bool", self))

    def __getitem__(self, key: Any) -> Any:
        return self._sb_judge.ask("getitem", self, key)

    def __iter__(self):
        it = self._sb_judge.ask("iter", self)
        if not isinstance(it, Remote):
            yield from iter(it)
            return
        while True:
            try:
                yield self._sb_judge.ask("next", it)
            except StopIteration:
                return

    def __repr__(self) -> str:
        return f"<remote {self._sb_class} #{self._sb_id}>"


class RemoteCallable(Remote):
    """A handle to a function, class or other callable of the program."""

    __slots__ = ()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._sb_judge.call(self, args, kwargs)


class RemoteException(Exception):
    """Base of the classes made here for the program's own exception types (and for its ``SystemExit``
    / ``KeyboardInterrupt``, which must never stop the judge)."""


_EXC_CLASSES: dict[tuple[str, type], type] = {}


def _remote_exception(info: Any) -> BaseException:
    """The exception to raise here for one the program raised (``[type, builtin bases, is builtin,
    message, args, traceback]``)."""
    if not (isinstance(info, list) and len(info) == 6):
        raise ProtocolError("a malformed exception")
    name, bases, is_builtin, message, args, tb = info
    name = "".join(c for c in str(name)[:100] if c.isalnum() or c in "._") or "Exception"
    message = str(message)[:2000]
    base: type = Exception
    for b in bases if isinstance(bases, list) else []:
        cand = getattr(builtins, str(b), None)
        if isinstance(cand, type) and issubclass(cand, BaseException):
            base = cand if issubclass(cand, Exception) else Exception
            break
    if is_builtin and getattr(builtins, name, None) is base:
        cls = base
    else:
        cls = _EXC_CLASSES.get((name, base))
        if cls is None:
            parents = (RemoteException,) if base is Exception else (base, RemoteException)
            try:
                cls = type(name.rsplit(".", 1)[-1], parents, {"__module__": "sandboxed program"})
            except TypeError:
                cls = type(name.rsplit(".", 1)[-1], (RemoteException,), {"__module__": "sandboxed program"})
            if len(_EXC_CLASSES) < 2000:
                _EXC_CLASSES[(name, base)] = cls
    exc = None
    if isinstance(args, tuple):
        try:
            exc = cls(*args)
        except Exception:
            exc = None
    if exc is None:
        try:
            exc = cls(message)
        except Exception:
            exc = RemoteException(f"{name}: {message}")
    exc.remote_traceback = tb if isinstance(tb, str) else ""
    return exc


def _write_back(old: Any, new: Any) -> None:
    """Make the caller's container ``old`` hold what the program left in its copy (``new``)."""
    if type(old) is list and type(new) is list:
        for i in range(min(len(old), len(new))):
            if type(old[i]) in (list, dict, set, bytearray) and type(new[i]) is type(old[i]):
                _write_back(old[i], new[i])
            else:
                old[i] = new[i]
        if len(new) < len(old):
            del old[len(new):]
        else:
            old.extend(new[len(old):])
    elif type(old) is dict and type(new) is dict:
        old.clear()
        old.update(new)
    elif type(old) is set and type(new) in (set, frozenset):
        old.clear()
        old.update(new)
    elif type(old) is bytearray and type(new) in (bytes, bytearray):
        old[:] = new


# --- the judge ---------------------------------------------------------------------------------------------

class Judge:
    """One run's judge: the channel, the handles, the namespace the tests run in."""

    def __init__(self, channel: Channel) -> None:
        self.ch = channel
        self.handles: dict[int, Remote] = {}
        self.aborted: Abort | None = None
        self.judge_out = io.StringIO()
        self.budget = DecodeBudget()   # what this run's replies may still decode to

    # values
    def _make_handle(self, spec: Any) -> Any:
        if not (isinstance(spec, list) and len(spec) == 4 and type(spec[0]) is int and spec[0] >= 0):
            raise ProtocolError("a malformed handle")
        at, cls, is_callable, module = spec
        proxy = self.handles.get(at)
        if proxy is None:
            kind = RemoteCallable if is_callable else Remote
            proxy = kind(self, at, f"module {str(module)[:100]}" if module else str(cls)[:100])
            self.handles[at] = proxy
        return proxy

    def _handle_id(self, value: Any) -> int | None:
        if isinstance(value, Remote) and value._sb_judge is self:
            return value._sb_id
        return None

    def _decode(self, data: bytes) -> Any:
        return decode(data, self._make_handle, self.budget)

    def _abort(self, exc: Abort) -> Abort:
        if self.aborted is None:
            self.aborted = exc
        return self.aborted

    def exchange(self, op: str, target: Remote | None, *args: Any) -> list:
        """Send a request, return the decoded reply ``[id, kind, ...]``; raises Abort when the run ends,
        TypeError when an argument cannot be sent to the program."""
        if self.aborted is not None:
            raise self.aborted
        nonce = secrets.randbits(62)
        try:
            data = request(op, nonce, None if target is None else target._sb_id, args, self._handle_id)
        except (TypeError, ValueError) as exc:
            raise TypeError(str(exc)) from None
        try:
            data = self.ch.request(data)
            if data is None:
                raise self.died("while answering a request")
            reply = self._decode(data)
            if not (isinstance(reply, list) and len(reply) >= 2 and reply[0] == nonce):
                raise Abort("failed", "protocol error: a reply to another request")
        except ProtocolError as exc:
            raise self._abort(Abort("failed", f"protocol error: {exc}")) from None
        except Abort as exc:
            raise self._abort(exc) from None
        return reply

    def _result(self, reply: list) -> Any:
        kind = reply[1]
        if kind == "v" and len(reply) in (3, 4):
            return reply[2]
        if kind == "e" and len(reply) in (3, 4):
            try:
                exc = _remote_exception(reply[2])
            except ProtocolError as err:
                raise self._abort(Abort("failed", f"protocol error: {err}")) from None
            raise exc
        if kind == "memory":
            raise self._abort(Abort("memory_limit", "MemoryError in the program"))
        raise self._abort(Abort("failed", f"protocol error: a reply of kind {str(kind)[:20]!r}"))

    def ask(self, op: str, target: Remote | None, *args: Any) -> Any:
        return self._result(self.exchange(op, target, *args))

    def call(self, fn: Remote, args: tuple, kwargs: dict) -> Any:
        back = [i for i, a in enumerate(args) if type(a) in (list, dict, set, bytearray)]
        back += [k for k, a in kwargs.items() if type(a) in (list, dict, set, bytearray)]
        reply = self.exchange("call", fn, list(args), dict(kwargs), back)
        if len(reply) == 4 and isinstance(reply[3], dict):
            for key, after in reply[3].items():
                if type(key) is int and 0 <= key < len(args) and key in back:
                    _write_back(args[key], after)
                elif type(key) is str and key in kwargs and key in back:
                    _write_back(kwargs[key], after)
        return self._result(reply)

    def died(self, where: str) -> Abort:
        """The worker ended while the judge waited: why, as the run's status."""
        ch = self.ch
        if ch.exit_info is None:
            try:
                ch.pump(lambda: ch.exit_info is not None, min(ch.deadline, time.monotonic() + 2.0))
            except Abort:
                pass
        info = ch.exit_info or {}
        if info.get("oom"):
            return self._abort(Abort("memory_limit", "the sample's processes together went over the memory "
                                                     "limit (OOM kill)"))
        sig = info.get("signal")
        if sig == 24:  # SIGXCPU
            return self._abort(Abort("timeout", "CPU time limit"))
        if sig is not None:
            return self._abort(Abort("runtime_error", f"killed by signal {sig} {where}"))
        if "exit" in info:
            return self._abort(Abort("failed", f"the program exited (code {info['exit']}) {where}: "
                                               "an early exit is not a pass"))
        return self._abort(Abort("failed", f"the sandbox's processes ended {where}"))

    # importing in tests
    def import_(self, name: str, globals: Any = None, locals: Any = None, fromlist: Any = (),
                level: int = 0) -> Any:
        if level:
            raise ImportError("relative imports are not available in tests")
        if is_local_module(name):
            return builtins.__import__(name, globals, locals, fromlist, level)
        return self.ask("import", None, name, [str(x) for x in (fromlist or ())])

    def namespace(self, names: dict) -> dict:
        """The tests' globals: the program's names (plain data or handles — a program's module is a handle
        too: the judge imports only what the tests import), and builtins whose ``__import__`` and
        ``print`` are the judge's. A program's name that shadows a built-in (``abs``, ``len``,
        ``sorted``...) is left out: the tests' own arithmetic always uses the real built-ins, so a program cannot answer it."""
        judge_builtins = dict(builtins.__dict__)
        judge_builtins["__import__"] = self.import_

        def judge_print(*values: Any, sep: str | None = " ", end: str | None = "\n", file: Any = None,
                        flush: bool = False) -> None:
            builtins.print(*values, sep=sep, end=end, file=self.judge_out if file is None else file, flush=flush)

        judge_builtins["print"] = judge_print
        ns: dict[str, Any] = {"__builtins__": judge_builtins, "__name__": "__main__"}
        for key, value in names.items():
            if not isinstance(key, str) or key in judge_builtins or key.startswith("__"):
                continue
            ns[key] = value   # plain data or a handle: never one of the judge's modules
        return ns


def one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:400]


# --- judging one run ---------------------------------------------------------------------------------------

class Verdict:
    """What the judge decided for one run (the host turns it into a :class:`SandboxResult`)."""

    def __init__(self) -> None:
        self.status = "failed"
        self.detail = ""
        self.tests: list[str] = []
        self.test_errors: list[str] = []
        self.notes: list[str] = []    # tracebacks of the tests that raised, for stderr
        self.exit_code: int | None = None
        self.judge_stdout = ""        # what the tests themselves printed
        self.loaded = False           # the program's code finished loading (its names reached the judge)
        self.exited_at_load = False   # it ended (exit, a death, a broken report) before any test could run


def judge_run(channel: Channel, tests: list[CodeType], *, timeout_s: float, startup_s: float,
              load_nonce: int) -> Verdict:
    """Wait for the sandbox to start, receive the program's load report, run ``tests`` here, finish.
    Every way a run can end is a :class:`Verdict` (the caller then kills the sandbox)."""
    v = Verdict()
    judge = Judge(channel)
    ch = channel
    try:
        ch.pump(lambda: ch.started is not None or ch.e_eof, time.monotonic() + startup_s, on_timeout="sandbox_error")
        if ch.started is None:
            v.status = "sandbox_error"
            return v
        ch.deadline = time.monotonic() + timeout_s   # the sample's clock starts now
        data = ch.reply()
        if data is None:
            raise judge.died("before its code finished")
        try:
            first = judge._decode(data)
        except ProtocolError as exc:
            raise judge._abort(Abort("failed", f"protocol error: {exc}")) from None
        if not (isinstance(first, list) and len(first) >= 2 and first[0] == load_nonce):
            raise judge._abort(Abort("failed", "protocol error: a load report for another run"))
        kind = first[1]
        if kind == "syntax" and len(first) == 3:
            v.status, v.detail = "syntax_error", str(first[2])[:500]
        elif kind == "error" and len(first) == 3 and isinstance(first[2], list) and len(first[2]) == 6:
            v.status, v.detail = "runtime_error", " ".join(f"{first[2][0]}: {first[2][3]}".split())[:400]
        elif kind == "memory":
            v.status, v.detail = "memory_limit", "MemoryError while running the code"
        elif kind == "exit" and len(first) == 4:
            v.status = "failed"
            v.detail = f"the program exited with a non-zero status ({str(first[3])[:200]})"
        elif kind != "ok" or len(first) != 3 or not isinstance(first[2], dict):
            raise judge._abort(Abort("failed", f"protocol error: a load report of kind {str(kind)[:20]!r}"))
        else:
            v.loaded = True
            _run_tests(judge, judge.namespace(first[2]), tests, v)
            _finish(judge)
            if (ch.exit_info or {}).get("oom"):
                v.status = "memory_limit"
                v.detail = "the sample's processes together went over the memory limit (OOM kill)"
            elif all(o == "ok" for o in v.tests):
                v.status = "passed"
            else:
                v.status = "runtime_error" if "error" in v.tests and "ok" not in v.tests else "failed"
                v.detail = next((e for e in v.test_errors if e), "")
    except Abort as exc:
        v.status, v.detail = exc.status, exc.detail
    except BaseException as exc:   # noqa: BLE001 - whatever judging raised is this run's failure, never the caller's
        v.status, v.detail = "failed", f"the judge could not finish this run ({one_line(exc)})"
    v.exited_at_load = v.status == "failed" and not v.loaded and ch.started is not None
    info = ch.exit_info or {}
    v.exit_code = info["exit"] if "exit" in info else (-info["signal"] if "signal" in info else None)
    v.judge_stdout = judge.judge_out.getvalue()
    return v


def _run_tests(judge: Judge, ns: dict, tests: list[CodeType], v: Verdict) -> None:
    """Each test in the judge's namespace, in order; one outcome each (``ok``, ``assert``, ``error``).
    Raises :class:`Abort` when the run ended during a test."""
    for i, code in enumerate(tests):
        try:
            exec(code, ns)
            outcome, why = "ok", ""
        except Abort:
            break
        except AssertionError as exc:
            outcome, why = "assert", one_line(exc)
        except BaseException as exc:  # the test's own error, or one the program raised
            outcome, why = "error", one_line(exc)
            remote_tb = getattr(exc, "remote_traceback", "")
            v.notes.append(f"test {i}: " + (remote_tb or "".join(traceback.format_exception(exc))[-4000:]))
        if judge.aborted is not None:
            break
        v.tests.append(outcome)
        v.test_errors.append(why)
    if judge.aborted is not None:
        raise judge.aborted


def _finish(judge: Judge) -> None:
    """Ask the worker to flush and exit, and wait briefly for the supervisor's exit report (output
    complete, an OOM kill seen). Nothing the program does at exit can hold the run: after a short grace
    the verdict stands."""
    ch = judge.ch
    grace = min(ch.deadline + 1.0, time.monotonic() + 2.0)
    try:
        if ch.replies or ch.rbuf:
            raise Abort("failed", "protocol error: a reply arrived before the request was sent")
        ch.request(request("finish", 0, None, (), lambda _: None), grace)
        ch.pump(lambda: ch.exit_info is not None, grace)
    except Abort as exc:
        if exc.status in ("output_limit", "failed"):
            raise judge._abort(exc) from None


def init_message(header: dict, code: bytes) -> bytes:
    """The first message to the sandbox: the run's header (marshal) and the program's bytes."""
    return frame(marshal.dumps(header)) + frame(code)
