"""The judge's side of the wire: frames, and values as tagged JSON, decoded strictly.

What crosses from the sandbox is decoded by :func:`decode`, which can only build plain built-in
objects — ``None``, ``bool``, ``int``, ``float`` (``nan``/``inf`` included), ``complex``, ``str``,
``bytes``, ``bytearray``, ``list``, ``tuple``, ``dict``, ``set``, ``frozenset`` — and the judge's own
handle proxies for everything else. So an object with its own ``__eq__`` can never reach the judge: a
program that returns one is judged on the plain value it holds, or on an opaque handle that is equal
only to itself. Frames larger than :data:`MAX_FRAME`, values nested deeper than the interpreter allows,
unknown tags, unhashable keys and key sets built to collide in a hash table are protocol errors.

Requests to the sandbox are ``marshal`` data (:func:`request`, the trusted direction). In replies, a
JSON object is always a one-key tagged value:

=====  ==========================  =====  =========================================
``T``  tuple ``[items]``           ``B``  bytes (hex)
``S``  set ``[items]``             ``A``  bytearray (hex)
``F``  frozenset ``[items]``       ``C``  complex ``[real, imag]``
``D``  dict ``[[key, value]...]``  ``I``  an int beyond 2**62 (hex)
=====  ==========================  =====  =========================================

and ``H``, a handle: ``[id, class name, callable, module name]``.

What a reply may decode to is budgeted (:class:`DecodeBudget`), in objects and in bytes of the judge's
memory. Per reply, *before* ``json`` builds anything, an upper bound is counted on the frame
(:func:`count_values`: every value is a container opening, a comma-separated item or the frame's one
value, outside strings; :func:`decoded_bytes_bound`: :data:`VALUE_BYTES` per value plus the frame's
length times the widest character it escapes — one astral character makes every character of a
string 4 bytes). Per run, what the replies *did* decode to is measured (:func:`decoded_size`) and
charged. Over either, the run fails — so a run's replies cannot grow the judge's memory by more than
the budget (2-byte ``[]`` items would otherwise decode to 56-byte lists: 48 MiB of replies, 1.2 GiB in
the judge; 32 MiB of one-astral-character strings, 128 MiB).

Introduced in lesson 06.
"""
from __future__ import annotations

import json
import marshal
import re
import struct
import sys
from collections import Counter
from typing import Any, Callable

MAX_FRAME = 16 * 1024 * 1024   # the same cap as the in-sandbox server's
MAX_SAME_HASH = 64             # keys of one dict/set that may share one hash value
_U32 = struct.Struct(">I")
_INT_LIMIT = 1 << 62
# (objects, bytes of the judge's memory) one reply, and all the replies of one run, may decode to
REPLY_BUDGET = (500_000, 32 * 1024 * 1024)
RUN_BUDGET = (1_000_000, 32 * 1024 * 1024)
# the most one counted value can cost once decoded: an element of a set (a table of up to 8 slots of
# 16 bytes per element after a resize) and its int object; a set or dict itself counts as two values
VALUE_BYTES = 160
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{,]')   # a JSON string, or a byte that opens/separates a value
_ASTRAL_ESCAPE = re.compile(rb'\\u[dD][89abAB]')        # a surrogate pair: a character over U+FFFF
_WIDE_ESCAPE = re.compile(rb'\\u(?!00)[0-9a-fA-F]{4}')   # a character over U+00FF


class ProtocolError(Exception):
    """The sandbox side broke the protocol: a bad frame, a value that is not plain data, a reply that was
    not asked for. The judge counts the run as failed."""


def count_values(data: bytes, stop: int | None = None) -> int:
    """An upper bound on the number of objects ``data`` (one JSON frame) decodes to, counted without
    decoding it or copying it: outside strings, every ``[``, ``{`` and ``,`` opens or separates one
    value. With ``stop``, counting ends as soon as the count is over it (a reply that is refused anyway
    costs no more time). Introduced in lesson 06."""
    if b'"' not in data:
        return data.count(b"[") + data.count(b"{") + data.count(b",") + 1
    n = 1
    for m in _TOKEN.finditer(data):   # one match at a time: no list of pieces as long as the frame
        if data[m.start()] != 34:     # a structural byte, not a string
            n += 1
            if stop is not None and n > stop:
                break
    return n


