"""Plausible wrong answers to lesson 01's exercises."""
import ipaddress
import re


# 01-1 low alphanumeric fraction
def alnum_uses_isalpha(path, text):
    return not text or sum(ch.isalpha() for ch in text) / len(text) < 0.25


def alnum_inclusive_boundary(path, text):
    return not text or sum(ch.isalnum() for ch in text) / len(text) <= 0.25


def alnum_empty_is_kept(path, text):
    return bool(text) and sum(ch.isalnum() for ch in text) / len(text) < 0.25


def alnum_ascii_only(path, text):
    return not text or len(re.findall(r"[A-Za-z0-9]", text)) / len(text) < 0.25


def alnum_over_non_whitespace(path, text):      # the denominator leaves out spaces and newlines
    dense = [ch for ch in text if not ch.isspace()]
    return not dense or sum(ch.isalnum() for ch in dense) / len(dense) < 0.25


def alnum_over_utf8_bytes(path, text):          # len(text.encode()) as the denominator
    return not text or sum(ch.isalnum() for ch in text) / len(text.encode("utf-8")) < 0.25


def alnum_over_stripped_text(path, text):       # text.strip() first: leading/trailing blank lines vanish
    text = text.strip()
    return not text or sum(ch.isalnum() for ch in text) / len(text) < 0.25


def alnum_counts_underscore(path, text):        # \w matches '_' too
    return not text or len(re.findall(r"\w", text)) / len(text) < 0.25


def alnum_mean_of_lines(path, text):            # the mean of per-line fractions
    lines = text.splitlines()
    if not lines:
        return True
    return sum(sum(ch.isalnum() for ch in line) / max(len(line), 1) for line in lines) / len(lines) < 0.25


# 01-2 e-mail redaction
_EXAMPLES = ("example.com", "example.org", "example.net")


def email_without_tld_list(text):
    def rep(m):
        return m.group(0) if m.group(1).lower() in _EXAMPLES else "<EMAIL>"
    return re.sub(r"[\w.+-]+@([\w-]+(?:\.[\w-]+)+)", rep, text)


def email_keeps_no_examples(text):
    return re.sub(r"[A-Za-z0-9][\w.%+-]*@(?:[A-Za-z0-9-]+\.)+(?:com|org|net|edu|cn|io|uk)\b", "<EMAIL>", text)


def email_example_check_case_sensitive(text):
    def rep(m):
        return m.group(0) if m.group(1) in _EXAMPLES else "<EMAIL>"
    return re.sub(r"[A-Za-z0-9][\w.%+-]*@((?:[A-Za-z0-9-]+\.)+(?:com|org|net|edu|cn|io|uk))\b", rep, text,
                  flags=re.IGNORECASE)


def email_no_subdomains(text):
    def rep(m):
        return m.group(0) if m.group(1).lower() in _EXAMPLES else "<EMAIL>"
    return re.sub(r"\w+@(\w[\w-]*\.(?:com|org|net|edu|cn|io|uk))\b", rep, text)


def _tld_pattern(flags=re.IGNORECASE):
    return re.compile(r"[A-Za-z0-9][\w.%+-]*@((?:[A-Za-z0-9-]+\.)+(?:com|org|net|edu|cn|io|uk))\b", flags)


def email_tld_case_sensitive(text):             # leaves JOHN.DOE@GMAIL.COM in the corpus
    def rep(m):
        d = m.group(1).lower()
        return m.group(0) if any(d == e or d.endswith("." + e) for e in _EXAMPLES) else "<EMAIL>"
    return _tld_pattern(0).sub(rep, text)


def email_keeps_any_example_domain(text):       # keeps example-corp.com, examples.com, example.com.cn ...
    return _tld_pattern().sub(lambda m: m.group(0) if "example" in m.group(1).lower() else "<EMAIL>", text)


def email_example_without_subdomains(text):     # docs.example.net is under example.net too
    return _tld_pattern().sub(lambda m: m.group(0) if m.group(1).lower() in _EXAMPLES else "<EMAIL>", text)


def email_example_suffix_without_dot(text):     # endswith("example.com") also keeps notexample.org's cousins
    def rep(m):
        d = m.group(1).lower()
        return m.group(0) if d.endswith(_EXAMPLES) else "<EMAIL>"
    return _tld_pattern().sub(rep, text)


# 01-3 public IPv4 redaction
_QUAD = r"\b(?:\d{1,3}\.){3}\d{1,3}\b"


