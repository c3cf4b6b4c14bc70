"""Portable numerics: the same training bits on any x86-64 CPU with AVX2.

The fingerprint (tests/golden/numerics_fingerprint.json) is a 60-step run of the paper
recipe with the hand-written step, made on one machine; this suite recomputes it on whatever
machine runs it, CI's included, in a fresh process (torch reads the pinned settings when it
is imported), on 1, 2 and 3 workers, with and without a hostile environment. Autograd's
step, where the hand-written one falls back to, keeps its own fingerprint, made on an AMD
EPYC. A further anchor (every loss of a 40-step run, hashed) was measured on another machine,
an AVX2-only AMD EPYC, with autograd's step and MKL COMPATIBLE products (shared notes,
numerics-across-cpus.md): that fallback must still give it.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

from tcrformer.core import blas, cpuid, numerics
from tcrformer.core.config import ConfigError

from conftest import ROOT, claims_arms_config, run_fingerprint

FINGERPRINT = json.loads((ROOT / "tests/golden/numerics_fingerprint.json").read_text())
HOSTILE = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "AVX2", "OMP_NUM_THREADS": "1"}
MORE_THREADS = {"MKL_NUM_THREADS": "2"}  # portable's 1 thread must win over this too
PORTABLE_HERE, WHY_NOT = numerics.portable_supported()
needs_avx2 = pytest.mark.skipif(not PORTABLE_HERE, reason=WHY_NOT or "portable unsupported")


@pytest.fixture(scope="module")
def portable_run():
    return run_fingerprint("--steps", str(FINGERPRINT["steps"]))


@needs_avx2
def test_the_fingerprint_holds_on_this_machine(portable_run):
    ours = portable_run
    assert ours["numerics"]["torch_cpu_capability"] == "AVX2"
    assert ours["numerics"]["threads"] == 1
    assert ours["numerics"]["products"] == FINGERPRINT["made_on"]["products"], ours["numerics"]
    first_different = next(
        (i + 1 for i, (a, b) in enumerate(zip(ours["losses_float32_hex"],
         FINGERPRINT["losses_float32_hex"], strict=True)) if a != b), None,
    )  # fmt: skip
    assert first_different is None, f"the losses differ from step {first_different} on"
    assert ours["weights_sha256"] == FINGERPRINT["weights_sha256"]


@needs_avx2
def test_a_hostile_environment_does_not_change_a_portable_run(portable_run):
    env = {**HOSTILE, **MORE_THREADS}
    hostile = run_fingerprint("--steps", str(FINGERPRINT["steps"]), env=env)
    assert hostile["losses_float32_hex"] == portable_run["losses_float32_hex"]
    assert hostile["weights_sha256"] == portable_run["weights_sha256"]
    replaced = {k: v for k, v in env.items() if k != "OMP_NUM_THREADS"}  # 1 is portable's own
    assert hostile["numerics"]["replaced_from_environment"] == replaced


@needs_avx2
@pytest.mark.parametrize("workers", [2, 3])
def test_any_number_of_workers_gives_the_same_bits_even_in_a_hostile_environment(
    portable_run, workers
):
    """The chunks of a step on 2 or 3 processes: the 1-worker fingerprint, byte for byte,
    whatever the environment says (3 workers for 2 chunks run 2: the third would idle)."""
    env = {**HOSTILE, **MORE_THREADS, "OMP_NUM_THREADS": "2"}
    ours = run_fingerprint("--steps", str(FINGERPRINT["steps"]), "--workers", str(workers), env=env)
    assert ours["workers"] == min(workers, 2) and ours["numerics"]["threads"] == 1
    assert ours["step"] == "hand-written"
    assert ours["losses_float32_hex"] == portable_run["losses_float32_hex"]
    assert ours["weights_sha256"] == portable_run["weights_sha256"] == FINGERPRINT["weights_sha256"]


@needs_avx2
def test_autograds_step_keeps_its_own_fingerprint():
    """The step the hand-written one falls back to (fingerprint --autograd): the bits it
    was committed with, made on an AMD EPYC, and other bits than the hand-written step's."""
    anchor = FINGERPRINT["autograd"]
    ours = run_fingerprint("--steps", str(anchor["steps"]), "--autograd")
    assert ours["step"] == "autograd: asked for"
    assert ours["losses_float32_hex"] == anchor["losses_float32_hex"]
    assert ours["weights_sha256"] == anchor["weights_sha256"] != FINGERPRINT["weights_sha256"]


