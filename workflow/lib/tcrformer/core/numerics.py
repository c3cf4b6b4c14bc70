"""Portable numerics: the same floating-point bits from torch on any x86-64 CPU with AVX2.

Three libraries inside the torch CPU wheel pick their code path from the CPU they run on,
and each path rounds differently: ATen's vectorised kernels (AVX2 or AVX-512), MKL's BLAS
and oneDNN. So does the number of threads a reduction is split over. `pin` fixes them
before torch is imported, which is the only time the libraries read them:

    matrix products                 OpenBLAS's Haswell kernels (core.blas, models.products):
                                    fixed blocking, AVX2 + FMA, the same on every such CPU
    ATEN_CPU_CAPABILITY=avx2        ATen's kernels at the AVX2 level
    MKL_CBWR=COMPATIBLE,STRICT      MKL's conditional numerical reproducibility, the branch
                                    every x86-64 CPU runs alike (SSE2 without rcpps/rsqrtps),
                                    for what still calls MKL, and for every product when the
                                    OpenBLAS kernels cannot be loaded
    ONEDNN_MAX_CPU_ISA=AVX2         oneDNN no higher than AVX2
    one thread                      every torch process (OMP/MKL, torch.set_num_threads); the
                                    OpenBLAS kernels run one thread (core.blas.THREADS), and
                                    a training spreads over numerics.threads worker
                                    processes instead (training.workers)

Why OpenBLAS and not MKL for the products: MKL honours MKL_CBWR=AVX2 on Intel CPUs only; on
an AMD CPU it falls back to its own automatic dispatch, so an Intel Xeon and an AMD EPYC
pinned at AVX2 differ from the first training step (measured: docs/numerics.md), and
COMPATIBLE, the one branch MKL runs alike everywhere, has no AVX2: 2.3-2.7x slower
training. OpenBLAS lets the caller name the kernel family, and its Haswell family's block
sizes are compile-time constants. When the kernels cannot be loaded (the wheel missing,
the library loaded earlier with other kernels) the products stay in MKL COMPATIBLE: still
portable, slower, other bits; `pin` says so in one line and the record names it.

`portable` wins over the same variables in the user's environment (`ATEN_CPU_CAPABILITY=
default`, `MKL_CBWR=AVX2`, `OMP_NUM_THREADS=1`): they are replaced, and the replacement is
recorded. `native` leaves the libraries' code paths alone (torch's products, tuned to this
CPU; the bits then depend on it) and runs numerics.threads threads too. A CPU without AVX2
and FMA, or one that is not x86-64, runs native, and says so.

A training on CUDA, in either mode, runs only deterministic kernels (`deterministic_cuda`):
an op without one stops the run with an error that names it, instead of a warning. The bits
are then those of the GPU model, the driver, CUDA and cuDNN, which the record names
(`describe_gpu`).
"""

from __future__ import annotations

import glob
import os
import platform
import subprocess
import sys
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tcrformer.core import blas, cpuid
from tcrformer.core.config import ConfigError

MODES = ("portable", "native")
PORTABLE_ENV = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_CBWR": "COMPATIBLE,STRICT",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    # numba (models/kernels.py) compiles for Haswell with its own features, not the host's
    "NUMBA_CPU_NAME": "haswell",
    "NUMBA_CPU_FEATURES": "",
}
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
# cuBLAS is deterministic only with a fixed workspace of one of these two shapes, set before
# CUDA starts; the first is the one set here (by pin in portable mode, else when a training
# starts on CUDA).
CUBLAS_WORKSPACE = "CUBLAS_WORKSPACE_CONFIG"
DETERMINISTIC_WORKSPACES = (":4096:8", ":16:8")
PORTABLE_CAPABILITY = "AVX2"
_REQUIRED_FLAGS = ("avx2", "fma")


