"""What the CPU says it is, asked with the `cpuid` instruction itself.

ATen, MKL, OpenBLAS and oneDNN choose their code paths from `cpuid`, not from
/proc/cpuinfo. The two agree on a real machine, but not under an emulator: QEMU's user-mode
`qemu-x86_64 -cpu EPYC-Rome` answers `cpuid` as an AVX2-only AMD EPYC while /proc/cpuinfo
still describes the host. So the numerics record names the CPU by `cpuid`'s answer.

Python has no `cpuid`, so `ask` runs 27 bytes of x86-64 machine code through ctypes:

    push rbx; mov r8, rdx           ; rbx is callee-saved; rdx holds the output's address
    mov eax, edi; mov ecx, esi      ; the leaf and the subleaf
    cpuid
    mov [r8], eax; mov [r8+4], ebx; mov [r8+8], ecx; mov [r8+12], edx
    pop rbx; ret

Where that cannot run (another architecture, no executable memory) `ask` returns None and
the caller reads /proc/cpuinfo alone.
"""

from __future__ import annotations

import ctypes
import mmap
import platform
import struct
from collections.abc import Callable
from functools import cache

_CODE = bytes.fromhex("53 4989d0 89f8 89f1 0fa2 418900 41895804 41894808 4189500c 5b c3")
_Registers = ctypes.c_uint32 * 4
# Linux's flag name -> (leaf, subleaf, register 0..3 = eax, ebx, ecx, edx, bit).
FEATURES = {
    "fma": (1, 0, 2, 12),
    "avx": (1, 0, 2, 28),
    "avx2": (7, 0, 1, 5),
    "avx512f": (7, 0, 1, 16),
    "amx_tile": (7, 0, 3, 24),
}
# Every AVX-512 extension needs the foundation, and every AMX one the tiles.
FAMILIES = {"avx512": "avx512f", "amx": "amx_tile"}

Cpuid = Callable[[int, int], tuple[int, int, int, int]]


@cache
def instruction() -> Cpuid | None:
    """cpuid(leaf, subleaf) -> (eax, ebx, ecx, edx), or None where it cannot be run."""
    if platform.machine() not in ("x86_64", "AMD64") or platform.system() != "Linux":
        return None
    try:
        page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    except (OSError, ValueError, AttributeError):
        return None
    page.write(_CODE)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    prototype = ctypes.CFUNCTYPE(None, ctypes.c_uint32, ctypes.c_uint32, ctypes.POINTER(_Registers))
    function = prototype(address)

    def cpuid(leaf: int, subleaf: int = 0) -> tuple[int, int, int, int]:
        registers = _Registers()
        function(leaf, subleaf, registers)
        return tuple(registers)

    cpuid.page = page  # the code lives as long as the function
    return cpuid


def ask(cpuid: Cpuid | None = None) -> dict | None:
    """{'vendor', 'model' (the brand string), 'features' (FEATURES it has)}, or None."""
    cpuid = cpuid or instruction()
    if cpuid is None:
        return None
    highest, ebx, ecx, edx = cpuid(0, 0)
    vendor = struct.pack("<III", ebx, edx, ecx).decode("ascii", "replace")
    brand_leaves = range(0x80000002, 0x80000005)  # 48 bytes of the brand string
    brand = b""
    if cpuid(0x80000000, 0)[0] >= brand_leaves[-1]:
        brand = b"".join(struct.pack("<4I", *cpuid(leaf, 0)) for leaf in brand_leaves)
    features = {
        name for name, (leaf, subleaf, register, bit) in FEATURES.items()
        if leaf <= highest and cpuid(leaf, subleaf)[register] >> bit & 1
    }  # fmt: skip
    model = brand.split(b"\0")[0].decode("ascii", "replace").strip()
    return {"vendor": vendor, "model": model, "features": features}


def confirmed(flags: set[str], answer: dict) -> set[str]:
    """The flags (/proc/cpuinfo's names) that `cpuid` confirms: one it can be asked about
    that it denies is dropped, with its family (every avx512* without avx512f)."""
    kept = set()
    for flag in flags:
        needs = FEATURES.keys() & {flag} or {f for p, f in FAMILIES.items() if flag.startswith(p)}
        if needs <= answer["features"]:
            kept.add(flag)
    return kept