@needs_avx2
def test_the_short_fingerprint_of_the_emulated_cpus_holds_here():
    """The 3 steps tests/test_emulated_cpus.py runs under QEMU's AVX2-only models: also
    on every real machine, so that one that fails there fails for the emulated CPU."""
    short = FINGERPRINT["emulated"]
    ours = run_fingerprint("--steps", str(short["steps"]), "--batch-size",
                           str(short["batch_size"]), "--workers",
                           str(short["workers"]))  # fmt: skip
    assert ours["losses_float32_hex"] == short["losses_float32_hex"]
    assert ours["weights_sha256"] == short["weights_sha256"]


@needs_avx2
def test_the_claims_arms_fingerprint_holds_here(tmp_path):
    """Every claims arm's changes in one short run (conftest.claims_arms_config: 6 + 6 Pre-LN
    layers, no warm-up, unscaled scores, no positions, PyTorch's own init, a fixed training
    set, no smoothing, the bad batch and its clip), as tests/test_emulated_cpus.py runs it."""
    arms = FINGERPRINT["claims_arms"]
    config = claims_arms_config(tmp_path)
    ours = run_fingerprint(
        "--steps", str(arms["steps"]), "--batch-size", str(arms["batch_size"]), config=config
    )
    assert ours["losses_float32_hex"] == arms["losses_float32_hex"]
    assert ours["weights_sha256"] == arms["weights_sha256"]
    assert arms["weights_sha256"] != FINGERPRINT["emulated"]["weights_sha256"]  # not the recipe's


@needs_avx2
def test_the_fallback_reproduces_the_losses_measured_on_another_machine():
    """Without the OpenBLAS kernels the products run in MKL COMPATIBLE, as they all did when
    another AVX2-only AMD EPYC measured these 40 losses with autograd's step: the fallback
    is portable too."""
    anchor = FINGERPRINT["cross_machine"]
    ours = run_fingerprint("--steps", str(anchor["steps"]), "--seed", str(anchor["seed"]),
                           "--autograd", patch="blas.PACKAGE = 'no_such_openblas'")  # fmt: skip
    assert ours["numerics"]["products"] == "torch (MKL COMPATIBLE,STRICT)"
    assert ours["losses_sha256"].startswith(anchor["losses_sha256_prefix"])
    assert ours["last_loss"] == anchor["last_loss"]


def test_native_numerics_still_run():
    native = run_fingerprint("--steps", "5", "--mode", "native", env=HOSTILE)
    assert native["numerics"]["mode"] == "native"
    assert native["numerics"]["replaced_from_environment"] == {}
    assert len(native["losses_float32_hex"]) == 5
    if PORTABLE_HERE:  # the user's ATEN_CPU_CAPABILITY=default is left alone
        assert native["numerics"]["torch_cpu_capability"] == "DEFAULT"


# pin() on its own ---------------------------------------------------------------------------

AVX2_CPU = {"machine": "x86_64", "model": "test", "flags": [], "all_flags": {"avx2", "fma"}}


class Loader:
    """A stand-in for blas.activate: counts its calls, or raises `fails`."""

    def __init__(self, fails: str = ""):
        self.fails, self.calls = fails, []

    def __call__(self) -> None:
        self.calls.append("load")
        if self.fails:
            raise blas.Unavailable(self.fails)


