"""Golden models: plain numpy/ml_dtypes functions of plain arrays (no cocotb, no simulator state)."""
