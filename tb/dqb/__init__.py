"""The DQB's bench: payload fields (`fields`), a memory-controller/PC model (`memory`), stimulus (`stimulus`)
and the cocotb tests (`bench`)."""
