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


WRONG_ANSWERS = {
    "01-1": [alnum_uses_isalpha, alnum_inclusive_boundary, alnum_empty_is_kept, alnum_ascii_only],
    "01-2": [email_without_tld_list, email_keeps_no_examples, email_example_check_case_sensitive,
             email_no_subdomains],
    "01-3": [ipv4_redacts_versions, ipv4_redacts_private, ipv4_is_private_instead_of_global, ipv4_forgets_dns],
}
