"""The portable bits on CPUs this machine is not: QEMU's emulated AVX2-only AMD and Intel.

`qemu-x86_64 -cpu MODEL` (Debian's qemu-user) runs this venv's Python as MODEL: every
`cpuid` that ATen, MKL, OpenBLAS and oneDNN read describes MODEL (vendor, instruction sets,
caches), and its AVX2 and FMA run in IEEE arithmetic. It does not run AVX-512, so the
AVX-512 families stay with the real machines the suite runs on (tests/test_numerics.py,
tests/test_products.py). Emulation is about 5,000x slower than the CPU, so the check is
small: the 15 product cases, torch's own product in MKL under the portable pin, 3 steps of
the paper recipe at batch 16 on 2 workers (the hand-written forward and backward passes,
dropout, the chunks' sum, clipping, Adam), and 3 steps on 1 worker with every claims arm's
changes at once (the claims run trains its arms portable, 1 worker each), all against the
hashes committed in tests/golden/numerics_fingerprint.json.
The negative control: left to itself (no MKL_CBWR), MKL rounds one product differently on
the two models, as it does on real AMD and Intel CPUs; the pins are what makes them agree.

Not in the README's test command (its 15 minutes on 2 cores): marked `emulated`, which the
default options leave out, and run by CI as a step of its own (.ci/run, and a job of the
GitHub workflow):

    .venv/bin/python -m pytest -m emulated -n 0 tests/test_emulated_cpus.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tcrformer.core import numerics

from conftest import ROOT, claims_arms_config

FINGERPRINT = json.loads((ROOT / "tests/golden/numerics_fingerprint.json").read_text())
SHORT = FINGERPRINT["emulated"]
ARMS = FINGERPRINT["claims_arms"]
MODELS = {  # QEMU's CPU model: the brand string its cpuid gives
    "EPYC-Rome": "AMD EPYC-Rome Processor",  # AMD Zen 2, AVX2 only
    "Haswell": "Intel Core Processor (Haswell)",  # Intel, AVX2 only
}
JOBS = {  # what each model runs, in one emulated process each (the training starts a second)
    "products": ["--products"],
    "training": [
        f"--{key.replace('_', '-')}={SHORT[key]}" for key in ("steps", "batch_size", "workers")
    ],
    "claims_arms": [f"--{key.replace('_', '-')}={ARMS[key]}" for key in ("steps", "batch_size")],
    "mkl_on_its_own": ["--torch-product", "--mode", "native"],  # no pins: the control
}
QEMU = shutil.which("qemu-x86_64")
TCG_WARNING = "qemu-x86_64: warning: TCG doesn't support requested feature"

pytestmark = [
    pytest.mark.emulated,
    pytest.mark.skipif(QEMU is None, reason="qemu-x86_64 not found: install qemu-user"),
]


def emulated_python(model: str, folder: Path) -> Path:
    """This venv's Python as a script that runs it under `qemu-x86_64 -cpu model`, with
    argv[0] the script itself (-0): so sys.executable is the script, and a process the
    emulated Python starts is emulated too (a training's workers are forked: emulated
    anyway). The script sits in a folder
    of its own with the venv's pyvenv.cfg and lib/, so that the venv is found from it."""
    (folder / "bin").mkdir(parents=True)
    venv = Path(sys.prefix)
    if (venv / "pyvenv.cfg").exists():
        shutil.copy(venv / "pyvenv.cfg", folder / "pyvenv.cfg")
        (folder / "lib").symlink_to(venv / "lib")
    script = folder / "bin" / "python"
    interpreter = Path(sys.executable).resolve()
    script.write_text(f'#!/bin/sh\nexec {QEMU} -cpu {model} -0 "$0" {interpreter} "$@"\n')
    script.chmod(0o755)
    return script


