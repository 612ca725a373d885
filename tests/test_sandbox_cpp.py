"""The C++ judge (issue 38, point 2): compile with g++ in the sandbox, run the binary in the sandbox, judge
the answers on the host. Statuses, the wire format, and the attack classes of the issue on both real
backends (``backend`` fixture: bwrap, then Docker with the course's daemon; a backend that cannot run
is skipped with its reason unless ``SANDBOX_REQUIRE_BACKENDS`` names it). Every case below names the
sample it judges in its assertion message."""
from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from course_lib.evaluation.rewards import reward_of_result
from course_lib.evaluation.sandbox.cpp import (
    _Reader,
    canonical_type,
    compile_command,
    encode_value,
    first_error_line,
    parse_signature,
    run_cpp_tests,
    translation_unit,
)
from course_lib.evaluation.sandbox.judge import Abort

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed (`apt-get install g++`)")

REPO = Path(__file__).resolve().parents[1]
SIG = "long long total(const std::vector<long long>& xs)"
CASES = [(([1, 2, 3],), 6), ([4], 4), ([], 0)]
HEAD = "#include <vector>\n#include <cstdio>\n#include <cstdlib>\n#include <iostream>\n#include <stdexcept>\n"
CORRECT = HEAD + "long long total(const std::vector<long long>& xs) { long long s = 0; for (long long x : xs) s += x; return s; }\n"
SECRET = "course-cpp-secret-5b21e7"


def judge(source: str, backend: str, cases=CASES, signature: str = SIG, **kw):
    kw.setdefault("timeout_s", 3.0)
    return run_cpp_tests(source, signature, cases, backend=backend, **kw)


# --- host side only (no sandbox) --------------------------------------------------------------------

def test_signature_parsing():
    sig = parse_signature("long long total(const std::vector<long long>& xs)")
    assert (sig.name, sig.returns, sig.params, sig.param_names) == ("total", "long long", ("std::vector<long long>",), ("xs",))
    sig = parse_signature("std::vector<std::string> split(const std::string &s, int k);")
    assert sig.returns == "std::vector<std::string>" and sig.params == ("std::string", "int")
    assert parse_signature("bool f()").params == ()
    assert canonical_type("const vector< long long int > &") == "std::vector<long long>"
    for bad in ("double f(double x)", "f(int x)", "int f(int x = 3)", "void f(int x)"):
        with pytest.raises(ValueError):
            parse_signature(bad)


def test_wire_round_trip_and_strict_reader():
    budget = [100]
    for ctype, value in (("long long", -(1 << 63)), ("int", 7), ("bool", True), ("std::string", "a b:\u00e9\n"),
                         ("std::vector<std::string>", ["", "x y", "3:"]), ("std::vector<long long>", [])):
        r = _Reader(encode_value(ctype, value), budget)
        assert r.value(ctype) == value, (ctype, value)
        r.done()
    for ctype, data in (("long long", b"01"), ("long long", b"+1"), ("bool", b"2"), ("std::string", b"5:ab"),
                        ("int", b"2147483648"), ("std::vector<long long>", b"2 1"), ("long long", b"1 ")):
        with pytest.raises(Abort):
            r = _Reader(data, [100])
            r.value(ctype)
            r.done()
    with pytest.raises(Abort, match="values"):   # the per-run value budget
        _Reader(encode_value("std::vector<int>", [0] * 50), [10]).value("std::vector<int>")
    for ctype, value in (("int", 1 << 31), ("bool", 1), ("long long", True), ("std::string", b"x"),
                         ("std::vector<int>", "abc")):
        with pytest.raises(ValueError):
            encode_value(ctype, value)


def test_bad_cases_raise_naming_the_case():
    with pytest.raises(ValueError, match="case 1"):
        run_cpp_tests(CORRECT, SIG, [(([1],), 1), (([1.5],), 1)], backend="bwrap")
    with pytest.raises(ValueError, match="case 0"):
        run_cpp_tests(CORRECT, "long long f(int a, int b)", [((1,), 1)], backend="bwrap")


