"""Measure secret/PII detection: a labelled set of snippets, precision/recall, and detect-secrets.

The labelled set (``assets/secrets/labelled_cases.jsonl``) holds positives and hard negatives written
for the course. Snippets contain templates such as ``{{aws_access_key}}``: :func:`labelled_cases` fills
them at run time with FAKE values that only have the right shape (built from pieces with a seeded
random generator), so the repository never holds anything that looks like a real credential.

Introduced in lesson 01.
"""
from __future__ import annotations

import base64
import json
import os
import random
import re
import string
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from course_lib.data.redaction import PLACEHOLDERS, find_secrets
from course_lib.paths import assets_dir

CASES_FILE = ("secrets", "labelled_cases.jsonl")
CATEGORY_OF_PLACEHOLDER = {"<KEY>": "key", "<PASSWORD>": "password", "<EMAIL>": "email",
                           "<IP_ADDRESS>": "ip"}
CATEGORIES = ("key", "password", "email", "ip")
_TEMPLATE_RE = re.compile(r"\{\{([a-z0-9_]+)(?:#\d+)?\}\}")

_UP = string.ascii_uppercase + string.digits
_ALNUM = string.ascii_letters + string.digits
_B64 = string.ascii_letters + string.digits + "+/"


def _pick(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64url(obj) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode().rstrip("=")


def fake_value(kind: str, rng: random.Random) -> str:
    """A FAKE value with the shape of ``kind`` (never a working credential). Introduced in lesson 01."""
    if kind == "aws_access_key":
        return "AK" + "IA" + _pick(rng, _UP, 16)
    if kind == "aws_secret_key":
        return _pick(rng, _B64, 40)
    if kind == "github_token":
        return "gh" + rng.choice("pous") + "_" + _pick(rng, _ALNUM, 36)
    if kind == "github_pat":
        return "github" + "_pat_" + _pick(rng, _ALNUM, 22) + "_" + _pick(rng, _ALNUM, 59)
    if kind == "slack_token":
        return "xo" + "x" + rng.choice("bp") + "-" + _pick(rng, string.digits, 11) + "-" + \
            _pick(rng, string.digits, 13) + "-" + _pick(rng, _ALNUM, 24)
    if kind == "slack_webhook":
        return "https://hooks.slack.com/services/T" + _pick(rng, _UP, 8) + "/B" + _pick(rng, _UP, 8) + \
            "/" + _pick(rng, _ALNUM, 24)
    if kind == "stripe_key":
        return rng.choice(["sk", "rk"]) + "_" + rng.choice(["live", "test"]) + "_" + _pick(rng, _ALNUM, 24)
    if kind == "stripe_publishable":
        return "pk" + "_live_" + _pick(rng, _ALNUM, 24)
    if kind == "openai_key":
        return "sk-" + "proj-" + _pick(rng, _ALNUM, 20) + "T3Blbk" + "FJ" + _pick(rng, _ALNUM, 20)
    if kind == "openai_legacy":
        return "sk-" + _pick(rng, _ALNUM, 48)
    if kind == "jwt":
        return ".".join([_b64url({"alg": "HS256", "typ": "JWT"}),
                         _b64url({"sub": str(rng.randint(10**6, 10**7)), "name": "Course Fake", "iat": 1516239022}),
                         _pick(rng, _ALNUM + "-_", 43)])
    if kind == "private_key_body":
        return "\n".join(_pick(rng, _B64, 64) for _ in range(6)) + "\n" + _pick(rng, _B64, 20) + "=="
    if kind == "high_entropy":
        while True:
            v = _pick(rng, _ALNUM, 32)
            if re.search(r"\d", v) and re.search(r"[a-z]", v) and re.search(r"[A-Z]", v):
                return v
    if kind == "hex_secret":
        return _pick(rng, "0123456789abcdef", 40)
    if kind == "password":
        return _pick(rng, string.ascii_letters, 5) + _pick(rng, string.digits, 3) + \
            rng.choice("!#%&*") + _pick(rng, _ALNUM, 4)
    if kind == "public_ipv4":
        first = rng.choice([13, 18, 34, 35, 52, 54, 81, 91, 104, 151, 185, 203])
        return f"{first}.{rng.randint(1, 254)}.{rng.randint(1, 254)}.{rng.randint(1, 254)}"
    if kind == "public_ipv6":
        return "2a0" + rng.choice("1235") + ":" + ":".join(f"{rng.randint(1, 0xffff):x}" for _ in range(5)) + \
            "::" + f"{rng.randint(1, 0xffff):x}"
    if kind == "uuid":
        import uuid

        return str(uuid.UUID(int=rng.getrandbits(128), version=4))
    if kind == "sha256":
        return _pick(rng, "0123456789abcdef", 64)
    if kind == "git_sha":
        return _pick(rng, "0123456789abcdef", 40)
    raise ValueError(f"unknown fake kind {kind!r}")


@dataclass(frozen=True)
class LabelledCase:
    """One snippet: ``expected`` holds ``(category, value)`` pairs that must be found (none for a hard
    negative); ``ext`` is the file type the snippet comes from."""

    id: str
    text: str
    expected: tuple[tuple[str, str], ...]
    ext: str
    note: str
    split: str = "dev"   # "dev": the rules were tuned on it; "heldout": written afterwards, not tuned on

    @property
    def is_negative(self) -> bool:
        return not self.expected


def labelled_cases(path: str | os.PathLike | None = None, seed: int = 0) -> list[LabelledCase]:
    """The labelled set with its templates filled by :func:`fake_value`. Introduced in lesson 01."""
    path = Path(path) if path else assets_dir(*CASES_FILE)
    cases = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        row = json.loads(line)
        rng = random.Random(f"{seed}:{row['id']}")
        values: dict[str, str] = {}

        def fill(s: str, values: dict[str, str] = values, rng: random.Random = rng) -> str:
            def sub(m):
                key = m.group(0)
                if key not in values:
                    values[key] = fake_value(m.group(1), rng)
                return values[key]
            return _TEMPLATE_RE.sub(sub, s)

        text = fill(row["text"])
        expected = tuple((cat, fill(v)) for cat, v in row.get("expected", []))
        for cat, v in expected:
            if cat not in CATEGORIES or v not in text:
                raise ValueError(f"{path}: line {lineno} ({row['id']}): expected {cat}:{v!r} is not "
                                 f"in the text or the category is not one of {CATEGORIES}")
        cases.append(LabelledCase(row["id"], text, expected, row.get("ext", "py"), row.get("note", ""),
                                  row.get("split", "dev")))
    return cases


Detection = tuple[int, int, str]  # (start, end, category) in the case text


def course_detector(text: str, ext: str = "py") -> list[Detection]:
    """:func:`course_lib.data.redaction.find_secrets` as ``(start, end, category)`` triples."""
    return [(f.start, f.end, CATEGORY_OF_PLACEHOLDER[PLACEHOLDERS[f.kind]]) for f in find_secrets(text)]


_DS_CATEGORY = {"Secret Keyword": "password", "Basic Auth Credentials": "password",
                "Public IP (ipv4)": "ip"}


def detect_secrets_detector(text: str, ext: str = "py") -> list[Detection]:
    """Yelp's detect-secrets (default plugins and filters) on ``text`` saved as a ``.ext`` file.
    Raises ImportError when it is not installed (``pip install -e '.[dev]'``)."""
    from detect_secrets.core.secrets_collection import SecretsCollection
    from detect_secrets.settings import default_settings

    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    with tempfile.TemporaryDirectory() as tmp:
        fn = os.path.join(tmp, f"snippet.{ext}")
        with open(fn, "w", encoding="utf-8") as fh:
            fh.write(text)
        with default_settings():
            coll = SecretsCollection(root=tmp)
            coll.scan_file(fn)
        out = []
        for _, secret in coll:
            line_index = secret.line_number - 1
            line = lines[line_index] if 0 <= line_index < len(lines) else ""
            value = secret.secret_value or ""
            col = line.find(value) if value else -1
            start = offsets[line_index] + max(col, 0)
            end = start + (len(value) if col >= 0 else len(line.rstrip("\n")))
            out.append((start, end, _DS_CATEGORY.get(secret.type, "key")))
    return out


@dataclass
class Scores:
    """Precision/recall of one detector on the labelled set."""

    name: str
    tp: int
    fp: int
    fn: int
    seconds: float
    per_category: dict[str, dict[str, float]]
    mistakes: list[dict]

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def row(self) -> dict:
        return {"detector": self.name, "precision": round(self.precision, 3), "recall": round(self.recall, 3),
                "f1": round(self.f1, 3), "tp": self.tp, "fp": self.fp, "fn": self.fn,
                "seconds": round(self.seconds, 3)}


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def evaluate(detector: Callable[[str, str], list[Detection]], cases: Iterable[LabelledCase],
             name: str = "detector", categories: Iterable[str] = CATEGORIES) -> Scores:
    """Span-level scores: an expected value is found when a detection overlaps it (any category); a
    detection is a false positive when it overlaps no expected value. Only expected values of
    ``categories`` count (detect-secrets has no e-mail detector, for instance). Introduced in lesson 01.
    """
    categories = set(categories)
    tp = fp = fn = 0
    per = {c: {"expected": 0, "found": 0} for c in CATEGORIES}
    mistakes = []
    start = time.perf_counter()
    results = [(case, detector(case.text, case.ext)) for case in cases]
    seconds = time.perf_counter() - start
    for case, found in results:
        spans = [(case.text.find(v), case.text.find(v) + len(v), cat) for cat, v in case.expected]
        counted = [s for s in spans if s[2] in categories]
        for s, e, cat in counted:
            per[cat]["expected"] += 1
            if any(_overlaps((s, e), d[:2]) for d in found):
                tp += 1
                per[cat]["found"] += 1
            else:
                fn += 1
                mistakes.append({"case": case.id, "type": "missed", "category": cat,
                                 "value": case.text[s:e], "note": case.note})
        for d in found:
            if not any(_overlaps(d[:2], s[:2]) for s in spans):
                fp += 1
                mistakes.append({"case": case.id, "type": "false positive", "category": d[2],
                                 "value": case.text[d[0]:d[1]], "note": case.note})
    per_category = {c: {"expected": v["expected"],
                        "recall": round(v["found"] / v["expected"], 3) if v["expected"] else None}
                    for c, v in per.items()}
    return Scores(name, tp, fp, fn, seconds, per_category, mistakes)
