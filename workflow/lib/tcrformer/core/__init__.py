"""The pipeline's infrastructure, shared by every chapter and knowing none of them.

config.py    config validation: one-line errors naming the key
io.py        atomic writers and readers of result files
golden.py    tolerance kinds and the golden check
manifest.py  provenance: versions, git state, checksums
numerics.py  portable numerics: the same bits on any x86-64 CPU with AVX2
runner.py    glue for the thin rule scripts: logging, numerics, one-line errors
text.py      values as short text, for reports
"""
