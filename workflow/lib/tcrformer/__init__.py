"""tcrformer: the logic behind every number of the Transformer-with-one-TCR explainer.

Importing the package is cheap (no torch); each chapter lives in its own module.
"""

__version__ = "0.1.0"

AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"
"""The 20 standard amino acids, in alphabetical one-letter order."""
