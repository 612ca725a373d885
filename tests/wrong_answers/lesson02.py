"""Plausible wrong answers to lesson 02's exercises."""
import zlib

import numpy as np

PRIME = (1 << 61) - 1


# 02-1 MinHash from scratch
def minhash_python_hash(shingle_set, params):
    base = [hash(s) & 0xFFFFFFFF for s in shingle_set]
    return [min(((a * x + b) % PRIME for x in base), default=PRIME) for a, b in params]


def minhash_no_modulus(shingle_set, params):
    base = [zlib.crc32(s.encode("utf-8")) for s in shingle_set]
    return [min((a * x + b for x in base), default=PRIME) for a, b in params]


def minhash_empty_is_zero(shingle_set, params):
    base = [zlib.crc32(s.encode("utf-8")) for s in shingle_set]
    return [min(((a * x + b) % PRIME for x in base), default=0) for a, b in params]


def minhash_takes_max(shingle_set, params):
    base = [zlib.crc32(s.encode("utf-8")) for s in shingle_set]
    return [max(((a * x + b) % PRIME for x in base), default=PRIME) for a, b in params]


def minhash_ascii_ignore(shingle_set, params):      # drops every non-ASCII character before hashing
    base = [zlib.crc32(s.encode("ascii", errors="ignore")) for s in shingle_set]
    return [min(((a * x + b) % PRIME for x in base), default=PRIME) for a, b in params]


def minhash_latin1_replace(shingle_set, params):     # a single-byte encoding: CJK becomes '?'
    base = [zlib.crc32(s.encode("latin-1", errors="replace")) for s in shingle_set]
    return [min(((a * x + b) % PRIME for x in base), default=PRIME) for a, b in params]


def minhash_params_swapped(shingle_set, params):     # unpacks (a, b) as (b, a)
    base = [zlib.crc32(s.encode("utf-8")) for s in shingle_set]
    return [min(((b * x + a) % PRIME for x in base), default=PRIME) for a, b in params]


def minhash_mod_power_of_two(shingle_set, params):   # 2**61 instead of the prime 2**61 - 1
    base = [zlib.crc32(s.encode("utf-8")) for s in shingle_set]
    return [min(((a * x + b) % (1 << 61) for x in base), default=PRIME) for a, b in params]


# 02-2 S-curve
def s_curve_swapped(s, bands, rows):
    s = np.asarray(s, dtype=float)
    return 1.0 - (1.0 - s ** bands) ** rows


def s_curve_missing_complement(s, bands, rows):
    s = np.asarray(s, dtype=float)
    return (1.0 - s ** rows) ** bands


def s_curve_one_band(s, bands, rows):
    s = np.asarray(s, dtype=float)
    return s ** rows


def s_curve_scalar_only(s, bands, rows):
    import math
    return 1.0 - math.pow(1.0 - math.pow(float(s), rows), bands)


WRONG_ANSWERS = {
    "02-1": [minhash_python_hash, minhash_no_modulus, minhash_empty_is_zero, minhash_takes_max,
             minhash_ascii_ignore, minhash_latin1_replace, minhash_params_swapped, minhash_mod_power_of_two],
    "02-2": [s_curve_swapped, s_curve_missing_complement, s_curve_one_band, s_curve_scalar_only],
}
