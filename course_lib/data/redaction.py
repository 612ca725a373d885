"""Find and redact secrets and personal data in source files before they enter a training corpus.

Detectors follow bigcode's PII pipeline and the detect-secrets plugins: provider key formats (AWS,
GitHub, Slack, Stripe, OpenAI-style, JWT, private-key blocks), high-entropy strings assigned to names
like ``password``/``secret``/``token``, passwords in URLs and assignments, e-mail addresses and public
IPv4/IPv6 addresses. False-positive filters leave alone version numbers, dates, lock-file hashes,
UUIDs, ``example.com``-style addresses, private/loopback/documentation addresses and well-known DNS
servers. Each finding is replaced by a placeholder (``<KEY>``, ``<PASSWORD>``, ``<EMAIL>``,
``<IP_ADDRESS>``); spans refer to the original text.

Introduced in lesson 01.
"""
from __future__ import annotations

import ipaddress
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable

PLACEHOLDERS = {
    "aws_access_key": "<KEY>", "aws_secret_key": "<KEY>", "github_token": "<KEY>",
    "slack_token": "<KEY>", "slack_webhook": "<KEY>", "stripe_key": "<KEY>", "openai_key": "<KEY>",
    "jwt": "<KEY>", "private_key": "<KEY>", "high_entropy_secret": "<KEY>",
    "password": "<PASSWORD>", "url_password": "<PASSWORD>",
    "email": "<EMAIL>", "ipv4": "<IP_ADDRESS>", "ipv6": "<IP_ADDRESS>",
}
KINDS = tuple(PLACEHOLDERS)

# Well-known public DNS resolvers: configuration, not personal data.
WELL_KNOWN_DNS = frozenset({
    "8.8.8.8", "8.8.4.4", "1.1.1.1", "1.0.0.1", "9.9.9.9", "149.112.112.112", "208.67.222.222",
    "208.67.220.220", "4.2.2.2", "4.2.2.1", "64.6.64.6", "64.6.65.6", "94.140.14.14", "94.140.15.15",
    "2001:4860:4860::8888", "2001:4860:4860::8844", "2606:4700:4700::1111", "2606:4700:4700::1001",
    "2620:fe::fe", "2620:fe::9", "2620:119:35::35", "2620:119:53::53",
})
EXAMPLE_IPS = frozenset({"1.2.3.4", "123.45.67.89", "12.34.56.78", "11.22.33.44"})
EXAMPLE_DOMAINS = ("example.com", "example.org", "example.net", "example.edu", "test", "example",
                   "invalid", "localhost", "domain.com", "email.com", "yourdomain.com")
# Local parts that name a role or a placeholder, not a person ("me" is not one: me@kennethreitz.org is
# an author's address).
NON_PERSONAL_LOCAL_PARTS = frozenset({"git", "noreply", "no-reply", "donotreply", "user", "username",
                                      "name", "email", "you", "your.name", "someone", "foo"})
# A finite TLD list keeps ``x@self.weight`` (matrix product) from looking like an address.
_TLDS = ("com|org|net|edu|gov|mil|int|io|ai|dev|app|info|biz|co|me|tv|cc|us|uk|de|fr|it|es|nl|be|ch|"
         "at|se|no|dk|fi|pl|cz|ru|ua|cn|jp|kr|tw|hk|sg|in|au|nz|ca|br|mx|ar|za|il|ie|pt|gr|hu|ro|tr|"
         "lt|lv|ee|sk|si|hr|bg|rs|lu|vn|cl|"
         "eu|xyz|tech|cloud|online|site|email|name|pro|mobi|asia")
PLACEHOLDER_VALUES = frozenset({
    "password", "passwd", "secret", "changeme", "change_me", "changeit", "xxx", "xxxx", "xxxxxx",
    "xxxxxxxx", "none", "null", "true", "false", "your_password", "your-password", "yourpassword",
    "mypassword", "my_password", "password123", "example", "dummy", "test", "testing", "hunter2",
    "redacted", "<password>", "****", "********", "placeholder", "your_api_key", "your-api-key",
    "your_token", "your-token", "token", "api_key", "apikey", "secret_key", "notasecret",
})


@dataclass(frozen=True)
class Finding:
    """One secret or PII span in the ORIGINAL text: ``text[start:end]`` is what was replaced."""

    kind: str
    start: int
    end: int
    value: str

    @property
    def placeholder(self) -> str:
        return PLACEHOLDERS[self.kind]


