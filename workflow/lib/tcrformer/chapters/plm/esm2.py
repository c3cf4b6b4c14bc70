"""ESM-2 through fair-esm: load the weights safely, hide one CDR3 residue, read the guess.

Loading. fair-esm's checkpoints are pickles whose config is an `argparse.Namespace`; torch
>= 2.6 unpickles with `weights_only=True` and refuses that class. The loader runs inside
`torch.serialization.safe_globals([argparse.Namespace])`: exactly that class is allowed,
everything else stays refused, and a refused global is reported by name.

Where the weights come from:
- `plm.esm2.checkpoint` set: that local file, through `esm.pretrained.load_model_and_alphabet_local`
  (fair-esm reads `<name>-contact-regression.pt` beside it; the name must start with `esm2`).
- unset: the torch hub cache, `<torch hub dir>/checkpoints/<model>.pt`, where fair-esm's own
  `esm.pretrained.<model>()` keeps them. Missing files are downloaded from fair-esm's URLs
  into that cache first (with torch's progress bar in a terminal or a notebook, none in a
  pipeline job's log), then loaded like a local file. fair-esm's hub loader is not used
  because it unpickles through `torch.hub.load_state_dict_from_url`, whose `weights_only`
  defaults to False. When the download fails (offline) or `plm.esm2.download` is false,
  `Esm2Unavailable` carries the reason.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import socket
import sys
from pathlib import Path

from tcrformer import AMINO_ACIDS
from tcrformer.chapters.plm.guess import Guess, renormalized
from tcrformer.chapters.plm.settings import Chain, Esm2Options
from tcrformer.chapters.plm.weights import regression_path
from tcrformer.core.config import ConfigError
from tcrformer.core.io import ResultFileError

ALLOWED_GLOBALS = (argparse.Namespace,)
"""The only non-tensor class an ESM-2 checkpoint needs: its config (`cfg["model"]`)."""

MODEL_URL = "https://dl.fbaipublicfiles.com/fair-esm/models/{model}.pt"
REGRESSION_URL = "https://dl.fbaipublicfiles.com/fair-esm/regression/{model}-contact-regression.pt"

DOWNLOAD_TIMEOUT_S = 60
"""Seconds a silent connection may stall (a firewall that drops packets) before giving up."""

log = logging.getLogger("tcrformer")


class Esm2Unavailable(RuntimeError):
    """The weights could not be had; str() is the reason, in words."""


def hub_checkpoint(model: str) -> Path:
    """The torch hub cache file fair-esm uses for `model` (honours TORCH_HOME)."""
    import torch

    return Path(torch.hub.get_dir()) / "checkpoints" / f"{model}.pt"


def _check_files(checkpoint: Path, key: str | None) -> None:
    if not checkpoint.is_file():
        if key:
            raise ConfigError(key, str(checkpoint), f"file not found ({checkpoint})")
        raise ResultFileError(f"{checkpoint}: file not found")
    if not checkpoint.stem.startswith("esm2"):
        problem = "file name must start with 'esm2' (fair-esm picks the architecture by name)"
        if key:
            raise ConfigError(key, str(checkpoint), problem)
        raise ResultFileError(f"{checkpoint}: {problem}")
    regression = regression_path(checkpoint)
    if not regression.is_file():
        raise ResultFileError(
            f"{regression}: file not found (fair-esm loads it beside {checkpoint.name})"
        )


def refused_globals(path: Path) -> list[str]:
    """Globals in the pickle at `path` that the safe loader refuses, beyond our allow-list."""
    import torch

    allowed = {f"{cls.__module__}.{cls.__qualname__}" for cls in ALLOWED_GLOBALS}
    try:
        found = torch.serialization.get_unsafe_globals_in_checkpoint(str(path))
    except Exception:  # not a zip checkpoint: nothing can be listed
        return []
    return sorted(set(found) - allowed)


def _load_error(checkpoint: Path, err: Exception) -> ResultFileError:
    for path in (checkpoint, regression_path(checkpoint)):
        refused = refused_globals(path)
        if refused:
            return ResultFileError(
                f"{path}: the safe loader refused the global(s) {', '.join(refused)} "
                "(only argparse.Namespace is allow-listed)"
            )
    return ResultFileError(
        f"{checkpoint}: not a fair-esm ESM-2 checkpoint ({type(err).__name__}: {err})"
    )


def load_local(checkpoint: str | Path, key: str | None = None):
    """(model in eval mode, alphabet) from a fair-esm ESM-2 checkpoint file."""
    import esm
    import torch

    checkpoint = Path(checkpoint)
    _check_files(checkpoint, key)
    try:
        with torch.serialization.safe_globals(list(ALLOWED_GLOBALS)):
            model, alphabet = esm.pretrained.load_model_and_alphabet_local(checkpoint)
    except Exception as err:  # a file that is no checkpoint fails in many different ways
        raise _load_error(checkpoint, err) from None
    return model.eval(), alphabet


def download(model: str, checkpoint: Path) -> None:
    """Fetch the missing weight files of `model` into the hub cache; Esm2Unavailable if not."""
    import torch

    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    for url, path in (
        (MODEL_URL.format(model=model), checkpoint),
        (REGRESSION_URL.format(model=model), regression_path(checkpoint)),
    ):
        if path.is_file():
            continue
        log.info("downloading %s to %s", url, path)
        try:
            with _socket_timeout(DOWNLOAD_TIMEOUT_S):
                torch.hub.download_url_to_file(url, str(path), progress=watched())
        except (OSError, RuntimeError, ValueError) as err:
            raise Esm2Unavailable(
                f"no ESM-2 weights: plm.esm2.checkpoint is not set, {path.name} is not in the "
                f"torch hub cache, and the download failed ({_why(err)}); "
                "see docs/esm2-weights.md"
            ) from None


def watched() -> bool:
    """Whether someone watches a download, and torch's progress bar should show: stderr is a
    terminal, or this is a Jupyter kernel (its stderr, no terminal, shows the bar in the
    notebook). A pipeline job writes its log through its own handler, never the bar; under a
    batch system its stderr is a file, and no bar is drawn there either."""
    if sys.stderr is not None and sys.stderr.isatty():
        return True
    ipython = sys.modules.get("IPython")  # loaded in a notebook's kernel, never by a rule
    shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "kernel", None) is not None


@contextlib.contextmanager
def _socket_timeout(seconds: float):
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(previous)


def _why(err: Exception) -> str:
    """A short reason for a failed download (URLError wraps the socket error)."""
    return f"{type(err).__name__}: {getattr(err, 'reason', err)}"


def load(options: Esm2Options):
    """(model, alphabet, where the weights came from) for the configured ESM-2."""
    if options.checkpoint:
        path = Path(options.checkpoint)
        return (*load_local(path, "plm.esm2.checkpoint"), str(path))
    path = hub_checkpoint(options.model)
    if not (path.is_file() and regression_path(path).is_file()):
        if not options.download:
            raise Esm2Unavailable(
                f"no ESM-2 weights: plm.esm2.checkpoint is not set, {path.name} is not in the "
                "torch hub cache, and plm.esm2.download is false; see docs/esm2-weights.md"
            )
        download(options.model, path)
    return (*load_local(path), str(path))


def masked_tokens(alphabet, chain: Chain, positions: tuple[int, ...]):
    """One tokenized copy of the chain per position, with that CDR3 residue masked."""
    _, _, tokens = alphabet.get_batch_converter()([("tcr", chain.sequence)])
    offset = int(alphabet.prepend_bos)  # +1 for the <cls> token in front
    batch = tokens.repeat(len(positions), 1)
    for row, position in enumerate(positions):
        index = chain.index_of(position) + offset
        if batch[row, index] != alphabet.get_idx(chain.cdr3[position - 1]):
            raise AssertionError(f"token {index} is not CDR3 position {position}")
        batch[row, index] = alphabet.mask_idx
    return batch, offset


def guesses(model, alphabet, chain: Chain, positions: tuple[int, ...], name: str) -> list[Guess]:
    """ESM-2's renormalized guess at each hidden CDR3 position (one forward pass in all)."""
    import torch

    batch, offset = masked_tokens(alphabet, chain, positions)
    amino_acid_tokens = [alphabet.get_idx(aa) for aa in AMINO_ACIDS]
    with torch.no_grad():
        logits = model(batch)["logits"]
    found = []
    for row, position in enumerate(positions):
        scores = logits[row, chain.index_of(position) + offset, amino_acid_tokens]
        found.append(
            Guess(name, position, chain.cdr3[position - 1], renormalized(scores.double().tolist()))
        )
    return found


def parameter_count(model) -> int:
    return sum(p.numel() for p in model.parameters())
