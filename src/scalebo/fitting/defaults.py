"""Defaults shared by the fitter, the analyses and the command line (no imports, so that
``scalebo --help`` can show them without loading numpy)."""

#: δ of the Huber loss on natural-log residuals ``log L̂ − log L`` (Hoffmann et al. 2022 use
#: 1e-3): a residual beyond δ (≈ 0.1 % of the loss) counts through its sign only.
DEFAULT_HUBER_DELTA = 1e-3