def test_translation_unit_layout():
    unit = translation_unit("int main() { return 1; }", SIG)
    assert unit.startswith('#line 1 "solution.cpp"\nint main()')
    assert "#undef main" in unit and "cj_result = total(cj_a0);" in unit
    assert "-Dmain=course_candidate_main" in compile_command() and "-std=c++17" in compile_command()
    assert first_error_line("In function 'x':\nsolution.cpp:3:5: error: expected ';'\nmore") == \
        "solution.cpp:3:5: error: expected ';'"


# --- statuses -----------------------------------------------------------------------------------------

def test_correct_program_passes(backend):
    r = judge(CORRECT, backend)
    assert r.status == "passed" and r.tests == ["ok", "ok", "ok"], ("correct", r, r.stderr[-500:])
    assert r.compile_s is not None and r.compile_s > 0
    assert reward_of_result("lecture", r) == 1.0


def test_wrong_answer_fails_with_partial_credit(backend):
    r = judge(HEAD + "long long total(const std::vector<long long>& xs) { return 6; }", backend)
    assert r.status == "failed" and r.tests == ["ok", "assert", "assert"], ("constant 6", r)
    assert "expected 4" in r.test_errors[1]
    assert reward_of_result("fraction", r) == pytest.approx(1 / 3)


def test_compile_error_is_syntax_error_with_first_line(backend):
    r = judge(HEAD + "long long total(const std::vector<long long>& xs) {\n  return xs.size()\n}\n", backend)
    assert r.status == "syntax_error", ("missing semicolon", r)
    assert r.detail.startswith("compile error: solution.cpp:7:") and "error:" in r.detail, r.detail
    assert reward_of_result("lecture", r) == -1.0


def test_candidate_main_is_renamed_and_conversions_apply(backend):
    src = HEAD + ("int total(std::vector<long long> xs) { int s = 0; for (auto x : xs) s += int(x); return s; }\n"
                  "int main() { std::cout << \"candidate main\"; std::exit(1); }\n")
    r = judge(src, backend)
    assert r.status == "passed" and "candidate main" not in r.stdout, ("own main, by-value parameter", r)


def test_strings_bools_and_vectors_cross(backend):
    src = ("#include <string>\n#include <vector>\n"
           "std::vector<std::string> tag(const std::string& s, int k, bool up) {\n"
           "  std::vector<std::string> out;\n"
           "  for (int i = 0; i < k; ++i) out.push_back(up ? s + \"!\" : s);\n  return out; }\n")
    sig = "std::vector<std::string> tag(const std::string& s, int k, bool up)"
    cases = [(("a b", 2, True), ["a b!", "a b!"]), (("\u00e9:", 1, False), ["\u00e9:"]), (("", 0, True), [])]
    r = judge(src, backend, cases, sig)
    assert r.status == "passed", ("strings", r, r.test_errors)


def test_thrown_exception_is_runtime_error(backend):
    r = judge(HEAD + "long long total(const std::vector<long long>& xs) { throw std::runtime_error(\"boom\"); }", backend)
    assert r.status == "runtime_error" and r.tests == ["error"] * 3 and "boom" in r.test_errors[0], ("throw", r)
    assert reward_of_result("lecture", r) == -0.5


def test_segfault_is_runtime_error(backend):
    r = judge(HEAD + "long long total(const std::vector<long long>& xs) { volatile int* p = nullptr; return *p; }", backend)
    assert r.status == "runtime_error" and "signal 11" in r.detail, ("null dereference", r)


def test_endless_loop_is_timeout(backend):
    r = judge(HEAD + "long long total(const std::vector<long long>& xs) { volatile long long s = 0; for (;;) ++s; }",
              backend, timeout_s=1.5)
    assert r.status == "timeout", ("endless loop", r)


