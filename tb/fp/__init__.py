"""The bench of the `rtl.fp` units: stimulus per unit (`vectors`) and the cocotb tests (`bench`)."""