def decoded_bytes_bound(data: bytes, values: int | None = None) -> int:
    """An upper bound on the bytes of the judge's memory one JSON frame decodes to, counted without
    decoding it: :data:`VALUE_BYTES` per value (:func:`count_values`) plus the frame's length times the
    widest character it escapes (1, 2 or 4 bytes: Python stores a string at its widest character's
    width, and the sandbox escapes every non-ASCII character). Introduced in lesson 06."""
    if values is None:
        values = count_values(data)
    width = 4 if _ASTRAL_ESCAPE.search(data) else 2 if _WIDE_ESCAPE.search(data) else 1
    return VALUE_BYTES * values + width * len(data)


def decoded_size(value: Any) -> int:
    """The bytes of memory ``value`` (plain data as :func:`decode` builds it) holds: ``sys.getsizeof`` of
    every object in it, containers' tables included, shared singletons (``None``, ``True``, small ints,
    one-character latin-1 strings) not counted. Introduced in lesson 06."""
    total, stack = 0, [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if v is None or t is bool or (t is int and -5 <= v <= 256) or (t is str and len(v) <= 1 and v <= "\xff"):
            continue
        total += sys.getsizeof(v)
        if t is list or t is tuple or t is set or t is frozenset:
            stack.extend(v)
        elif t is dict:
            stack.extend(v.keys())
            stack.extend(v.values())
    return total


class DecodeBudget:
    """How much one run's replies may still decode to (objects, bytes of memory), and each reply on its
    own (:data:`REPLY_BUDGET`). :meth:`charge` raises :class:`ProtocolError` before a frame is decoded
    when its upper bounds (:func:`count_values`, :func:`decoded_bytes_bound`) are over the per-reply
    budget or its values over the run's; :meth:`settle` charges what the frame did decode to
    (:func:`decoded_size`) and raises when the run's replies went over. Introduced in lesson 06."""

    def __init__(self, objects: int = RUN_BUDGET[0], nbytes: int = RUN_BUDGET[1]) -> None:
        self.objects, self.nbytes = objects, nbytes

    def _over_run(self) -> ProtocolError:
        return ProtocolError(f"the run's replies are over its budget of {RUN_BUDGET[0]} values / "
                             f"{RUN_BUDGET[1]} bytes")

    def charge(self, data: bytes) -> None:
        n = count_values(data, stop=min(REPLY_BUDGET[0], self.objects))
        bound = decoded_bytes_bound(data, n)
        if n > REPLY_BUDGET[0] or bound > REPLY_BUDGET[1]:
            raise ProtocolError(f"a reply of {n} values / {len(data)} bytes (up to {bound} bytes decoded) is over "
                                f"the per-reply budget of {REPLY_BUDGET[0]} values / {REPLY_BUDGET[1]} bytes")
        self.objects -= n
        if self.objects < 0 or len(data) > self.nbytes:
            raise self._over_run()

    def settle(self, value: Any) -> None:
        self.nbytes -= decoded_size(value)
        if self.nbytes < 0:
            raise self._over_run()


def frame(payload: bytes) -> bytes:
    """``>I`` length + payload."""
    return _U32.pack(len(payload)) + payload


def _check_keys(keys: list) -> None:
    counts = Counter(hash(k) for k in keys)
    if counts and max(counts.values()) > MAX_SAME_HASH:
        raise ProtocolError(f"more than {MAX_SAME_HASH} keys with one hash value (a hash-collision flood)")


def _dict(pairs: Any) -> dict:
    if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
        raise ProtocolError("a dict must be a list of [key, value] pairs")
    _check_keys([k for k, _ in pairs])
    return {k: v for k, v in pairs}


def _collection(kind: type) -> Callable[[Any], Any]:
    def build(items: Any) -> Any:
        if not isinstance(items, list):
            raise ProtocolError(f"a {kind.__name__} must be a list of items")
        if kind is not tuple:
            _check_keys(items)
        return kind(items)
    return build


def _hex(kind: type) -> Callable[[Any], Any]:
    def build(text: Any) -> Any:
        if not isinstance(text, str):
            raise ProtocolError(f"{kind.__name__} must be hex text")
        return kind.fromhex(text)
    return build


def _complex(parts: Any) -> complex:
    if not (isinstance(parts, list) and len(parts) == 2 and all(type(p) in (int, float) for p in parts)):
        raise ProtocolError("a complex must be [real, imag]")
    return complex(parts[0], parts[1])


def _big_int(text: Any) -> int:
    if not isinstance(text, str) or len(text) > 1_000_000:
        raise ProtocolError("a big int must be hex text")
    return int(text, 16)


def decode(data: bytes, make_handle: Callable[[list], Any], budget: DecodeBudget | None = None) -> Any:
    """Decode one frame from the sandbox. ``make_handle([id, class, callable, module])`` gives the
    judge's proxy for a handle; ``budget`` (the run's :class:`DecodeBudget`) is charged first and
    settled with what the frame decoded to. Raises :class:`ProtocolError` on anything that is not plain
    data, or over the budget."""
    budget = budget or DecodeBudget()
    budget.charge(data)
    tags: dict[str, Callable[[Any], Any]] = {
        "T": _collection(tuple), "S": _collection(set), "F": _collection(frozenset), "D": _dict,
        "B": _hex(bytes), "A": _hex(bytearray), "C": _complex, "I": _big_int, "H": make_handle,
    }

    def hook(obj: dict) -> Any:
        if len(obj) != 1:
            raise ProtocolError("a JSON object on the wire must be one tagged value")
        (tag, value), = obj.items()
        build = tags.get(tag)
        if build is None:
            raise ProtocolError(f"unknown tag {tag[:20]!r}")
        return build(value)

    try:
        value = json.loads(data, object_hook=hook)
    except ProtocolError:
        raise
    except (ValueError, TypeError, RecursionError, LookupError, OverflowError) as exc:
        raise ProtocolError(f"not a valid value ({type(exc).__name__}: {str(exc)[:200]})") from None
    budget.settle(value)
    return value


class _Marked:
    """Set when an encoded value holds a marker the sandbox must resolve (a handle, a bytearray)."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen = False


def encode(value: Any, handle_id: Callable[[Any], int | None], marked: _Marked | None = None,
           depth: int = 0) -> Any:
    """A judge-side value as ``marshal``-able data for the sandbox: plain data (subclasses as their base
    value, as the sandbox does), a handle as ``(Ellipsis, id)``, a bytearray as ``(Ellipsis, "A", bytes)``.
    Anything else raises TypeError: a judge-side object (a function, a class) cannot be handed to the
    program."""
    if depth > 200:
        raise ValueError("the value is nested too deeply to send to the program")
    t = type(value)
    if value is None or t is bool or t is str or t is float or t is int or t is bytes or t is complex:
        return value
    if t is list:
        return [encode(x, handle_id, marked, depth + 1) for x in value]
    if t is tuple:
        return tuple(encode(x, handle_id, marked, depth + 1) for x in value)
    if t is dict:
        return {encode(k, handle_id, marked, depth + 1): encode(v, handle_id, marked, depth + 1)
                for k, v in value.items()}
    if t is set:
        return {encode(x, handle_id, marked, depth + 1) for x in value}
    if t is frozenset:
        return frozenset(encode(x, handle_id, marked, depth + 1) for x in value)
    if t is bytearray:
        if marked is not None:
            marked.seen = True
        return (Ellipsis, "A", bytes(value))
    at = handle_id(value)
    if at is not None:
        if marked is not None:
            marked.seen = True
        return (Ellipsis, at)
    for base in (bool, int, float, str, bytes, bytearray, list, tuple, dict, frozenset, set, complex):
        if isinstance(value, base):
            return encode(base(value) if base is not bool else bool(int(value)), handle_id, marked, depth)
    raise TypeError(f"a {t.__name__} cannot be passed to the program: only plain data "
                    "(None, bool, int, float, str, bytes, list, tuple, dict, set) and the program's own objects cross")


def request(op: str, nonce: int, target: int | None, args: tuple, handle_id: Callable[[Any], int | None]) -> bytes:
    """One request frame: ``(op, id, walk, target id, *args)`` as marshal data (``walk``: the args hold
    markers to resolve)."""
    marked = _Marked()
    wire_args = tuple(encode(a, handle_id, marked) for a in args)
    return frame(marshal.dumps((op, nonce, marked.seen, target) + wire_args))