def test_output_flood_is_output_limit(backend):
    r = judge(HEAD + "long long total(const std::vector<long long>& xs) {\n"
              "  for (int i = 0; i < 200000; ++i) std::cout << \"flood flood\\n\";\n  return 0; }", backend)
    assert r.status == "output_limit", ("200,000 lines", r)


def test_memory_is_memory_limit(backend):
    touch = HEAD + ("long long total(const std::vector<long long>& xs) {\n"
                    "  volatile char* p = (char*)std::malloc(300 << 20);\n"
                    "  for (long i = 0; p && i < (300L << 20); i += 4096) p[i] = 1;\n  return p ? p[0] : -1; }")
    r = judge(touch, backend)
    assert r.status == "memory_limit", ("touch 300 MiB at 128", r)
    r = judge(HEAD + "long long total(const std::vector<long long>& xs) { std::vector<long long> v(1LL << 33); return v[1]; }",
              backend)
    assert r.status == "memory_limit", ("64 GiB vector: bad_alloc", r)


# --- attacks at compile time ----------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/etc/shadow", "/root/.bashrc", str(REPO / "pyproject.toml"),
                                  "/usr/local/include/secret.h"])
def test_include_of_host_files_does_not_compile(backend, path):
    r = judge(f'#include "{path}"\n' + CORRECT, backend)
    assert r.status == "syntax_error" and "No such file" in r.detail, (f"#include {path}", r.detail)


def test_include_etc_hostname_is_not_the_hosts(backend):
    # bwrap: no /etc/hostname at all; Docker: the container's own (its id), never the host's name
    r = judge('#include "/etc/hostname"\n' + CORRECT, backend)
    host = socket.gethostname()
    assert r.status == "syntax_error" and host not in r.detail + r.stderr, ("#include /etc/hostname", r.detail)


def test_include_etc_passwd_shows_no_host_account(backend):
    r = judge('#include "/etc/passwd"\n' + CORRECT, backend)
    assert r.status == "syntax_error", ("#include /etc/passwd", r)
    host_users = [line.split(":")[0] for line in Path("/etc/passwd").read_text().splitlines()
                  if line and line.split(":")[0] not in ("root", "nobody")]
    assert not any(f"{u}:x:" in r.stderr for u in host_users), ("host /etc/passwd leaked", r.stderr[:500])


def test_include_of_a_secret_file_the_host_wrote(backend, tmp_path):
    secret = tmp_path / "secret.h"
    secret.write_text(f"const char* s = \"{SECRET}\";\n")
    secret.chmod(0o644)
    tmp_path.chmod(0o755)
    r = judge(f'#include "{secret}"\n' + CORRECT, backend)
    assert r.status == "syntax_error" and SECRET not in r.stderr + r.detail, (f"#include {secret}", r)


def test_proc_environ_at_compile_time_holds_no_host_secret(backend, monkeypatch):
    monkeypatch.setenv("COURSE_SECRET_TOKEN", SECRET)
    for path in ("/proc/self/environ", "/proc/1/environ"):
        r = judge(f"#include <{path}>\n" + CORRECT, backend)
        assert r.status == "syntax_error" and SECRET not in r.stderr + r.detail, (f"#include <{path}>", r)
    r = judge('asm(".incbin \\"/proc/self/environ\\"");\n' + CORRECT, backend)
    assert SECRET not in r.stderr + r.detail + r.stdout, (".incbin environ", r)


def test_template_depth_bomb_is_a_compile_error(backend):
    src = CORRECT + "template <int N> struct R { enum { v = R<N + 1>::v }; };\nint bomb = R<0>::v;\n"
    r = judge(src, backend)
    assert r.status == "syntax_error" and "depth" in r.detail, ("template recursion", r.detail)