@dataclass(frozen=True)
class RedactionResult:
    """The redacted ``text`` and the ``findings`` (sorted, non-overlapping, original offsets)."""

    text: str
    findings: tuple[Finding, ...]

    def counts(self) -> Counter:
        return Counter(f.kind for f in self.findings)


def shannon_entropy(s: str) -> float:
    """Bits per character of ``s`` (0.0 for an empty string). Introduced in lesson 01."""
    if not s:
        return 0.0
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


# --- provider formats (each pattern's group 'v', or the whole match, is the secret) --------------
_KEY_PATTERNS: tuple[tuple[str, re.Pattern], ...] = (
    ("aws_access_key", re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA)[A-Z0-9]{16}(?![A-Z0-9])")),
    ("aws_secret_key", re.compile(
        r"(?i:aws_?secret_?(?:access_?)?key|secret_?access_?key)\W{0,4}[=:]\s*[\"']?"
        r"(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])")),
    ("github_token", re.compile(r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{60,255})")),
    ("slack_webhook", re.compile(r"https://hooks\.slack\.com/services/T[A-Za-z0-9_]{6,}/B[A-Za-z0-9_]{6,}/[A-Za-z0-9_]{16,}")),
    ("slack_token", re.compile(r"(?<![A-Za-z0-9])xox[abposr]-[0-9]{6,}-[0-9A-Za-z-]{10,}")),
    ("stripe_key", re.compile(r"(?<![A-Za-z0-9])(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{24,}")),
    ("openai_key", re.compile(
        r"(?<![A-Za-z0-9_-])sk-(?:(?:proj|svcacct|admin)-)?[A-Za-z0-9_-]{16,}T3BlbkFJ[A-Za-z0-9_-]{16,}"
        r"|(?<![A-Za-z0-9_-])sk-(?:proj-)?[A-Za-z0-9]{48,}(?![A-Za-z0-9_-])")),
    ("jwt", re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}")),
)

# Each detector first finds a cheap literal anchor (a keyword, "://", "@", ":", ".") and only then runs
# the full pattern there: scanning 50 MB of code with every full regex takes minutes in pure Python.
_KEY_ANCHORS = {
    "aws_access_key": ("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA"),
    "aws_secret_key": ("secret",), "github_token": ("gh", "github_pat_"), "slack_webhook": ("hooks.slack.com",),
    "slack_token": ("xox",), "stripe_key": ("_live_", "_test_"), "openai_key": ("sk-",), "jwt": ("eyJ",),
}
_SECRET_WORDS = r"password|passwd|passphrase|pwd|secret|token|api_?key|apikey|access_?key|auth_?key|private_?key"
# name = "value" / name: 'value' / "name": "value" / NAME=value (.env). The match starts at the
# beginning of the whole name (an identifier that contains a secret word): anchoring at name starts and
# the possessive ``*+`` keep the scan linear even on one 100 KB line such as ``"token" * 20000``.
_SECRET_WORD_RE = re.compile(_SECRET_WORDS, re.IGNORECASE)
_ASSIGN_RE = re.compile(
    r"(?<![A-Za-z0-9_])(?P<name>[A-Za-z0-9_]++)[\"']?\]?[ \t]*+(?::=|=>|[:=])[ \t]*+"
    r"(?:(?P<q>[\"'])(?P<qv>[^\"'\n]{4,200})(?P=q)|(?P<bv>[A-Za-z0-9_\-+/=.!@#$%^&*]{8,200})(?=[ \t]|$|[;,]))",
    re.MULTILINE)
_URL_PASSWORD_RE = re.compile(
    r"://(?P<user>[^\s:/@\"'<>]{1,64}):(?P<v>[^\s:/@\"'<>]{1,128})@(?P<host>[A-Za-z0-9.\-\[\]]+)")
_EMAIL_LOCAL_RE = re.compile(r"(?<![A-Za-z0-9._%+\-@])[A-Za-z0-9][A-Za-z0-9._%+\-]{0,63}$")
_EMAIL_DOMAIN_RE = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.){1,8}(?:" + _TLDS + r")(?![A-Za-z0-9\-])",
    re.IGNORECASE)
