"""cocotb bench of the PNM top (`pnm`)."""
