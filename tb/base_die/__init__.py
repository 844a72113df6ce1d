"""cocotb bench of the base die (`rtl.base_die`): the PNM's decode layer on quantized checkpoints behind the DQB."""