_IPV4_ANCHOR_RE = re.compile(r"\.\d{1,3}\.\d{1,3}\.")
_IPV4_RE = re.compile(r"(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)")
_IPV6_ANCHOR_RE = re.compile(r":[0-9A-Fa-f]{0,4}:")
_IPV6_CHARS_RE = re.compile(r"[0-9A-Fa-f:.]*")
_IPV6_CHARS_BACK_RE = re.compile(r"[0-9A-Fa-f:]*$")
_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_VERSION_CONTEXT_RE = re.compile(r"(?i)(?:\bversion|\bver|\brelease|\bv|==|>=|<=|~=|!=|\bpython)\W{0,3}$")
_TEMPLATE_RE = re.compile(r"\{[^}]*\}|\$\{|\$[A-Za-z_]|%\(|%s|<[A-Za-z_ -]+>|\*\*\*|\.\.\.|^x+$"
                          r"|os\.environ|getenv|settings\.|config\.", re.IGNORECASE)
_HASH_PREFIX_RE = re.compile(r"^(?:sha(?:1|224|256|384|512)|md5|blake2b?)[-:=]", re.IGNORECASE)


# Words a placeholder is made of ("your_password_here", "my-secret-key", "ChangeMe"). A value made of
# these words only is a placeholder; one with anything else ("MySecretPass99!") is treated as real.
PLACEHOLDER_WORDS = frozenset({
    "your", "my", "the", "a", "an", "secret", "secrets", "password", "passwd", "pass", "pwd", "passphrase",
    "example", "sample", "dummy", "fake", "test", "testing", "change", "changeme", "me", "here", "this",
    "key", "api", "token", "access", "auth", "value", "placeholder", "redacted", "foo", "bar", "baz",
    "insert", "enter", "put", "replace", "with", "goes", "demo", "some", "xxx", "xxxx", "not", "real",
    "default", "todo", "none", "null", "string", "str", "private", "client", "app", "db", "user",
})
_WORD_SPLIT_RE = re.compile(r"[\s_\-.]+|(?<=[a-z])(?=[A-Z])")


def _looks_like_placeholder(value: str) -> bool:
    """A documentation value, not a credential: a known placeholder, template syntax (``{x}``, ``${X}``,
    ``os.environ``), at most two distinct characters, or made only of :data:`PLACEHOLDER_WORDS`
    (so ``"your_password_here"`` is a placeholder and ``"MySecretPass99!"`` is not)."""
    v = value.strip()
    low = v.lower()
    if low in PLACEHOLDER_VALUES or _TEMPLATE_RE.search(v) or len(set(v)) <= 2 or "example" in low:
        return True
    words = [w.lower() for w in _WORD_SPLIT_RE.split(v) if w]
    return bool(words) and all(w in PLACEHOLDER_WORDS for w in words)


def _is_high_entropy(value: str) -> bool:
    """Random-looking: hex with >= 3.0 bits/char or other text with >= 3.5 bits/char, length >= 16,
    letters and digits mixed; UUIDs and prefixed hashes are not secrets."""
    if len(value) < 16 or _UUID_RE.match(value) or _HASH_PREFIX_RE.match(value):
        return False
    if not (re.search(r"[A-Za-z]", value) and re.search(r"\d", value)):
        return False
    if " " in value:
        return False
    limit = 3.0 if re.fullmatch(r"[0-9a-fA-F]+", value) else 3.5
    return shannon_entropy(value) >= limit


def _is_code_reference(value: str) -> bool:
    """``password = user_password`` / ``token=self.token`` / ``key=ENV_NAME``: a name, not a literal."""
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", value) is not None


_IDENT_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_IDENT_REST_RE = re.compile(r"[A-Za-z0-9_]*+")
_SECRET_WORD_LOWER_RE = re.compile(_SECRET_WORDS)


def _assignment_findings(text: str) -> list[Finding]:
    """``name = value`` where the name contains a secret word. Each identifier is looked at once (the
    scan skips anchors inside the identifier it has just read), so the cost is linear in the text."""
    out = []
    low = text.lower()
    anchors = (_SECRET_WORD_LOWER_RE.finditer(low) if len(low) == len(text)
               else _SECRET_WORD_RE.finditer(text))
    done = -1
    for anchor in anchors:
        if anchor.start() < done:
            continue  # inside the identifier already examined
        start = anchor.start()
        while start > done and start > 0 and text[start - 1] in _IDENT_CHARS:
            start -= 1
        done = _IDENT_REST_RE.match(text, anchor.start()).end()
        m = _ASSIGN_RE.match(text, start)
        if m is None:
            continue
        group = "qv" if m.group("qv") is not None else "bv"
        value = m.group(group)
        kind = _assigned_secret_kind(m.group("name"), value, quoted=group == "qv")
        if kind is not None:
            out.append(Finding(kind, m.start(group), m.end(group), value))
    return out


