"""The CUDA path, on a machine without a GPU: the determinism a training on CUDA switches on,
and when; the record of the GPU it ran on (stand-ins for torch.cuda and nvidia-smi); the
report header that names it. bench/gpu_check.sh runs the path itself where a GPU is lent."""

from __future__ import annotations

import subprocess

import pytest
import torch

from tcrformer.chapters.reversal.compute import train_reversal
from tcrformer.core import numerics
from tcrformer.training import loop
from tcrformer.training.recipe import recipe_from_config, with_overrides

from conftest import default_config

NO_GPU = dict.fromkeys(numerics.GPU_FIELDS)


@pytest.fixture
def restored_torch_settings():
    """deterministic_cuda changes process-wide settings: put them back afterwards."""
    saved = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.utils.deterministic.fill_uninitialized_memory,
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
    )
    yield
    torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])
    torch.utils.deterministic.fill_uninitialized_memory = saved[2]
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = saved[3:5]
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[5:]


def test_on_cuda_an_op_without_a_deterministic_kernel_stops_the_run(restored_torch_settings):
    environ = {"CUBLAS_WORKSPACE_CONFIG": ":0:0"}  # a user's, not deterministic: replaced
    numerics.deterministic_cuda(environ)
    assert torch.are_deterministic_algorithms_enabled()
    assert not torch.is_deterministic_algorithms_warn_only_enabled()
    assert not torch.utils.deterministic.fill_uninitialized_memory
    assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
    assert environ == {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}


def test_a_workspace_left_unset_until_cuda_started_is_a_bug(monkeypatch, restored_torch_settings):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(RuntimeError, match="CUBLAS_WORKSPACE_CONFIG must be one of"):
        numerics.deterministic_cuda({})
    numerics.deterministic_cuda({"CUBLAS_WORKSPACE_CONFIG": ":16:8"})  # set in time: fine


class Stop(Exception):
    pass


def test_a_training_on_cuda_is_strict_before_its_model_exists(monkeypatch):
    """train() on a CUDA device switches the strict numerics on before it builds anything."""
    called = []

    def strict():
        called.append("deterministic_cuda")
        raise Stop

    monkeypatch.setattr(loop, "resolve_device", lambda *_: torch.device("cuda"))
    monkeypatch.setattr(loop.numerics, "deterministic_cuda", strict)
    monkeypatch.setattr(loop, "new_run", lambda *_: called.append("new_run"))
    recipe = recipe_from_config(default_config()["reversal"])
    with pytest.raises(Stop):
        loop.train(recipe)
    assert called == ["deterministic_cuda"]


def fake_gpu(monkeypatch, cudnn: int | None = 91002) -> None:
    """torch as a CUDA 12.8 build that sees an H100 and, unless None, cuDNN `cudnn`."""
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: cudnn is not None)
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: cudnn)


def test_the_record_names_the_gpu_the_driver_cuda_and_cudnn(monkeypatch):
    fake_gpu(monkeypatch)
    found = numerics.describe_gpu(torch.device("cuda"), driver=lambda: "570.124.06")
    assert found == {"gpu": "NVIDIA H100 80GB HBM3", "driver": "570.124.06", "cuda": "12.8",
                     "cudnn": 91002}  # fmt: skip


def test_what_cannot_be_found_is_null_not_missing(monkeypatch):
    fake_gpu(monkeypatch, cudnn=None)
    found = numerics.describe_gpu("cuda", driver=lambda: None)
    assert found == {"gpu": "NVIDIA H100 80GB HBM3", "driver": None, "cuda": "12.8", "cudnn": None}
    assert numerics.describe_gpu(torch.device("cpu")) == NO_GPU


def test_the_driver_is_nvidia_smis_and_none_without_it(monkeypatch):
    def smi(command, **_):
        assert command[0] == "nvidia-smi"
        return subprocess.CompletedProcess(command, 0, "570.124.06\n570.124.06\n", "")

    monkeypatch.setattr(numerics.subprocess, "run", smi)
    assert numerics.nvidia_driver() == "570.124.06"  # one line per GPU, one driver

    def missing(command, **_):
        raise FileNotFoundError(command[0])

    monkeypatch.setattr(numerics.subprocess, "run", missing)
    assert numerics.nvidia_driver() is None


def test_a_cpu_trainings_record_has_every_gpu_field_null(tmp_path):
    recipe = with_overrides(recipe_from_config(default_config()["reversal"]), steps=2,
                            batch_size=4, d_model=16, d_ff=32, device="cpu")  # fmt: skip
    out = train_reversal(recipe, tmp_path, {}, workers=1)
    assert out["numerics"]["gpu"] == NO_GPU


def test_the_report_header_names_the_gpu_a_training_ran_on():
    record = {"mode": "portable", "torch_cpu_capability": "AVX2", "mkl_cbwr": "COMPATIBLE,STRICT",
              "threads": 1, "cpu": {"model": "AMD EPYC"}}  # fmt: skip
    assert numerics.one_line({**record, "gpu": NO_GPU}) == numerics.one_line(record)
    gpu = {"gpu": "NVIDIA H100", "driver": "570.124.06", "cuda": "12.8", "cudnn": 91002}
    assert numerics.one_line({**record, "gpu": gpu}).endswith(
        "on AMD EPYC; trained on NVIDIA H100 (driver 570.124.06, CUDA 12.8, cuDNN 91002)"
    )
