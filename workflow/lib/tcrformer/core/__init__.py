"""The pipeline's infrastructure, shared by every chapter and knowing none of them.

config.py       config validation: one-line errors naming the key
shipped.py      the files the workflow ships, found from any working folder
io.py           atomic writers and readers of result files
golden_file.py  the golden file: the explainer's values, tolerance kinds, the bands file
golden.py       the golden check: regenerated values against the golden file, the report
power.py        the golden check's power plan (faults.yaml), read as data
manifest.py     provenance: versions, git state, checksums
benchmarks.py   the run's benchmark files as one table
usage.py        a job's CPU and wall seconds, and the machine's load while it ran
numerics.py     portable numerics: the same bits on any x86-64 CPU with AVX2
cpuid.py        what the CPU says it is, by the cpuid instruction
blas.py         the portable matrix-product kernels (OpenBLAS Haswell)
runner.py       glue for the thin rule scripts: logging, numerics, one-line errors, the
                job's first clock reading
text.py         values as short text, for reports
"""