def _assigned_secret_kind(name: str, value: str | None, *, quoted: bool) -> str | None:
    """``"password"``, ``"high_entropy_secret"`` or None for ``value`` assigned to ``name`` (a name that
    holds a secret word)."""
    if value is None or _looks_like_placeholder(value):
        return None
    if not quoted and (_is_code_reference(value) or "(" in value):
        return None
    if "://" in value:
        return None  # an endpoint URL (``token_uri = "https://..."``); URL passwords are found separately
    name = name.lower()
    is_password_name = any(k in name for k in ("password", "passwd", "passphrase", "pwd"))
    if is_password_name and len(value) >= 6 and " " not in value.strip() and not _UUID_RE.match(value):
        return "password"
    if _is_high_entropy(value):
        return "high_entropy_secret"
    return None


# C/C++: ``#define API_TOKEN "value"`` assigns without ``=``.
_CPP_DEFINE_RE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_][A-Za-z0-9_]*)[ \t]+"
                            r"(?:u8|u|U|L)?\"(?P<qv>[^\"\n]{4,200})\"", re.MULTILINE)


def _cpp_define_findings(text: str) -> list[Finding]:
    out = []
    for m in _CPP_DEFINE_RE.finditer(text):
        if _SECRET_WORD_RE.search(m.group("name")):
            kind = _assigned_secret_kind(m.group("name"), m.group("qv"), quoted=True)
            if kind is not None:
                out.append(Finding(kind, m.start("qv"), m.end("qv"), m.group("qv")))
    return out


_PK_BEGIN_RE = re.compile(r"-----BEGIN (?:[A-Z0-9]{1,16} ){0,4}PRIVATE KEY(?: BLOCK)?-----")
_PK_END_RE = re.compile(r"-----END (?:[A-Z0-9]{1,16} ){0,4}PRIVATE KEY(?: BLOCK)?-----")
_PK_BODY_LINE_RE = re.compile(r"[ \t\r\"',+]*+(?:[A-Za-z0-9+/=]++|(?:Proc-Type|DEK-Info|Comment):[^\n\\]*+)?[ \t\r\"',+]*+")
_PK_MIN_BODY = 40


def _private_key_findings(text: str) -> list[Finding]:
    """``-----BEGIN ... PRIVATE KEY-----`` blocks: up to the END line, or -- when the block is
    truncated (no END line) -- up to the last line of base64 after BEGIN. Lines may be real newlines or
    ``\\n`` escapes inside a string literal. Needs at least 40 base64 characters, so a bare marker
    (``if pem.startswith("-----BEGIN RSA PRIVATE KEY-----")``) is not a key."""
    out, pos = [], 0
    while True:
        begin = _PK_BEGIN_RE.search(text, pos)
        if begin is None:
            return out
        p, body_end, body_chars, end = begin.end(), begin.end(), 0, None
        while p < len(text):
            if text.startswith("\\n", p):
                p += 2
                continue
            if text[p] == "\n":
                p += 1
                continue
            if text.startswith("-----END", p):
                m = _PK_END_RE.match(text, p)
                end = m.end() if m else None
                break
            line = _PK_BODY_LINE_RE.match(text, p)
            stop = line.end()
            if stop < len(text) and text[stop] != "\n" and not text.startswith("\\n", stop) \
                    and not text.startswith("-----END", stop):
                break  # not a key line: the block ended without an END line
            if stop == p:
                break
            segment = text[p:stop]
            chars = sum(1 for ch in segment if ch.isalnum() or ch in "+/=")
            if chars:
                body_chars += chars
                body_end = p + len(segment.rstrip(" \t\"',+\r"))
            p = stop
        if body_chars >= _PK_MIN_BODY:
            stop = end if end is not None else body_end
            out.append(Finding("private_key", begin.start(), stop, text[begin.start():stop]))
            pos = stop
        else:
            pos = begin.end()


