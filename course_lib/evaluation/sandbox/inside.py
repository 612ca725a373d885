"""The sandbox side of the course's judge: a small server that runs INSIDE the sandbox (every backend).

The host starts it as ``python3 -I -c <the source of this file>`` (``-I``: no environment variables, no
user site; ``site`` stays on, as for ``python file.py``). It must stay standard-library only: the
sandbox's interpreter is the system Python. Nothing here decides a verdict — the judge runs in the
host's process (:mod:`course_lib.evaluation.sandbox.judge`), holds the tests and the expected values,
and only asks this server questions about the program. Whatever the program does to this process
(rewrite these functions, write to every file descriptor, answer for the server) can at most give a
wrong answer or break the protocol, which the judge counts as a failure.

Two processes:

* the **supervisor** (the first process) reads the run's header and the program from stdin, writes the
  program to ``/tmp/sample-N/solution.py``, lowers the rlimits, installs the course's seccomp filter
  when the header carries one (Docker: on top of Docker's own profile), makes itself non-dumpable and
  writes the "started" frame (the host's clock for the sample starts there). Then it forks the worker,
  relays what the program writes to fd 1 and fd 2 to the host as frames on its own stderr, and finally
  reports how the worker ended (exit status, and an OOM kill seen in the container's cgroup). It never
  reads a request and never runs program code.
* the **worker** keeps the host's request pipe (stdin) and reply pipe (stdout) on private descriptors,
  points fd 0 at ``/dev/null`` and fd 1/2 at the supervisor's pipes, narrows its file-system view with
  Landlock when the kernel has it (no ``/proc``, no ``/sys``, nothing outside the system's Python,
  ``/etc``, ``/tmp`` and ``/dev``; it cannot signal the supervisor), loads the program as module
  ``__main__`` and answers one reply per request: load → the program's global names; call / getattr /
  setattr / getitem / len / bool / iter / next / import → a value or an exception; finish → exit.

Values cross to the judge as tagged JSON (:mod:`course_lib.evaluation.sandbox.wire`) and only as plain
data: ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, ``complex``, ``list``, ``tuple``,
``dict``, ``set``, ``frozenset``. Subclasses of these cross as their base value (an ``int`` subclass
with its own ``__eq__`` arrives as the plain ``int``), numpy values as ``.tolist()``; anything else
crosses as a numbered handle the judge can only call or ask for attributes.

Frames (``>I`` length + payload): requests from the judge are ``marshal`` data (the trusted direction;
a handle is ``(Ellipsis, id)``, a bytearray ``(Ellipsis, "A", bytes)``); replies are JSON written with
the C encoder of ``_json`` (importing ``json`` would import ``re``: ~8 ms per sample); the supervisor's
frames on stderr follow a magic line and are ``kind byte + >I length + payload``; the init message is
a marshal header and the program's bytes.

Introduced in lesson 06.
"""
import marshal
import os
import struct
import sys

MAGIC = b"\x00course-sandbox-judge/1\x00"
MAX_FRAME = 16 * 1024 * 1024      # one request or reply; the judge enforces the same cap
MAX_DEPTH = 100                   # nesting of one value
_U32 = struct.Struct(">I")


# --- both processes --------------------------------------------------------------------------------

def _json_writer():
    """``dumps(obj) -> bytes``: JSON with ``NaN``/``Infinity``, every non-ASCII character escaped."""
    def refuse(obj):
        raise TypeError("not JSON: %s" % type(obj).__name__)

    try:
        import _json
        encode = _json.make_encoder(None, refuse, _json.encode_basestring_ascii, None, ":", ",",
                                    False, False, True)

        def dumps(obj):
            return "".join(encode(obj, 0)).encode("ascii")

        if dumps([1, -2.5, "\ud800\u00e9", {"a": None}, True]) != b'[1,-2.5,"\\ud800\\u00e9",{"a":null},true]':
            raise ValueError("unexpected _json")
        return dumps
    except Exception:   # another interpreter: the json package (slower to import, same output)
        import json
        return lambda obj: json.dumps(obj).encode("ascii")


_dumps = _json_writer()

def _read_exact(fd, n):
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _read_frame(fd, limit=MAX_FRAME):
    head = _read_exact(fd, 4)
    if head is None:
        return None
    size = _U32.unpack(head)[0]
    if size > limit:
        raise ValueError("frame of %d bytes is over the limit" % size)
    return _read_exact(fd, size)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