def test_constexpr_bomb_is_a_compile_error(backend):
    src = CORRECT + ("constexpr long long spin() { long long s = 0; for (long long i = 0; i < 4000000000LL; ++i) "
                     "s += i % 7; return s; }\nconstexpr long long bomb = spin();\n")
    r = judge(src, backend)
    assert r.status == "syntax_error" and "constexpr" in r.detail, ("constexpr loop", r.detail)


def test_preprocessor_bomb_is_bounded_by_the_compile_limits(backend):
    macros = "#define A0 x+\n" + "".join(f"#define A{i} A{i - 1} A{i - 1}\n" for i in range(1, 31))
    r = judge(macros + CORRECT + "int x = 1;\nint bomb = A30 0;\n", backend, compile_timeout_s=4, compile_memory_mb=256)
    assert r.status == "syntax_error" and "limit" in r.detail, ("2**30 tokens", r.detail)
    assert r.compile_s < 30, r.compile_s


def test_huge_binary_is_refused(backend):
    src = CORRECT + "char big[64 << 20] = {1};\nlong long use() { return big[5]; }\n"
    r = judge(src, backend)
    assert r.status == "syntax_error" and "limit" in r.detail, ("64 MiB .data", r.detail)


# --- attacks on the driver and the protocol ----------------------------------------------------------------

def test_candidate_that_restores_main_does_not_link(backend):
    r = judge("#undef main\n" + CORRECT + "int main() { return 0; }\n", backend)
    assert r.status == "syntax_error", ("#undef main + own main", r)
    r = judge(CORRECT + 'extern "C" int fake_main() __asm__("main");\nextern "C" int fake_main() { return 0; }\n', backend)
    assert r.status == "syntax_error", ("asm label main", r)


def test_defining_the_drivers_symbols_does_not_link(backend):
    r = judge(CORRECT + "namespace course_judge_driver { static void cj_reply(const std::string&) {} }\n", backend)
    assert r.status == "syntax_error", ("redefined cj_reply", r)


@pytest.mark.parametrize("how", ["std::exit(0)", "std::_Exit(0)", "std::quick_exit(0)",
                                 'asm volatile("mov $60, %eax\\n xor %edi, %edi\\n syscall")'])
def test_exit_before_the_tests_is_not_a_pass(backend, how):
    src = HEAD + "#include <unistd.h>\n" + f"__attribute__((constructor)) static void early() {{ {how}; }}\n" + CORRECT
    r = judge(src, backend)
    assert r.status == "failed" and r.exited_at_load and r.tests_passed == 0, (how, r)
    assert reward_of_result("lecture", r) == -0.5


def test_exit_during_the_tests_fails_the_rest(backend):
    src = HEAD + ("long long total(const std::vector<long long>& xs) {\n"
                  "  if (xs.size() == 1) std::exit(0);\n  long long s = 0; for (auto x : xs) s += x; return s; }\n")
    r = judge(src, backend)
    assert r.status == "failed" and r.tests == ["ok"] and r.tests_total == 3, ("exit(0) at case 1", r)
    assert reward_of_result("fraction", r) == pytest.approx(1 / 3)


@pytest.mark.parametrize("payload", ["1 ready", "1 v 6", "0 v 6"])
def test_global_constructor_writing_fake_frames_fails(backend, payload):
    frame = "\\x00\\x00\\x00" + f"\\x{len(payload):02x}\" \"" + payload   # "..." "...": a hex escape stops there
    src = (HEAD + "#include <unistd.h>\n"
           f"struct Forge {{ Forge() {{ for (int fd = 1; fd < 8; ++fd) ::write(fd, \"{frame}\", {4 + len(payload)}); }} }} forge;\n"
           "long long total(const std::vector<long long>& xs) { return 6; }\n")
    r = judge(src, backend)
    assert r.status == "failed" and r.tests_passed <= 1, (f"forged {payload!r} on every fd", r)


def test_writing_to_the_reply_fd_during_a_call_fails(backend):
    src = (HEAD + "#include <unistd.h>\n"
           "long long total(const std::vector<long long>& xs) { ::write(4, \"\\0\\0\\0\\x03\" \"" + "1 v\", 7); return 6; }\n")
    r = judge(src, backend)
    assert r.status == "failed" and r.tests_passed == 0, ("write to fd 4", r)