def _url_password_findings(text: str) -> list[Finding]:
    out = []
    for m in _URL_PASSWORD_RE.finditer(text):
        value = m.group("v")
        host = m.group("host").lower().strip("[]")
        if _looks_like_placeholder(value) or value.lower() in ("pass", "pw"):
            continue
        if host in ("localhost", "127.0.0.1", "::1") or any(
                host == d or host.endswith("." + d) for d in EXAMPLE_DOMAINS):
            continue  # a local or documentation URL: not a leaked credential
        out.append(Finding("url_password", m.start("v"), m.end("v"), value))
    return out


def _email_findings(text: str) -> list[Finding]:
    out = []
    at = text.find("@")
    while at != -1:
        local_m = _EMAIL_LOCAL_RE.search(text, max(0, at - 64), at)
        domain_m = _EMAIL_DOMAIN_RE.match(text, at + 1) if local_m else None
        if local_m and domain_m:
            local, domain = local_m.group().lower(), domain_m.group().lower()
            personal = local not in NON_PERSONAL_LOCAL_PARTS and not any(
                domain == d or domain.endswith("." + d) for d in EXAMPLE_DOMAINS)
            if personal:
                out.append(Finding("email", local_m.start(), domain_m.end(), text[local_m.start():domain_m.end()]))
            at = text.find("@", domain_m.end())
        else:
            at = text.find("@", at + 1)
    return out


_IP_CONTEXT_RE = re.compile(r"(?i)(?:version|release|section|chapter|oid|objectidentifier|rfc|§)")


def _ipv4_findings(text: str) -> list[Finding]:
    out, done = [], -1
    for anchor in _IPV4_ANCHOR_RE.finditer(text):
        start = anchor.start() - 1
        while start > 0 and text[start - 1].isdigit():
            start -= 1
        if start <= done:
            continue
        m = _IPV4_RE.match(text, start)
        if not m:
            continue
        done = m.end()
        before = text[start - 1] if start else " "
        after = text[m.end():m.end() + 2]
        if (before.isalnum() or before in "._" or after[:1].isalnum() or after[:1] == "_"
                or (after[:1] == "." and (after[1:2].isalnum() or after[1:2] == "_"))):
            continue  # part of a longer dotted number (OIDs, 5-part versions) or of a word
        line_start = text.rfind("\n", 0, start) + 1
        context = text[max(line_start, start - 40):start]
        if _VERSION_CONTEXT_RE.search(context) or _IP_CONTEXT_RE.search(text[line_start:start]):
            continue
        value = m.group()
        octets = value.split(".")
        if all(len(o) == 1 for o in octets[:3]) or octets[3] == "0" or value in EXAMPLE_IPS:
            continue  # 7.1.4.34 / 8.2.4.45 (versions, spec section numbers), x.y.z.0 (networks)
        ip = ipaddress.IPv4Address(value)
        if ip.is_global and not ip.is_multicast and value not in WELL_KNOWN_DNS:
            out.append(Finding("ipv4", start, m.end(), value))
    return out


def _ipv6_findings(text: str) -> list[Finding]:
    out, done = [], -1
    for anchor in _IPV6_ANCHOR_RE.finditer(text):
        if anchor.start() < done:
            continue
        back = _IPV6_CHARS_BACK_RE.search(text, max(0, anchor.start() - 40), anchor.start())
        start = back.start() if back else anchor.start()
        end = _IPV6_CHARS_RE.match(text, anchor.start()).end()
        done = end
        before = text[start - 1] if start else " "
        if before.isalnum() or before in "_":
            continue
        if end < len(text) and (text[end].isalnum() or text[end] == "_"):
            continue
        value = text[start:end].rstrip(".")
        if value.count(":") < 2 or sum(1 for g in value.split(":") if g) < 3:
            continue  # "2002::" (a prefix), "a::b"
        if text[start + len(value):start + len(value) + 1] == "/":
            continue  # a network in CIDR notation, not a host
        try:
            ip = ipaddress.IPv6Address(value)
        except ValueError:
            continue
        if ip in _IPV6_GLOBAL_UNICAST and ip.is_global and str(ip) not in WELL_KNOWN_DNS:
            out.append(Finding("ipv6", start, start + len(value), value))
    return out