def _ip_sub(text, keep):
    def rep(m):
        try:
            ip = ipaddress.ip_address(m.group(0))
        except ValueError:
            return m.group(0)
        return m.group(0) if keep(ip, m) else "<IP_ADDRESS>"
    return re.sub(_QUAD, rep, text)


def ipv4_redacts_versions(text):
    return _ip_sub(text, lambda ip, m: not ip.is_global or m.group(0) in ("8.8.8.8", "1.1.1.1"))


def ipv4_redacts_private(text):
    return _ip_sub(text, lambda ip, m: m.group(0) in ("8.8.8.8", "1.1.1.1")
                   or text[max(0, m.start() - 2):m.start()] in ("==", ">=", "<=", "~=", "!="))


def ipv4_is_private_instead_of_global(text):
    return _ip_sub(text, lambda ip, m: ip.is_private or ip.is_loopback or m.group(0) in ("8.8.8.8", "1.1.1.1")
                   or re.search(r"(==|>=|<=|~=|!=|v)$", text[:m.start()]) is not None)


def ipv4_forgets_dns(text):
    return _ip_sub(text, lambda ip, m: not ip.is_global
                   or re.search(r"(==|>=|<=|~=|!=|v)$", text[:m.start()]) is not None)


_IPV4 = r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d]|\.\d)"


def _ip_with_guard(guard, pattern=_IPV4, flags=re.IGNORECASE, check_valid=True):
    """The exercise's rule with a version guard ``guard`` (a regex that must end right before the quad)."""
    def redact(text):
        def rep(m):
            value = m.group(0)
            if re.search(guard, text[max(0, m.start() - 12):m.start()], flags):
                return value
            if check_valid:
                try:
                    ip = ipaddress.ip_address(value)
                except ValueError:
                    return value
            else:
                ip = ipaddress.ip_address(value)
            return "<IP_ADDRESS>" if ip.is_global and value not in ("8.8.8.8", "1.1.1.1") else value
        return re.sub(pattern, rep, text)
    return redact


ipv4_guard_without_le = _ip_with_guard(r"(?:==|>=|~=|!=|\bv|\bversion\W{0,3})$")
ipv4_guard_without_compatible = _ip_with_guard(r"(?:==|>=|<=|!=|\bv|\bversion\W{0,3})$")
ipv4_guard_without_ne = _ip_with_guard(r"(?:==|>=|<=|~=|\bv|\bversion\W{0,3})$")
ipv4_guard_without_version_word = _ip_with_guard(r"(?:==|>=|<=|~=|!=|\bv)$")
ipv4_guard_case_sensitive = _ip_with_guard(r"(?:==|>=|<=|~=|!=|\bv|\bversion\W{0,3})$", flags=0)
ipv4_no_lookbehind = _ip_with_guard(r"(?:==|>=|<=|~=|!=|\bv|\bversion\W{0,3})$",
                                    pattern=r"\b(?:\d{1,3}\.){3}\d{1,3}(?![\d]|\.\d)")
ipv4_no_lookahead = _ip_with_guard(r"(?:==|>=|<=|~=|!=|\bv|\bversion\W{0,3})$",
                                   pattern=r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}")
ipv4_crashes_on_invalid_octet = _ip_with_guard(r"(?:==|>=|<=|~=|!=|\bv|\bversion\W{0,3})$",
                                               check_valid=False)
for _name, _fn in list(globals().items()):
    if _name.startswith("ipv4_") and _fn.__name__ == "redact":
        _fn.__name__ = _name

WRONG_ANSWERS = {
    "01-1": [alnum_uses_isalpha, alnum_inclusive_boundary, alnum_empty_is_kept, alnum_ascii_only,
             alnum_over_non_whitespace, alnum_over_utf8_bytes, alnum_over_stripped_text, alnum_counts_underscore,
             alnum_mean_of_lines],
    "01-2": [email_without_tld_list, email_keeps_no_examples, email_example_check_case_sensitive,
             email_no_subdomains, email_tld_case_sensitive, email_keeps_any_example_domain,
             email_example_without_subdomains, email_example_suffix_without_dot],
    "01-3": [ipv4_redacts_versions, ipv4_redacts_private, ipv4_is_private_instead_of_global, ipv4_forgets_dns,
             ipv4_guard_without_le, ipv4_guard_without_compatible, ipv4_guard_without_ne,
             ipv4_guard_without_version_word, ipv4_guard_case_sensitive, ipv4_no_lookbehind, ipv4_no_lookahead,
             ipv4_crashes_on_invalid_octet],
}