# --- the supervisor ----------------------------------------------------------------------------------

def _set_limits(limits):
    import resource
    names = {"as": "RLIMIT_AS", "cpu": "RLIMIT_CPU", "fsize": "RLIMIT_FSIZE",
             "nofile": "RLIMIT_NOFILE", "nproc": "RLIMIT_NPROC", "core": "RLIMIT_CORE"}
    for key, value in limits.items():
        if key not in names or value is None:
            continue
        soft = hard = int(value)
        if key == "cpu":
            hard = soft + 1  # SIGXCPU first (reported as a timeout), SIGKILL one second later
        try:
            resource.setrlimit(getattr(resource, names[key]), (soft, hard))
        except (ValueError, OSError):
            pass


def _libc():
    import ctypes
    return ctypes, ctypes.CDLL(None, use_errno=True)


def _install_seccomp(hex_program):
    # The course's seccomp filter (classic BPF, hex in the header) when the backend sends one: Docker's
    # default profile allows netlink and other socket families, so it goes on top of it.
    # no_new_privs first, as the kernel requires for an unprivileged filter.
    ctypes, libc = _libc()
    data = bytes.fromhex(hex_program)
    buf = ctypes.create_string_buffer(data, len(data))

    class _FProg(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = _FProg(len(data) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "the sandbox's seccomp filter could not be installed")


def _dumpable(flag):
    try:
        _libc()[1].prctl(4, flag, 0, 0, 0)  # PR_SET_DUMPABLE
    except Exception:
        pass


def _landlock_abi():
    try:
        return max(0, int(_libc()[1].syscall(444, None, 0, 1)))  # landlock_create_ruleset(VERSION)
    except Exception:
        return 0


def _oom_killed():
    # inside a container its cgroup's OOM counter is visible (bwrap: the host reads its own cgroup)
    for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
        try:
            with open(path) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and value.strip() not in ("", "0"):
                        return True
        except OSError:
            pass
    return False


def _frame(kind, payload=b""):
    return kind + _U32.pack(len(payload)) + payload


def supervise():
    header = _read_frame(0)
    code = _read_frame(0, 1 << 30)
    if header is None or code is None:
        raise SystemExit("sandbox: short init message")
    header = marshal.loads(header)
    report = os.dup(2)
    folder = "/tmp/sample-%d" % os.getpid()
    os.mkdir(folder, 0o700)
    if header.get("compile"):   # C++: compile the source with the header's command, report, exit
        _compile(header, folder, code, report)
    binary = bool(header.get("binary"))   # C++: the program is an executable (the judge's driver linked in)
    filename = folder + ("/prog" if binary else "/solution.py")
    with open(filename, "wb") as f:   # before the rlimits: a program of any size the tmpfs holds is written
        f.write(code)
    del code
    if binary:
        os.chmod(filename, 0o700)
    _set_limits(header.get("limits") or {})
    if header.get("seccomp"):
        _install_seccomp(header["seccomp"])
    _dumpable(0)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    abi = _landlock_abi() if header.get("landlock") else 0
    sys.stdout.flush()
    sys.stderr.flush()
    _write_all(report, MAGIC + _frame(b"S", _dumps({"landlock": abi})))
    pid = os.fork()
    if pid == 0:
        try:
            os.close(out_r)
            os.close(err_r)
            os.close(report)
            req, rep = os.dup(0), os.dup(1)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            for fd in (null, out_w, err_w):
                os.close(fd)
            _dumpable(1)
            if binary:
                _exec_binary(filename, req, rep, abi)
            serve(header, filename, folder, req, rep, abi)
        finally:
            os._exit(70)
    os.close(out_w)
    os.close(err_w)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)   # the supervisor holds neither the request nor the reply pipe
    os.dup2(null, 1)
    os.close(null)
    _relay(pid, out_r, err_r, report, folder if header.get("cleanup") else None)