def test_pin_sets_every_variable_and_records_what_it_replaced():
    """numerics.threads 3 is a training's workers: every portable torch process runs one
    thread (a reduction split over threads would sum in another order)."""
    environ, load = {**HOSTILE, "OMP_NUM_THREADS": "3"}, Loader()
    pinned = numerics.pin(numerics.Numerics("portable", 3), environ, AVX2_CPU, load)
    assert pinned.mode == "portable" and pinned.threads == 1
    assert load.calls == ["load"] and pinned.products == blas.OPENBLAS and not pinned.notice
    assert environ["ATEN_CPU_CAPABILITY"] == "avx2"
    assert environ["MKL_CBWR"] == "COMPATIBLE,STRICT"
    assert environ["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert environ["NUMBA_CPU_NAME"] == "haswell" and environ["NUMBA_CPU_FEATURES"] == ""
    assert environ["OMP_NUM_THREADS"] == environ["MKL_NUM_THREADS"] == "1"
    assert environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"  # before any CUDA start
    assert pinned.replaced == {**HOSTILE, "OMP_NUM_THREADS": "3"}


def test_portable_mode_without_the_kernels_says_which_products_it_runs():
    load = Loader(fails="the scipy_openblas32 package is not installed")
    pinned = numerics.pin(numerics.Numerics("portable", 1), {}, AVX2_CPU, load)
    assert pinned.mode == "portable" and pinned.products == blas.TORCH
    assert pinned.notice.startswith("portable numerics without the OpenBLAS kernels (the sci")
    assert "matrix products run in MKL COMPATIBLE,STRICT" in pinned.notice
    assert "\n" not in pinned.notice


def test_native_mode_leaves_the_environment_and_the_products_alone():
    environ, load = dict(HOSTILE), Loader()
    pinned = numerics.pin(numerics.Numerics("native", 1), environ, AVX2_CPU, load)
    assert pinned.mode == "native" and environ == HOSTILE
    assert load.calls == [] and pinned.products == blas.TORCH


@pytest.mark.parametrize(
    ("cpu", "why"),
    [
        ({**AVX2_CPU, "machine": "aarch64"}, "not an x86-64 CPU"),
        ({**AVX2_CPU, "all_flags": {"avx", "sse4_2"}}, "lacks avx2, fma"),
    ],
)
def test_a_cpu_without_avx2_runs_native_and_says_why(cpu, why):
    environ: dict[str, str] = {}
    load = Loader()
    pinned = numerics.pin(numerics.Numerics("portable", 1), environ, cpu, load)
    assert pinned.requested == "portable" and pinned.mode == "native"
    assert why in pinned.reason and environ == {} and load.calls == []


def test_deterministic_kernels_leave_new_tensors_unfilled():
    """Deterministic mode, without its NaN fill of every new tensor (15 % of a step)."""
    import torch

    saved = (torch.are_deterministic_algorithms_enabled(),
             torch.utils.deterministic.fill_uninitialized_memory)  # fmt: skip
    try:
        numerics.deterministic_kernels()
        assert torch.are_deterministic_algorithms_enabled()
        assert not torch.utils.deterministic.fill_uninitialized_memory
    finally:
        torch.use_deterministic_algorithms(saved[0])
        torch.utils.deterministic.fill_uninitialized_memory = saved[1]


def test_deterministic_kernels_are_set_without_loading_the_compiler():
    """The flag, its warn-only mode and no NaN fill, in a fresh process that never loads
    torch.compile's code generator (a CPU-second of imports in every job)."""
    code = (
        "import sys, torch\n"
        "from tcrformer.core import numerics\n"
        "numerics.deterministic_kernels(warn_only=False)\n"
        "print(torch.are_deterministic_algorithms_enabled(),"
        " torch.is_deterministic_algorithms_warn_only_enabled(),"
        " torch.utils.deterministic.fill_uninitialized_memory,"
        " 'torch._inductor' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.split() == ["True", "False", "False", "False"], done.stderr[-2000:]


def test_pinning_after_torch_is_imported_is_refused():
    import torch  # noqa: F401  (already imported by the suite; made explicit here)

    with pytest.raises(RuntimeError, match="before torch is imported"):
        numerics.pin(numerics.Numerics())


@pytest.mark.parametrize(
    ("section", "key"),
    [({"mode": "fast"}, "numerics.mode"), ({"threads": 0}, "numerics.threads")],
)
def test_bad_numerics_settings_name_their_key(section, key):
    with pytest.raises(ConfigError, match=key):
        numerics.Numerics.from_config(section)


def test_cpu_info_reads_the_model_and_the_flags(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("model name\t: Test CPU 9000\nflags\t\t: fpu avx avx2 fma avx512f\n")
    info = numerics.cpu_info(cpuinfo, ask=lambda: None)  # no cpuid: /proc/cpuinfo alone
    assert info["model"] == "Test CPU 9000"
    assert info["flags"] == ["avx", "avx2", "avx512f", "fma"]


def test_cpu_info_believes_cpuid_over_the_hosts_cpuinfo(tmp_path):
    """Under QEMU /proc/cpuinfo is the host's, cpuid the emulated CPU's: the libraries
    dispatch on cpuid, and so does the record."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("model name\t: Host Xeon\nflags\t\t: avx avx2 fma avx512f avx512bw "
                       "avx512_vnni amx_tile amx_int8 sse2\n")  # fmt: skip
    rome = {"vendor": "AuthenticAMD", "model": "AMD EPYC-Rome Processor",
            "features": {"avx", "avx2", "fma"}}  # fmt: skip
    info = numerics.cpu_info(cpuinfo, ask=lambda: rome)
    assert info["model"] == "AMD EPYC-Rome Processor"
    assert info["flags"] == ["avx", "avx2", "fma"] and "sse2" in info["all_flags"]
    nehalem = {**rome, "model": "Nehalem", "features": set()}
    assert not numerics.portable_supported(numerics.cpu_info(cpuinfo, ask=lambda: nehalem))[0]


def test_cpuid_answers_on_this_cpu():
    """The machine code runs (x86-64 Linux) and confirms what the kernel says of a real CPU
    (the kernel may hide a feature cpuid has, never show one it lacks)."""
    answer = cpuid.ask()
    if platform.machine() != "x86_64":
        assert answer is None
        return
    assert answer["vendor"] in ("GenuineIntel", "AuthenticAMD") and answer["model"]
    proc = numerics.cpu_info(ask=lambda: None)
    assert cpuid.FEATURES.keys() & proc["all_flags"] <= answer["features"]


def test_the_report_header_names_the_workers_a_training_ran_on():
    record = {"mode": "portable", "torch_cpu_capability": "AVX2", "mkl_cbwr": "COMPATIBLE,STRICT",
              "threads": 1, "cpu": {"model": "AMD EPYC"}}  # fmt: skip
    assert numerics.one_line(record).endswith("MKL COMPATIBLE,STRICT, 1 thread on AMD EPYC")
    header = numerics.one_line({**record, "workers": 2})
    assert header.endswith("2 workers of 1 thread on AMD EPYC")
    record["products"] = "OpenBLAS 0.3.34 Haswell kernels, 1 thread"
    assert numerics.one_line(record).startswith(
        "portable: torch AVX2, products OpenBLAS 0.3.34 Haswell kernels, MKL COMPATIBLE"
    )


def test_a_training_finds_glibcs_allocator_settings_here():
    """keep_freed_memory finds mallopt on this (glibc) Linux and both settings take: where it
    finds none it changes nothing (and a step faults its activations in again)."""
    probe = "from tcrformer.training.workers import keep_freed_memory as k; print(k())"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.stdout.strip() == "True", done.stderr[-2000:]
