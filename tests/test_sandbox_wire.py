"""The judge's decoder accepts plain data only (course_lib.evaluation.sandbox.wire), and the in-sandbox
server's encoder and the judge's decoder agree on every plain value."""
from __future__ import annotations

import json
import marshal
import math

import pytest

from course_lib.evaluation.sandbox import inside, wire
from course_lib.evaluation.sandbox.wire import ProtocolError, decode


def _handle(spec):
    return ("handle", tuple(spec))


VALUES = [None, True, False, 0, -7, 2 ** 62, -(2 ** 100), 1.5, -0.0, math.inf, -math.inf, "", "héllo \ud800",
          b"\x00\xff", bytearray(b"ab"), 1 + 2j, [], [1, [2, [3]]], (), (1, (2,)), {}, {"a": 1, (1, 2): [3]},
          set(), {1, "x"}, frozenset({(1, 2)}), {1: {2: {3: b""}}}]


def _value_id(v) -> str:
    """A test id that does not depend on the process: a set's repr orders its members by hash, and str hashes are
    salted per process (PYTHONHASHSEED), so two pytest-xdist workers named ``{1, 'x'}`` differently and refused to
    run ("Different tests were collected"). Sets are shown sorted by repr."""
    if isinstance(v, (set, frozenset)):
        inner = ", ".join(sorted(repr(x) for x in v))
        return (f"{type(v).__name__}({{{inner}}})" if isinstance(v, frozenset) else f"{{{inner}}}" if v else "set()")[:30]
    return repr(v)[:30]


@pytest.mark.parametrize("value", VALUES, ids=[_value_id(v) for v in VALUES])
def test_the_servers_encoder_and_the_judges_decoder_round_trip_plain_values(value):
    enc = inside._encoder([], {})
    data = inside._dumps(enc(value))
    back = decode(data, _handle)
    assert back == value and type(back) is type(value)


def test_nan_crosses_and_subclasses_cross_as_their_base_value():
    from collections import Counter, OrderedDict, namedtuple

    class Odd(int):
        def __eq__(self, other):
            return True

    enc = inside._encoder([], {})
    assert math.isnan(decode(inside._dumps(enc(float("nan"))), _handle))
    P = namedtuple("P", "x y")
    for value, plain in [(Odd(3), 3), (P(1, 2), (1, 2)), (OrderedDict(a=1), {"a": 1}), (Counter("aa"), {"a": 2}),
                         (True, True)]:
        back = decode(inside._dumps(enc(value)), _handle)
        assert back == plain and type(back) is type(plain)


def test_other_objects_cross_as_handles_and_stay_the_same_handle():
    handles, ids = [], {}
    enc = inside._encoder(handles, ids)
    obj = object()
    first, second = enc(obj), enc([obj])
    assert first == {"H": [0, "object", 0, ""]} and second == [first]
    assert decode(inside._dumps(first), _handle) == ("handle", (0, "object", 0, ""))
    assert enc(len)["H"][2] == 1 and enc(math)["H"][3] == "math"


@pytest.mark.parametrize("data, why", [
    (b'{"a": 1, "b": 2}', "one tagged value"),
    (b'{"Z": 1}', "unknown tag"),
    (b'{"D": [[[1], 2]]}', "not a valid value"),             # an unhashable key
    (b'{"D": [1, 2]}', "pairs"),
    (b'{"S": 3}', "list of items"),
    (b'{"C": ["a", 1]}', "complex"),
    (b'{"I": 5}', "hex"),
    (b"[" * 100000 + b"]" * 100000, "not a valid value"),   # deeper than the interpreter allows
    (b"not json", "not a valid value"),
])
def test_anything_but_plain_data_is_a_protocol_error(data, why):
    with pytest.raises(ProtocolError, match=why):
        decode(data, _handle)


def test_a_hash_collision_flood_is_refused_before_the_dict_is_built():
    m = (1 << 61) - 1
    data = json.dumps({"D": [[k * m, 0] for k in range(5000)]}).encode()
    with pytest.raises(ProtocolError, match="hash"):
        decode(data, _handle)
    ordinary = json.dumps({"D": [[k, 0] for k in range(5000)]}).encode()
    assert len(decode(ordinary, _handle)) == 5000


def test_requests_are_marshal_data_and_judge_objects_cannot_be_sent():
    frame = wire.request("call", 7, 3, ([1, (2, 3)], {"k": bytearray(b"x")}), lambda v: None)
    op, nonce, walk, target, args, kwargs = marshal.loads(frame[4:])
    assert (op, nonce, walk, target) == ("call", 7, True, 3) and kwargs == {"k": (Ellipsis, "A", b"x")}
    assert inside._resolver([])(kwargs) == {"k": bytearray(b"x")}
    with pytest.raises(TypeError, match="cannot be passed to the program"):
        wire.request("call", 1, 0, (lambda: 0,), lambda v: None)
