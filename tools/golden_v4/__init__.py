"""Golden check v4, offline: the method's simulation, chosen and frozen before the v4
fitting seeds are read (config/golden/v4/design.md, "Review and answers").

    windows   the loss windows and the anti-diagonal: candidate bounds (C), (B), (U) and
              the simulation that picks one
    misses    the misses' beta-binomial bound: maximum likelihood, calibrated
    shape     the loss windows' one multiplier under Cu, calibrated over the shape that their
              law depends on, and confirmed
    validate  the held-out seeds' tests, their null a parametric bootstrap of the procedure
    validation_null
              those tests simulated from a known truth: their false rejections and power
"""