@dataclass(frozen=True)
class Numerics:
    """The `numerics:` config section."""

    mode: str = "portable"  # portable | native
    # The reversal training's workers (training.workers); in native mode also the intra-op
    # threads of other torch jobs. Portable torch processes run one thread each.
    threads: int = 2

    @classmethod
    def from_config(cls, section: Mapping[str, Any] | None) -> Numerics:
        section = dict(section or {})
        numerics = cls(**{k: section[k] for k in ("mode", "threads") if k in section})
        if numerics.mode not in MODES:
            raise ConfigError("numerics.mode", numerics.mode, f"must be one of {', '.join(MODES)}")
        if not isinstance(numerics.threads, int) or numerics.threads < 1:
            raise ConfigError("numerics.threads", numerics.threads, "must be an integer >= 1")
        return numerics

    @property
    def torch_threads(self) -> int:
        """The intra-op threads of a torch process: 1 in portable mode (a reduction split
        over threads sums in another order), numerics.threads in native mode."""
        return 1 if self.mode == "portable" else self.threads


def visible_gpus(environ: Mapping[str, str] | None = None) -> int:
    """How many CUDA GPUs a process started here would see, without importing torch: the
    entries of CUDA_VISIBLE_DEVICES when it is set (up to the first invalid one, as CUDA
    reads it; -1 hides them all), else the NVIDIA device files."""
    environ = os.environ if environ is None else environ
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return len(glob.glob("/dev/nvidia[0-9]*"))
    count = 0
    for entry in (e.strip() for e in listed.split(",")):
        if not entry or entry.startswith("-"):
            break
        count += 1
    return count


@dataclass
class Pinned:
    """What `pin` did: the mode in force, why, and what it replaced in the environment."""

    requested: str
    mode: str
    threads: int | None  # torch's intra-op threads; None: the rule's Snakemake threads apply
    reason: str = ""
    replaced: dict[str, str] = field(default_factory=dict)  # variable -> the user's value
    products: str = blas.TORCH  # blas.OPENBLAS: the portable kernels are loaded and in use
    notice: str = ""  # why portable mode's products fell back to MKL COMPATIBLE, if they did


def cpu_info(
    cpuinfo: str | Path = "/proc/cpuinfo", ask: Callable[[], dict | None] = cpuid.ask
) -> dict[str, Any]:
    """The CPU's model name and the instruction-set flags that decide the numerics.

    /proc/cpuinfo's, as the `cpuid` instruction confirms them (`ask`: core.cpuid.ask, or a
    test's stand-in): the model is cpuid's brand string, and a flag it denies is dropped. They
    differ under an emulator, where /proc/cpuinfo is the host's and cpuid the emulated
    CPU's, which is the one the libraries dispatch on."""
    model, flags = platform.processor() or "unknown", set()
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "model name" and model in ("unknown", "", platform.machine()):
            model = value.strip()
        elif name.strip() == "flags" and not flags:
            flags = set(value.split())
    asked = ask()
    if asked:
        model, flags = asked["model"] or model, cpuid.confirmed(flags, asked)
    shown = sorted(
        f for f in flags if f in {"avx", "avx2", "fma"} or f.startswith(("avx512", "amx"))
    )
    return {"machine": platform.machine(), "model": model, "flags": shown, "all_flags": flags}


def portable_supported(cpu: Mapping[str, Any] | None = None) -> tuple[bool, str]:
    """(True, '') on x86-64 with AVX2 and FMA; else (False, why)."""
    cpu = cpu or cpu_info()
    if cpu["machine"] not in ("x86_64", "AMD64"):
        return False, f"not an x86-64 CPU ({cpu['machine']}): native numerics"
    missing = [f for f in _REQUIRED_FLAGS if f not in cpu["all_flags"]]
    if missing:
        return False, f"the CPU lacks {', '.join(missing)}: native numerics"
    return True, ""


