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

Introduced in lesson 06.
"""
from __future__ import annotations

import json
import marshal
import struct
from collections import Counter
from typing import Any, Callable

MAX_FRAME = 16 * 1024 * 1024   # the same cap as the in-sandbox server's
MAX_SAME_HASH = 64             # keys of one dict/set that may share one hash value
_U32 = struct.Struct(">I")
_INT_LIMIT = 1 << 62


class ProtocolError(Exception):
    """The sandbox side broke the protocol: a bad frame, a value that is not plain data, a reply that was
    not asked for. The judge counts the run as failed."""


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


def decode(data: bytes, make_handle: Callable[[list], Any]) -> Any:
    """Decode one frame from the sandbox. ``make_handle([id, class, callable, module])`` gives the
    judge's proxy for a handle. Raises :class:`ProtocolError` on anything that is not plain data."""
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
        return json.loads(data, object_hook=hook)
    except ProtocolError:
        raise
    except (ValueError, TypeError, RecursionError, LookupError, OverflowError) as exc:
        raise ProtocolError(f"not a valid value ({type(exc).__name__}: {str(exc)[:200]})") from None


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