@pytest.fixture(scope="module")
def emulated(tmp_path_factory) -> dict[tuple[str, str], dict]:
    """Every job on every model, all started at once: {(model, job): its JSON}."""
    folder = tmp_path_factory.mktemp("emulated")
    configs = {"claims_arms": claims_arms_config(folder)}  # the others run config/config.yaml
    control_env = {k: v for k, v in os.environ.items() if k not in numerics.PORTABLE_ENV}
    started = {}
    for model in MODELS:
        python = emulated_python(model, folder / model)
        for job, args in JOBS.items():
            config = configs.get(job, ROOT / "config/config.yaml")
            command = [str(python), "-m", "tcrformer.training.fingerprint",
                       "--config", str(config), *args]  # fmt: skip
            env = control_env if job == "mkl_on_its_own" else os.environ
            out, err = (open(folder / f"{model}.{job}.{s}", "w+") for s in ("out", "err"))
            started[model, job] = (subprocess.Popen(command, stdout=out, stderr=err, env=env),
                                   out, err)  # fmt: skip
    results = {}
    for key, (process, out, err) in started.items():
        process.wait(timeout=3600)
        out.seek(0), err.seek(0)
        log = "".join(line for line in err if not line.startswith(TCG_WARNING))
        assert process.returncode == 0, f"{key} exited {process.returncode}:\n{log[-3000:]}"
        results[key] = json.loads(out.read())
        out.close(), err.close()
    return results


@pytest.mark.parametrize("model", MODELS)
def test_the_libraries_see_the_emulated_cpu_and_the_record_names_it(emulated, model):
    """cpuid's answer, not the host's /proc/cpuinfo (which QEMU passes through)."""
    for job in JOBS:
        record = emulated[model, job]["numerics"]
        assert record["cpu"]["model"] == MODELS[model], job
        assert {"avx2", "fma"} <= set(record["cpu"]["flags"]), job
        assert not [f for f in record["cpu"]["flags"] if f.startswith("avx512")], job
        assert record["torch_cpu_capability"] == "AVX2", job  # unpinned too: no AVX-512
    assert emulated[model, "products"]["numerics"]["mode"] == "portable"
    assert emulated[model, "mkl_on_its_own"]["numerics"]["mkl_cbwr"] == "automatic"


@pytest.mark.parametrize("model", MODELS)
def test_every_product_gives_the_committed_bits(emulated, model):
    ours = emulated[model, "products"]
    assert ours["numerics"]["products"] == FINGERPRINT["products"]["made_on"]["products"]
    committed = FINGERPRINT["products"]["sha256"]
    differ = [name for name in committed if ours["products"][name] != committed[name]]
    assert not differ, f"other bits than committed in {differ} on {model}"
    assert ours["torch_product"] == FINGERPRINT["products"]["torch_product"]["sha256"]


@pytest.mark.parametrize("model", MODELS)
def test_a_short_two_worker_training_gives_the_committed_bits(emulated, model):
    ours = emulated[model, "training"]
    assert (ours["workers"], ours["batch_size"]) == (SHORT["workers"], SHORT["batch_size"])
    assert ours["numerics"]["threads"] == 1
    first_different = next(
        (i + 1 for i, (a, b) in enumerate(zip(ours["losses_float32_hex"],
         SHORT["losses_float32_hex"], strict=True)) if a != b), None,
    )  # fmt: skip
    assert first_different is None, f"the losses differ from step {first_different} on"
    assert ours["weights_sha256"] == SHORT["weights_sha256"]  # Adam's steps 2 and 3 included


@pytest.mark.parametrize("model", MODELS)
def test_the_claims_arms_give_the_committed_bits(emulated, model):
    ours = emulated[model, "claims_arms"]
    assert ours["batch_size"] == ARMS["batch_size"] and ours["step"] == "hand-written"
    assert ours["losses_float32_hex"] == ARMS["losses_float32_hex"]
    assert ours["weights_sha256"] == ARMS["weights_sha256"]


def test_mkl_on_its_own_tells_the_two_cpus_apart(emulated):
    """The negative control: without MKL_CBWR, MKL picks its code path by vendor and
    instruction set, and the same product rounds otherwise on the emulated AMD than on the
    emulated Intel, and otherwise than under the portable pin. So emulation does show what
    differs between CPUs, and an agreement above is the pins' doing."""
    theirs = {model: emulated[model, "mkl_on_its_own"]["torch_product"] for model in MODELS}
    pinned = FINGERPRINT["products"]["torch_product"]["sha256"]
    assert theirs["EPYC-Rome"] != theirs["Haswell"]
    assert pinned not in theirs.values()