def _ip_findings(text: str) -> list[Finding]:
    return _ipv4_findings(text) + _ipv6_findings(text)


_IPV6_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")


def find_secrets(text: str, *, language: str = "python") -> list[Finding]:
    """All secret/PII findings in ``text``: sorted by start, overlaps resolved in favour of the earlier
    (then provider-specific, then longer) finding.

    ``language="cpp"`` (C or C++) runs the same detectors on the whole text, so ``password = "..."``
    keeps its name as context, adds ``#define NAME "value"`` as an assignment, and then keeps only the
    findings that lie inside a comment (``//``, ``/* */``) or a string or character literal (escapes,
    prefixes, raw strings ``R"d(...)d"``; :func:`course_lib.data.clike.literal_spans`): code itself
    (an identifier such as ``kAKIA...`` or a macro name) is never rewritten. Introduced in lesson 01."""
    from course_lib.data.clike import normalize_language

    if normalize_language(language) == "cpp":
        return _cpp_findings(text)
    if not isinstance(text, str) or not text:
        return []
    found: list[Finding] = _private_key_findings(text) if "PRIVATE KEY" in text else []
    low = text.lower()
    for kind, pattern in _KEY_PATTERNS:
        if not any(a in (low if a.islower() else text) for a in _KEY_ANCHORS[kind]):
            continue
        for m in pattern.finditer(text):
            g = "v" if "v" in pattern.groupindex else 0
            if "EXAMPLE" in m.group(g):  # documentation keys such as AWS's AKIA...EXAMPLE
                continue
            found.append(Finding(kind, m.start(g), m.end(g), m.group(g)))
    if "://" in text:
        found += _url_password_findings(text)
    found += _assignment_findings(text)
    found += _email_findings(text)
    found += _ip_findings(text)
    priority = {k: i for i, k in enumerate(KINDS)}
    found.sort(key=lambda f: (f.start, priority[f.kind], -(f.end - f.start)))
    kept: list[Finding] = []
    for f in found:
        if kept and f.start < kept[-1].end:
            continue
        kept.append(f)
    return kept


def _cpp_findings(text: str) -> list[Finding]:
    """:func:`find_secrets` for C/C++: whole-text findings plus ``#define`` ones, kept only inside a
    comment or a literal."""
    import bisect

    from course_lib.data.clike import literal_spans

    if not isinstance(text, str) or not text:
        return []
    found = find_secrets(text)
    if "define" in text:
        taken = [(f.start, f.end) for f in found]
        found += [f for f in _cpp_define_findings(text)
                  if not any(s < f.end and f.start < e for s, e in taken)]
        found.sort(key=lambda f: f.start)
    if not found:
        return []
    spans = literal_spans(text)
    starts = [s for s, _, _ in spans]
    kept = []
    for f in found:
        k = bisect.bisect_right(starts, f.start) - 1
        if k >= 0 and f.end <= spans[k][1]:
            kept.append(f)
    return kept


def redact_secrets(text: str, *, kinds: Iterable[str] | None = None, language: str = "python") -> RedactionResult:
    """Replace secrets and PII in ``text`` with placeholders (``<KEY>``, ``<PASSWORD>``, ``<EMAIL>``,
    ``<IP_ADDRESS>``). Returns an object with ``.text`` (redacted) and ``.findings`` (each with
    ``.kind``, ``.start``, ``.end`` in the ORIGINAL text). ``kinds`` limits redaction to some kinds
    (e.g. ``{"email"}``; see :data:`KINDS`). ``language="cpp"`` redacts C/C++ comments and string or
    character literals only (see :func:`find_secrets`).

    Introduced in lesson 01.
    """
    if not isinstance(text, str):
        raise TypeError(f"redact_secrets needs a str, got {type(text).__name__}")
    findings = find_secrets(text, language=language)
    if kinds is not None:
        kinds = set(kinds)
        unknown = kinds - set(KINDS)
        if unknown:
            raise ValueError(f"unknown kinds {sorted(unknown)}; known: {', '.join(KINDS)}")
        findings = [f for f in findings if f.kind in kinds]
    pieces, pos = [], 0
    for f in findings:
        pieces.append(text[pos:f.start])
        pieces.append(f.placeholder)
        pos = f.end
    pieces.append(text[pos:])
    return RedactionResult("".join(pieces), tuple(findings))
