"""cocotb bench of the PNM controller."""