def _relay(pid, out_r, err_r, report, cleanup=None):
    import select
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    open_fds = {out_r: b"O", err_r: b"E"}
    status = None
    while status is None:
        watch = list(open_fds) + ([pidfd] if pidfd is not None else [])
        ready, _, _ = select.select(watch, [], [], 0.05 if pidfd is None else None)
        for fd in ready:
            if fd == pidfd:
                continue
            chunk = os.read(fd, 65536)
            if chunk:
                _write_all(report, _frame(open_fds[fd], chunk))
            else:
                del open_fds[fd]
        if pidfd in ready or pidfd is None or not ready:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
    for fd, kind in open_fds.items():   # drain what is there; a forked daemon may hold the pipes open
        os.set_blocking(fd, False)
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            _write_all(report, _frame(kind, chunk))
    info = {"oom": _oom_killed()}
    if os.WIFSIGNALED(status):
        info["signal"] = os.WTERMSIG(status)
    else:
        info["exit"] = os.WEXITSTATUS(status)
    _write_all(report, _frame(b"X", _dumps(info)))
    if cleanup:   # the unsafe backend's /tmp is the host's: leave nothing behind
        for root, dirs, files in os.walk(cleanup, topdown=False):
            for name in files:
                try:
                    os.unlink(os.path.join(root, name))
                except OSError:
                    pass
            for name in dirs:
                try:
                    os.rmdir(os.path.join(root, name))
                except OSError:
                    pass
        try:
            os.rmdir(cleanup)
        except OSError:
            pass
    os._exit(0)


# --- C++: compiling a source, running a binary ---------------------------------------------------

_SYSTEM_READ = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"]


def _compile(header, folder, source, report):
    """Compile mode (C++): write the source, narrow this process's view (Landlock: read the toolchain
    under /usr, write only /tmp; no /proc), run the header's compiler command with the run's rlimits
    (``fsize``: the largest binary), keep the first ``diag_cap`` bytes of its diagnostics, and answer
    the init message with one reply: exit status, signal, diagnostics, OOM seen, and the binary (hex).
    The compiler reads nothing the sandbox does not show it: ``#include "/etc/passwd"`` finds what the
    sandbox's /etc holds, not the host's. Never returns."""
    import subprocess
    import time
    with open(folder + "/" + header["source_name"], "wb") as f:
        f.write(source)
    del source
    _set_limits(header.get("limits") or {})
    if header.get("seccomp"):
        _install_seccomp(header["seccomp"])
    oom_fds = []   # the container's OOM counters, opened before Landlock hides /sys
    for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
        try:
            oom_fds.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
        except OSError:
            pass
    abi = _landlock_abi() if header.get("landlock") else 0
    if abi:
        _landlock(abi, _SYSTEM_READ, ["/tmp", "/dev"])
    _write_all(report, MAGIC + _frame(b"S", _dumps({"landlock": abi})))
    cap = int(header.get("diag_cap") or 65536)
    t0 = time.monotonic()
    env = {"PATH": "/usr/bin:/bin", "LANG": "C", "LC_ALL": "C", "TMPDIR": folder, "HOME": folder}
    proc = subprocess.Popen(header["argv"], cwd=folder, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            close_fds=True)
    kept, total = [], 0
    while True:
        chunk = proc.stdout.read1(65536) if hasattr(proc.stdout, "read1") else proc.stdout.read(65536)
        if not chunk:
            break
        if total < cap:
            kept.append(chunk[: cap - total])
        total += len(chunk)
    status = proc.wait()
    info = {"rc": status if status >= 0 else None, "signal": -status if status < 0 else None,
            "diag": b"".join(kept).decode("utf-8", "replace"), "diag_bytes": total,
            "seconds": round(time.monotonic() - t0, 4), "oom": any(_oom_in(fd) for fd in oom_fds), "binary": ""}
    out = folder + "/" + header["output_name"]
    if status == 0:
        try:
            size = os.path.getsize(out)
            info["size"] = size
            if size <= int(header.get("max_binary") or 0):
                with open(out, "rb") as f:
                    info["binary"] = f.read().hex()
        except OSError as exc:
            info["diag"] += "\nno binary: %s" % exc
    data = _dumps(info)
    _write_all(1, _U32.pack(len(data)) + data)
    if header.get("cleanup"):   # the unsafe backend's /tmp is the host's
        import shutil
        shutil.rmtree(folder, ignore_errors=True)
    _write_all(report, _frame(b"X", _dumps({"exit": 0, "oom": info["oom"]})))
    os._exit(0)


def _oom_in(fd):
    try:
        text = os.pread(fd, 65536, 0).decode("ascii", "replace")
    except OSError:
        return False
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip() not in ("", "0"):
            return True
    return False