def pin(
    numerics: Numerics,
    environ: MutableMapping[str, str] | None = None,
    cpu: Mapping[str, Any] | None = None,
    load: Callable[[], Any] = blas.activate,
) -> Pinned:
    """Fix the numerics of this process. Must run before torch is imported.

    In portable mode `load()` puts the matrix products on the portable kernels
    (core.blas.activate; a test passes its own); if it raises blas.Unavailable the products
    stay in MKL COMPATIBLE, and `notice` says so."""
    environ = os.environ if environ is None else environ
    if environ is os.environ and "torch" in sys.modules:
        raise RuntimeError("tcrformer.core.numerics.pin must run before torch is imported")
    if numerics.mode == "native":
        return Pinned("native", "native", numerics.threads, "numerics.mode = native")
    ok, reason = portable_supported(cpu)
    if not ok:
        return Pinned("portable", "native", numerics.threads, reason)
    threads = numerics.torch_threads
    wanted = {**PORTABLE_ENV, CUBLAS_WORKSPACE: DETERMINISTIC_WORKSPACES[0],
              **{name: str(threads) for name in THREAD_ENV}}  # fmt: skip
    replaced = {k: environ[k] for k, v in wanted.items() if k in environ and environ[k] != v}
    environ.update(wanted)
    pinned = Pinned("portable", "portable", threads, "", replaced)
    try:
        load()
        pinned.products = blas.OPENBLAS
    except blas.Unavailable as why:
        pinned.notice = (
            f"portable numerics without the OpenBLAS kernels ({why}): matrix products run "
            f"in MKL {PORTABLE_ENV['MKL_CBWR']}, portable but slower, and with other bits"
        )
    return pinned


def thread_count(pinned: Pinned, threads: int | None = None) -> int | None:
    """The intra-op threads a process pinned so runs: numerics.threads, else the rule's."""
    return pinned.threads if pinned.threads is not None else threads


def configure_torch(pinned: Pinned, threads: int | None = None) -> None:
    """After `import torch`: the thread count, and in portable mode torch's deterministic
    kernels (a training on CUDA adds `deterministic_cuda`, in either mode).

    `threads` is the rule's Snakemake thread count; portable mode ignores it and uses the
    configured count, so --cores never changes the bits.
    """
    import torch

    count = thread_count(pinned, threads)
    if count:
        torch.set_num_threads(count)
    if pinned.mode == "portable":
        deterministic_kernels()
    check_in_force(pinned)


def deterministic_kernels(warn_only: bool = True) -> None:
    """torch's deterministic kernels, without the NaN fill of every new tensor that comes
    with them by default: no op of ours reads memory it has not written, and the fill was
    15 % of a portable CPU step (about 540 calls a step, bench/README.md). `warn_only`: an
    op with no deterministic kernel warns (the CPU, where every op we run has one) or
    raises, naming the op (CUDA).

    The flag is set where torch keeps it, torch._C: torch.use_deterministic_algorithms also
    sets the flag of torch.compile's code generator, and importing that generator costs about
    1 CPU-second in every job. Nothing here compiles; a process that has loaded the
    generator gets its flag set too."""
    import sys

    import torch
    import torch.utils.deterministic

    torch._C._set_deterministic_algorithms(True, warn_only=warn_only)
    if "torch._inductor.config" in sys.modules:
        sys.modules["torch._inductor.config"].deterministic = True
    torch.utils.deterministic.fill_uninitialized_memory = False


def deterministic_cuda(environ: MutableMapping[str, str] | None = None) -> None:
    """The numerics of a training on CUDA, before its first CUDA op: deterministic kernels
    or an error naming the op (warn_only=False), cuDNN's deterministic algorithms and no
    benchmarking among them, no TF32 (float32 products stay float32), and cuBLAS's fixed
    workspace. An unsuitable CUBLAS_WORKSPACE_CONFIG is replaced while CUDA has not
    started (pin has set it already in portable mode); once CUDA runs it is too late."""
    import torch

    environ = os.environ if environ is None else environ
    if environ.get(CUBLAS_WORKSPACE) not in DETERMINISTIC_WORKSPACES:
        if torch.cuda.is_initialized():
            raise RuntimeError(
                f"{CUBLAS_WORKSPACE} must be one of {', '.join(DETERMINISTIC_WORKSPACES)} "
                "before CUDA starts, and CUDA started before this training: set it in the "
                "environment first"
            )
        environ[CUBLAS_WORKSPACE] = DETERMINISTIC_WORKSPACES[0]
    deterministic_kernels(warn_only=False)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


GPU_FIELDS = ("gpu", "driver", "cuda", "cudnn")


