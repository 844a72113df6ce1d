"""cocotb bench of the PNM buffer."""
