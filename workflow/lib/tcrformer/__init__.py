"""tcrformer: the logic behind every number of the Transformer-with-one-TCR explainer.

Importing the package is cheap (no torch); each chapter lives in its own module.
"""

__version__ = "0.2.0"

AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"
"""The 20 standard amino acids, in alphabetical one-letter order."""


def share_library(folder: str) -> None:
    """Put the workflow's own library first on the jobs' PYTHONPATH (the rule scripts run in
    child processes), so a clone runs without installing the package. Imports nothing."""
    import os

    path = [folder, *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(path))
