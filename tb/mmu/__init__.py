"""cocotb bench of the DuoPD MMU arbiter (`rtl.mmu`)."""
