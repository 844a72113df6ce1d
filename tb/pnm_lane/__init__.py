"""cocotb bench of the DuoPD PNM lane and array."""