def describe_gpu(device: Any, driver: Callable[[], str | None] | None = None) -> dict:
    """{gpu, driver, cuda, cudnn} of the device a training ran on: the GPU's model name, the
    NVIDIA driver's version (`driver`: nvidia_driver, or a test's stand-in), the CUDA
    version torch was built with and the cuDNN version it loaded. Each is None where
    unknown, and all are None on the CPU."""
    record: dict[str, Any] = dict.fromkeys(GPU_FIELDS)
    if getattr(device, "type", device) != "cuda":
        return record
    import torch

    record["gpu"] = torch.cuda.get_device_name(device)
    record["driver"] = (driver or nvidia_driver)()
    record["cuda"] = torch.version.cuda
    cudnn = torch.backends.cudnn
    record["cudnn"] = cudnn.version() if cudnn.is_available() else None
    return record


def nvidia_driver() -> str | None:
    """The NVIDIA driver's version as nvidia-smi reports it ('570.124.06'), None without it."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=True,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.split()
    return lines[0] if lines else None


def check_in_force(pinned: Pinned) -> None:
    """A portable process whose torch does not run at AVX2 was pinned too late, and one
    whose products are not those it was pinned to lost its kernels: both are bugs."""
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    if pinned.mode == "portable" and capability != PORTABLE_CAPABILITY:
        raise RuntimeError(
            f"portable numerics asked for {PORTABLE_CAPABILITY}, torch runs {capability}: "
            "torch was imported before tcrformer.core.numerics.pin"
        )
    if products_in_force() != pinned.products:
        raise RuntimeError(
            f"numerics pinned the products to {pinned.products}, "
            f"this process runs {products_in_force()}"
        )


def products_in_force() -> str:
    """blas.OPENBLAS when this process's products run on the portable kernels, else torch."""
    return blas.OPENBLAS if blas.active() is not None else blas.TORCH


def describe_products(pinned: Pinned) -> str:
    """'OpenBLAS 0.3.34 Haswell kernels, 1 thread', or which torch products run."""
    kernels = blas.active()
    if kernels is not None:
        return kernels.describe()
    if pinned.mode == "portable":
        return f"torch (MKL {PORTABLE_ENV['MKL_CBWR']})"
    return "torch (native)"


def mkl_version() -> str:
    import torch

    for line in torch.__config__.show().splitlines():
        if "Math Kernel Library Version" in line:
            return line.split("Version", 1)[1].split("-", 1)[0].strip()
    return "not used"


def describe(pinned: Pinned) -> dict[str, Any]:
    """The numerics in force in this process, for the manifest and the golden report."""
    import torch

    cpu = cpu_info()
    return {
        "mode": pinned.mode,
        "requested": pinned.requested,
        "reason": pinned.reason,
        "replaced_from_environment": dict(sorted(pinned.replaced.items())),
        "cpu": {"machine": cpu["machine"], "model": cpu["model"], "flags": cpu["flags"]},
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "products": describe_products(pinned),
        "products_notice": pinned.notice,
        "mkl_cbwr": os.environ.get("MKL_CBWR", "automatic"),
        "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", "automatic"),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "mkl": mkl_version(),
    }


def one_line(numerics: Mapping[str, Any]) -> str:
    """'portable: torch AVX2, products OpenBLAS 0.3.34 Haswell kernels, MKL COMPATIBLE,STRICT,
    2 workers of 1 thread on AMD EPYC', a report header (a training's record names its
    workers, and the GPU it trained on; a record from before the products were recorded
    has no products)."""
    threads = numerics["threads"]
    cores = f"{threads} thread{'s' if threads != 1 else ''}"
    workers = numerics.get("workers", 1)  # a training's record has it; other jobs run one
    if workers != 1:
        cores = f"{workers} workers of {cores}"
    products = numerics.get("products")
    products = f"products {products.split(',')[0]}, " if products else ""
    text = (
        f"{numerics['mode']}: torch {numerics['torch_cpu_capability']}, {products}"
        f"MKL {numerics['mkl_cbwr']}, {cores} on {numerics['cpu']['model']}"
    )
    if numerics.get("reason"):
        text += f" ({numerics['reason']})"
    if numerics.get("products_notice"):
        text += f" ({numerics['products_notice']})"
    gpu = numerics.get("gpu") or {}  # a training's record; on the CPU its fields are None
    if gpu.get("gpu"):
        text += (
            f"; trained on {gpu['gpu']} (driver {gpu['driver']}, CUDA {gpu['cuda']}, "
            f"cuDNN {gpu['cudnn']})"
        )
    return text
