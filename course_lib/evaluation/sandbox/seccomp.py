"""The course's seccomp filter: the system calls a sample never needs, and every socket family but three.

Inside bwrap the sample already has no capabilities and cannot create user namespaces
(``--disable-userns``); this filter closes what is left of the kernel surface that privilege
escalations use: namespace and mount calls, ``ptrace``/``process_vm_*``, ``bpf``, ``keyctl``, kernel
modules, ``perf_event_open``, ``userfaultfd``, ``io_uring`` (denied with EPERM). Sockets are an
**allow-list**: ``socket()`` and ``socketpair()`` work only for ``AF_UNIX``, ``AF_INET`` and ``AF_INET6``;
every other family (netlink, packet, ``AF_VSOCK`` — which no network namespace isolates —, ``AF_ALG``,
bluetooth, ...) fails with EAFNOSUPPORT, as on a kernel without it. It is a classic BPF program handed to
bwrap with ``--seccomp FD``; on Docker the sandbox's supervisor installs the same program on top of
Docker's default profile (which allows netlink and ``AF_ALG``). x86_64 only: on another architecture
:func:`filter_bytes` returns None and the backend says the filter is not applied.

Introduced in lesson 06.
"""
from __future__ import annotations

import functools
import platform
import struct

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
EPERM = 1
EAFNOSUPPORT = 97
AF_UNIX, AF_INET, AF_INET6 = 1, 2, 10

# x86_64 numbers of the denied system calls
DENIED_SYSCALLS = {
    "ptrace": 101, "pivot_root": 155, "mount": 165, "umount2": 166, "init_module": 175,
    "delete_module": 176, "kexec_load": 246, "add_key": 248, "request_key": 249, "keyctl": 250,
    "unshare": 272, "perf_event_open": 298, "setns": 308, "process_vm_readv": 310,
    "process_vm_writev": 311, "finit_module": 313, "kexec_file_load": 320, "bpf": 321,
    "userfaultfd": 323, "io_uring_setup": 425, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
}
SOCKET_SYSCALL = 41
SOCKETPAIR_SYSCALL = 53
ALLOWED_SOCKET_FAMILIES = (AF_UNIX, AF_INET, AF_INET6)

_LD_W_ABS, _JEQ_K, _JSET_K, _RET_K = 0x20, 0x15, 0x45, 0x06


def _program() -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions."""
    prog: list = []
    deny, family = "deny", "family"

    def emit(code, k, jt=0, jf=0):
        prog.append([code, jt, jf, k])

    emit(_LD_W_ABS, 4)                                   # arch
    emit(_JEQ_K, AUDIT_ARCH_X86_64, 1, 0)
    emit(_RET_K, SECCOMP_RET_KILL_PROCESS)
    emit(_LD_W_ABS, 0)                                   # syscall number
    emit(_JSET_K, X32_SYSCALL_BIT, deny, 0)
    for nr in sorted(DENIED_SYSCALLS.values()):
        emit(_JEQ_K, nr, deny, 0)
    emit(_JEQ_K, SOCKET_SYSCALL, family, 0)
    emit(_JEQ_K, SOCKETPAIR_SYSCALL, family, 0)
    allow_at = len(prog)
    emit(_RET_K, SECCOMP_RET_ALLOW)
    family_at = len(prog)
    emit(_LD_W_ABS, 16)                                  # socket(domain, ...): low 32 bits of arg 0
    for fam in ALLOWED_SOCKET_FAMILIES:
        emit(_JEQ_K, fam, "allow_back", 0)
    emit(_RET_K, SECCOMP_RET_ERRNO | EAFNOSUPPORT)
    allow_back_at = len(prog)
    emit(_RET_K, SECCOMP_RET_ALLOW)
    deny_at = len(prog)
    emit(_RET_K, SECCOMP_RET_ERRNO | EPERM)
    targets = {"allow": allow_at, "deny": deny_at, "family": family_at, "allow_back": allow_back_at}
    for i, ins in enumerate(prog):
        for j in (1, 2):
            if isinstance(ins[j], str):
                ins[j] = targets[ins[j]] - i - 1
            if not 0 <= ins[j] < 256:
                raise AssertionError("seccomp jump out of range")
    return [tuple(ins) for ins in prog]


@functools.lru_cache(maxsize=1)
def filter_bytes() -> bytes | None:
    """The filter as the bytes bwrap's ``--seccomp`` reads (an array of ``struct sock_filter``), or None
    when this machine is not x86_64. Introduced in lesson 06."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    return b"".join(struct.pack("<HBBI", *ins) for ins in _program())
