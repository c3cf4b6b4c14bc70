"""The golden check's bands, offline: the one tool that makes them, validates them on held-out
seeds and measures their power (config/golden/v4/design.md; never run by a rule).

    python -m tools.golden fit results/<fitting run>/ensemble       # config/golden/v4/
    python -m tools.golden validate results/<held-out run>/ensemble # .../validation.yaml
    python -m tools.golden power results/<power run>/power          # .../power.csv

The runs are the `run:` names of config/golden/ensembles/ (the fitting and the held-out
ensembles, `snakemake ensemble`) and of `snakemake power --config run=...`.
fit writes the bands file (bands.yaml), the fitting seeds' statistics and the fit's report;
validate judges the held-out ensemble once against the committed bands, with the primary
tests each at 2.5 % against a parametric bootstrap of the whole procedure; power judges the
registered faults' runs and predicts each fault's catch probability from the fitted model.
The pipeline computes what is judged (tcrformer.training.judged) and compares it with the
bands file the golden file names (tcrformer.core.golden_file); switching it to new bands is a
change of that file and of golden_file.METHOD_VERSION, made on purpose.

    method.py          the frozen bands: windows by lam-hat on the relative grid and the one
                       multiplier K, the anti-diagonal on logit(a), the misses' bound
    scale.py           the Box-Cox and logit scales, lam by the untruncated likelihood
    laws.py            the generating laws and a multiplier's calibration by exact exceedance
    misses.py          the beta-binomial by maximum likelihood, its calibrated bound
    fit.py             `fit`: the bands file and its report from the fitting ensemble
    validate.py        `validate`: the held-out tests and their bootstrap null
    validation_null.py `validation_null report`: those tests simulated from a known truth
    power.py           `power`: the faults' catches, paired shifts and predicted catches
    shape.py           `shape calibrate`, `shape confirm`: the window multipliers by shape
    records.py         what the tools read and write: statistics, bands, the judge, provenance

The candidates the method was chosen among (the truncated likelihood, the bootstrap-calibrated
and the union-over-lambda bands) and the selection simulation that compared them are regenerated
by tools/golden_v4/windows.py at commit 0569505; v3's fixed-lambda fit by tools/golden.py at
commit 540c0a5. Their outputs stay in config/golden/v4/simulation/ and config/golden/v3/.
"""
