"""A cycle-level HBM pseudo-channel DRAM model for the benches (docs/dram.md): parameters (`timing`), address
mapping (`mapping`), the timing core (`channel`, plain Python) and its cocotb wrapper (`controller`)."""