def test_interposed_write_only_changes_its_own_answers(backend):
    src = (HEAD + "#include <unistd.h>\n#include <sys/syscall.h>\n"
           'extern "C" ssize_t write(int fd, const void* b, size_t n) { return syscall(SYS_write, fd, b, n); }\n'
           "long long total(const std::vector<long long>& xs) { return 6; }\n")
    r = judge(src, backend)
    assert r.status == "failed" and r.tests == ["ok", "assert", "assert"], ("interposed write", r)


# --- attacks at run time --------------------------------------------------------------------------------------

def test_network_is_unreachable(backend):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    src = (HEAD + "#include <sys/socket.h>\n#include <netinet/in.h>\n#include <arpa/inet.h>\n#include <unistd.h>\n"
           "long long total(const std::vector<long long>& xs) {\n"
           "  int s = socket(AF_INET, SOCK_STREAM, 0); if (s < 0) return -1;\n"
           "  sockaddr_in a{}; a.sin_family = AF_INET; a.sin_port = htons((unsigned short)xs[0]);\n"
           "  a.sin_addr.s_addr = inet_addr(xs[1] ? \"1.1.1.1\" : \"127.0.0.1\");\n"
           "  return connect(s, (sockaddr*)&a, sizeof a) == 0 ? 1 : -1; }\n")
    try:
        r = judge(src, backend, [(([port, 0],), -1), (([53, 1],), -1)])
        assert r.status == "passed", ("connect to the host's loopback port and to 1.1.1.1", r, r.test_errors)
        with pytest.raises(OSError):
            server.accept()
    finally:
        server.close()


def test_host_files_are_unreadable_at_run_time(backend):
    src = (HEAD + "#include <fstream>\n#include <string>\n"
           "long long total(const std::vector<long long>& xs) {\n"
           f"  const char* paths[] = {{\"/etc/shadow\", \"{REPO / 'pyproject.toml'}\", \"/root/.bashrc\", \"/proc/1/environ\"}};\n"
           "  std::ifstream f(paths[xs[0]]); std::string line;\n"
           "  return std::getline(f, line) ? 1 : 0; }\n")
    r = judge(src, backend, [(([i],), 0) for i in range(4)])
    assert r.status == "passed", ("read host files at run time", r, r.test_errors)


def test_include_of_an_endless_device_is_bounded(backend):
    r = judge('#include "/dev/zero"\n' + CORRECT, backend, compile_timeout_s=5, compile_memory_mb=256)
    assert r.status == "syntax_error", ("#include /dev/zero", r.detail)


def test_fork_bomb_is_contained_and_leaves_nothing(backend):
    from tests.test_sandbox_attacks import no_survivors

    src = (HEAD + "#include <unistd.h>\n"
           "long long total(const std::vector<long long>& xs) { for (;;) fork(); }\n")
    r = judge(src, backend, timeout_s=2)
    assert r.status in ("timeout", "runtime_error", "memory_limit", "failed") and r.tests_passed == 0, ("fork bomb", r)
    assert no_survivors(), "a process of a sandbox uid outlived the fork bomb's run"


def test_unsafe_backend_compiles_runs_and_leaves_nothing_in_tmp():
    import warnings

    before = set(Path("/tmp").glob("sample-*"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # unsafe says loudly that it is not isolation
        ok = run_cpp_tests(CORRECT, SIG, CASES, backend="unsafe")
        bad = run_cpp_tests(CORRECT + "int x = ;\n", SIG, CASES, backend="unsafe")
    assert ok.status == "passed" and bad.status == "syntax_error", ("unsafe", ok, bad)
    assert set(Path("/tmp").glob("sample-*")) <= before, "the unsafe backend left a folder in the host's /tmp"