def _exec_binary(path, req, rep, abi):
    """Binary mode (C++), in the worker: the request pipe on fd 3 and the reply pipe on fd 4 (where the
    judge's driver reads and writes its frames), fd 0 ``/dev/null``, fd 1/2 the supervisor's relay pipes,
    no other descriptor; Landlock as for Python programs; then exec the program. Never returns."""
    import fcntl
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (req, rep)]
    for fd in (req, rep):
        os.close(fd)
    os.dup2(high[0], 3)
    os.dup2(high[1], 4)
    os.closerange(5, 1 << 16)
    if abi:
        _landlock(abi, _SYSTEM_READ, ["/tmp", "/dev"])
    try:
        os.execve(path, [path], {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"})
    except OSError as exc:
        try:
            os.write(2, ("the program could not start: %s\n" % exc).encode())
        except OSError:
            pass
    os._exit(127)


# --- Landlock: the worker's view of the file system -----------------------------------------------

_FS_FILE = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 14) | (1 << 15)   # execute, write, read, truncate, ioctl_dev
_FS_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}


def _landlock(abi, read_paths, write_paths):
    """Allow reading/executing beneath ``read_paths`` and everything beneath ``write_paths``; nothing
    else (``/proc``, ``/sys``, ``/``, ``/var``, ``/run``...). From ABI 6 on, the worker also cannot
    signal processes outside its domain (the supervisor) or reach abstract unix sockets outside it."""
    ctypes, libc = _libc()
    handled = _FS_ABI.get(abi, (1 << 16) - 1)
    read_x = ((1 << 0) | (1 << 2) | (1 << 3)) & handled
    fields = [handled, 0, 3 if abi >= 6 else 0]
    size = 24 if abi >= 6 else (16 if abi >= 4 else 8)
    attr = struct.pack("<QQQ", *fields)[:size]
    ruleset = libc.syscall(444, ctypes.c_char_p(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        return False
    try:
        for paths, access in ((read_paths, read_x), (write_paths, handled)):
            for path in paths:
                try:
                    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except OSError:
                    continue
                try:
                    allowed = access if os.path.isdir(path) else access & _FS_FILE
                    rule = struct.pack("<Qi", allowed, fd)
                    libc.syscall(445, ruleset, 1, ctypes.c_char_p(rule), 0)
                finally:
                    os.close(fd)
        if libc.prctl(38, 1, 0, 0, 0) != 0:
            return False
        return libc.syscall(446, ruleset, 0) == 0
    finally:
        os.close(ruleset)


# --- the worker: values ----------------------------------------------------------------------------

class _Unsendable(ValueError):
    pass


def _encoder(handles, ids):
    """``enc(value)``: tagged JSON of a value; ``enc.handle(value)``: a handle to it."""
    def handle(v):
        key = id(v)
        at = ids.get(key)
        if at is None:
            at = len(handles)
            handles.append(v)
            ids[key] = at
        module = str(getattr(v, "__name__", ""))[:200] if isinstance(v, type(sys)) else ""
        return {"H": [at, str(getattr(type(v), "__qualname__", "?"))[:200], int(callable(v)), module]}

    def seq(items, depth):
        return [enc(x, depth + 1) for x in items]

    def enc(v, depth=0):
        if depth > MAX_DEPTH:
            raise _Unsendable("the value is nested more than %d levels deep" % MAX_DEPTH)
        t = type(v)
        if v is None or t is bool or t is str or t is float:
            return v
        if t is int:
            return v if -(1 << 62) < v < (1 << 62) else {"I": hex(v)}
        if t is list:
            return seq(v, depth)
        if t is tuple:
            return {"T": seq(v, depth)}
        if t is dict:
            return {"D": [[enc(k, depth + 1), enc(x, depth + 1)] for k, x in v.items()]}
        if t is set:
            return {"S": seq(v, depth)}
        if t is frozenset:
            return {"F": seq(v, depth)}
        if t is bytes:
            return {"B": v.hex()}
        if t is bytearray:
            return {"A": v.hex()}
        if t is complex:
            return {"C": [v.real, v.imag]}
        # subclasses of the plain types cross as their base value, read with the base type's own methods
        # (an int subclass whose __eq__ is always True arrives as the plain int it holds)
        if isinstance(v, int):
            return enc(int.__int__(v), depth)
        if isinstance(v, float):
            return float.__float__(v)
        if isinstance(v, str):
            return str.__str__(v)
        if isinstance(v, bytes):
            return {"B": bytes.hex(v)}
        if isinstance(v, bytearray):
            return {"A": bytearray.hex(v)}
        if isinstance(v, list):
            return seq(list.__iter__(v), depth)
        if isinstance(v, tuple):
            return {"T": seq(tuple.__iter__(v), depth)}
        if isinstance(v, dict):
            return {"D": [[enc(k, depth + 1), enc(x, depth + 1)] for k, x in dict.items(v)]}
        if isinstance(v, frozenset):
            return {"F": seq(frozenset.__iter__(v), depth)}
        if isinstance(v, set):
            return {"S": seq(set.__iter__(v), depth)}
        if isinstance(v, complex):
            return {"C": [complex.real.__get__(v), complex.imag.__get__(v)]}
        if getattr(t, "__module__", "") == "numpy" and hasattr(v, "tolist"):
            return enc(v.tolist(), depth + 1)   # numpy scalars and arrays: their Python values
        return handle(v)

    enc.handle = handle
    return enc


def _resolver(handles):
    """Replace the judge's markers in a request's value: ``(Ellipsis, id)`` → the object with that
    handle, ``(Ellipsis, "A", bytes)`` → a bytearray."""
    def ref(at):
        if type(at) is not int or not 0 <= at < len(handles):
            raise LookupError("no object #%r" % (at,))
        return handles[at]

    def walk(v):
        t = type(v)
        if t is tuple:
            if v and v[0] is Ellipsis:
                return bytearray(v[2]) if len(v) == 3 else ref(v[1])
            return tuple(walk(x) for x in v)
        if t is list:
            return [walk(x) for x in v]
        if t is dict:
            return {walk(k): walk(x) for k, x in v.items()}
        if t is set:
            return {walk(x) for x in v}
        if t is frozenset:
            return frozenset(walk(x) for x in v)
        return v

    return walk


# --- the worker: serving ---------------------------------------------------------------------------

def _exit_code(code):
    """The interpreter's exit status for ``SystemExit(code)`` as Python judges it, and what it prints."""
    if code is None:
        return 0, None
    if isinstance(code, int):   # bool and int subclasses too, by their int value
        value = int.__int__(code)
        return (value & 0xFF if -(1 << 31) <= value < (1 << 31) else 1), None
    return 1, code              # anything else (0.0, a message): printed to stderr, exit status 1


def serve(header, filename, folder, req, rep, abi):
    import builtins
    import io

    _exit, _excepthook = os._exit, sys.__excepthook__
    handles, ids = [], {}
    enc = _encoder(handles, ids)
    resolve = _resolver(handles)
    sys.path.insert(0, folder)
    for extra in header.get("paths") or ():   # the numpy/pandas runtime (it has no .pth files)
        if os.path.isdir(extra):
            sys.path.append(extra)
    if abi:
        read = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", sys.prefix,
                sys.exec_prefix, sys.base_prefix] + [p for p in sys.path if p and os.path.isabs(p)]
        _landlock(abi, read, ["/tmp", "/dev"])

    def reply(msg):
        try:
            data = _dumps(msg)
        except (TypeError, ValueError) as exc:
            data = _dumps([msg[0], "e", ["ValueError", ["ValueError"], 1, "the reply cannot be encoded: %s" % exc,
                                         None, None]])
        if len(data) > MAX_FRAME:
            data = _dumps([msg[0], "e", ["ValueError", ["ValueError"], 1, "cannot cross: the value is larger "
                                         "than %d bytes" % MAX_FRAME, None, None]])
        _write_all(rep, _U32.pack(len(data)) + data)

    def flush():
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass

    def format_tb(t, exc, frames):
        # the interpreter's own printer (C: no `traceback` import), into a buffer
        buf, saved = io.StringIO(), sys.stderr
        sys.stderr = buf
        try:
            _excepthook(t, exc, frames)
        finally:
            sys.stderr = saved
        return buf.getvalue()

    def exc_info(exc, with_tb=True):
        t = type(exc)
        bases = [c.__name__ for c in t.__mro__ if getattr(c, "__module__", "") == "builtins"
                 and issubclass(c, BaseException)]
        try:
            message = str(exc)[:2000]
        except BaseException:
            message = "<unprintable %s>" % t.__name__
        args = tb = None
        try:
            args = enc(tuple(exc.args))
            if len(_dumps(args)) > 10000:
                args = None
        except BaseException:
            args = None
        if with_tb:
            try:
                frames = exc.__traceback__
                while frames is not None and frames.tb_frame.f_code.co_filename == "<string>":
                    frames = frames.tb_next   # the server's own frames: only the program's are shown
                tb = format_tb(t, exc, frames)[-8000:]
            except BaseException:
                tb = None
        return [str(getattr(t, "__qualname__", "Exception"))[:200], bases[:20],
                int(getattr(builtins, t.__name__, None) is t), message, args, tb]

    def failure(exc):
        # the exception's own type, never its word (a __class__ property, a __str__ or args that raise
        # SystemExit): describing it can at most fall back to a plain Exception
        try:
            t = type(exc)
            if issubclass(t, MemoryError):
                return ["memory"]
            if issubclass(t, _Unsendable):
                return ["e", ["ValueError", ["ValueError"], 1, "cannot cross: %s" % exc, None, None]]
            return ["e", exc_info(exc)]
        except BaseException:
            return ["e", ["Exception", ["Exception"], 1, "<unprintable>", None, None]]

    # load the program as module __main__, as `python solution.py` would
    module = type(sys)("__main__")
    module.__file__ = filename
    module.__builtins__ = builtins
    sys.modules["__main__"] = module
    sys.argv = [filename]
    handles.append(module)
    ids[id(module)] = 0
    nonce = header.get("nonce")
    try:
        with open(filename, "rb") as f:
            source = f.read()
        code_obj = compile(source, "solution.py", "exec", dont_inherit=True)   # bytes: a BOM and a coding line work
        del source
    except (SyntaxError, ValueError) as exc:
        _excepthook(type(exc), exc, None)
        flush()
        reply([nonce, "syntax", " ".join(("%s: %s" % (type(exc).__name__, exc)).split())[:500]])
        _exit(1)
    exit_status, first = 0, None
    try:
        exec(code_obj, module.__dict__)
    except SystemExit as exc:
        exit_status, printed = _exit_code(exc.code)
        if printed is not None:
            try:
                print(printed, file=sys.stderr)
            except BaseException:
                pass
        if exit_status:
            first = [nonce, "exit", exit_status, ("SystemExit: %r" % (exc.code,))[:500]]
    except MemoryError:
        first = [nonce, "memory"]
    except BaseException as exc:
        try:
            _excepthook(type(exc), exc, exc.__traceback__.tb_next)
        except BaseException:
            pass
        try:
            first = [nonce, "error", exc_info(exc, with_tb=False)]
        except BaseException:
            first = [nonce, "error", ["Exception", ["Exception"], 1, "<unprintable>", None, None]]
    flush()
    if first is not None:
        reply(first)
        _exit(exit_status or 1)
    names = []
    for name, value in list(module.__dict__.items()):
        if isinstance(name, str) and not (name.startswith("__") and name.endswith("__")):
            try:
                names.append([name, enc(value)])
            except BaseException:   # too deep to cross as data: the judge gets a handle to it
                names.append([name, enc.handle(value)])
    reply([nonce, "ok", {"D": names}])

    def call(fn, args, kwargs, back):
        try:
            out = ["v", enc(fn(*args, **kwargs))]
        except BaseException as exc:
            out = failure(exc)
        if back:
            after = []
            for at in back:
                try:
                    after.append([at, enc(args[at] if type(at) is int else kwargs[at])])
                except BaseException:
                    pass
            out.append({"D": after})
        return out

    ops = {
        "getattr": getattr, "setattr": setattr, "getitem": lambda obj, key: obj[key],
        "len": len, "bool": bool, "iter": iter, "next": next,
        "import": lambda name, fromlist: __import__(name, module.__dict__, None, tuple(fromlist), 0),
    }
    while True:
        data = _read_frame(req)
        if data is None:
            _exit(0)
        try:
            rq = marshal.loads(data)   # (op, id, walk, target id, args...)
            op, rid = rq[0], rq[1]
            args = resolve(rq[4:]) if rq[2] else rq[4:]
            target = handles[rq[3]] if rq[3] is not None else None
        except BaseException:
            _exit(3)
        if op == "finish":
            flush()
            reply([rid, "v", None])
            _exit(0)
        if op == "call":
            out = call(target, args[0], args[1], args[2])
        else:
            try:
                out = ["v", enc(ops[op](*args) if target is None else ops[op](target, *args))]
            except BaseException as exc:
                out = failure(exc)
        flush()
        reply([rid] + out)


if __name__ == "__main__":
    supervise()
