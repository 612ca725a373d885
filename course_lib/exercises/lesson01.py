"""Lesson 01's exercises: a file-filter rule, e-mail redaction, public-IPv4 redaction."""
from __future__ import annotations

import ipaddress
import re

from course_lib.data import filters
from course_lib.data.redaction import redact_secrets
from course_lib.exercises import Exercise

_GOOD = "\n".join(f"def f{i}(x):\n    return x + {i}" for i in range(8)) + "\n"


def redact_emails(text: str) -> str:
    """E-mail addresses → ``<EMAIL>`` (the course's detector restricted to e-mail)."""
    return redact_secrets(text, kinds={"email"}).text


_KEEP_IPS = ("8.8.8.8", "1.1.1.1")
_VERSION_BEFORE = re.compile(r"(?:==|>=|<=|~=|!=|\bv|\bversion\W{0,3})$", re.IGNORECASE)
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d]|\.\d)")


def redact_public_ipv4(text: str) -> str:
    """The exercise's rule: a dotted quad that is a public address (``ipaddress.ip_address(s).is_global``)
    becomes ``<IP_ADDRESS>``, except 8.8.8.8 / 1.1.1.1, a version (right after ``==``, ``>=``, ``<=``,
    ``~=``, ``!=``, ``v`` or ``version``) and part of a longer dotted number (``1.2.3.4.5``)."""
    def replace(m: re.Match) -> str:
        value = m.group(0)
        if _VERSION_BEFORE.search(text[max(0, m.start() - 12):m.start()]):
            return value
        try:
            ip = ipaddress.ip_address(value)
        except ValueError:
            return value
        return "<IP_ADDRESS>" if ip.is_global and value not in _KEEP_IPS else value
    return _IPV4.sub(replace, text)


EXERCISES = [
    Exercise(
        id="01-1", name="low alphanumeric fraction", reference=filters.has_low_alnum_fraction,
        cases=[("a.py", _GOOD), ("a.py", "# ----- ===== +++++\n" * 5), ("a.py", ""), ("a.py", "ab!!!!!!"),
               ("a.py", "ab!!!!!"), ("a.py", "变量 = 1  # 中文注释也算字母\n"),
               ("a.py", "x = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"),          # digits count: isalnum, not isalpha
               ("a.py", "数据 = [((1)), ((2))]  ##\n"),
               ("a.py", "            pass\n"),                # whitespace is in the denominator
               ("a.py", "\t\t\t\t\t\t\t\tok()\n"),
               ("a.py", "# 数据，见说明。\n"),                  # characters, not UTF-8 bytes
               ("a.py", "\n" * 7 + "x = 1\n" + "\n" * 7),    # the whole text, not text.strip()
               ("a.py", "# " + "_" * 40 + "\nx = 1\n"),       # '_' is not alphanumeric
               ("a.py", "x" * 100 + "\n" + "}\n" * 10)],      # one fraction over the text, not a mean of lines
        description="True when fewer than 25% of all characters (whitespace included; characters, not "
                    "bytes) are str.isalnum(); empty text counts 0."),
    Exercise(
        id="01-2", name="e-mail redaction", reference=redact_emails,
        cases=["# Author: Wang Fang <wang.fang.dev@gmail.com>",
               "MAINTAINERS = ['li.lei@tsinghua.edu.cn', 'han.meimei@pku.edu.cn']",
               "EMAIL = 'someone@example.com'  # docs",
               "CONTACT = 'Someone@Example.COM'",
               "no address here: x = a @ b",
               "y = x@self.weight  # a matrix product, not an address",
               "out = attn@value.transpose(-1, -2)",
               "ops-team+alerts@acme-corp.io and jane@example.org",
               "# Reported-by: JOHN.DOE@GMAIL.COM",                     # the TLD in capitals
               "see admin@docs.example.net for the template",           # a subdomain of example.net
               "sales@example-corp.com, hr@examples.com, it@notexample.org",   # contain 'example', are not it
               "office: zhang.wei@example.com.cn"],                      # example.com.cn is not example.com
        description="E-mails → <EMAIL> except under example.com/.org/.net (subdomains too, any case); the "
                    "domain must end in a real TLD (any case)."),
    Exercise(
        id="01-3", name="public IPv4 redaction", reference=redact_public_ipv4,
        cases=["SERVER = '52.14.3.9'", "local 192.168.1.20 and 127.0.0.1", "nameserver 8.8.8.8",
               "ssh deploy@104.16.7.9 -p 22", "ALLOWED = ['10.0.0.1', '151.42.17.188']",
               "requires = ['pkg==2.0.0.1', 'other>=10.1.0.2']", "release = 'v52.14.3.9'",
               "carrier-grade NAT 100.64.0.1", "see 1.3.6.1.4.1.311; host 151.42.17.188",
               "1.1.1.1 is a resolver",
               "pins = ['a<=52.14.3.9', 'b~=52.14.3.9', 'c!=52.14.3.9']",   # every operator the text lists
               "built with version 151.42.17.188",
               "VERSION: 52.14.3.9  # and V52.14.3.9",                   # case-insensitive, ': ' between
               "mib = '1.3.6.1.4.1.193.0.2.1'",                         # the tail of a longer dotted number
               "build 52.14.3.9.1 of the image",                        # the head of one
               "not an address: 300.14.3.9"],                            # octet > 255: not an IP at all
        description="Public IPv4 → <IP_ADDRESS>; private/loopback/shared, 8.8.8.8, 1.1.1.1, versions kept."),
]
