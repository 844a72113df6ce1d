"""cocotb bench of the PNM vector unit and its stimulus."""
