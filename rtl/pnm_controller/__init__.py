"""The DuoPD PNM controller (paper §4.2): an instruction buffer the host fills and starts, and a fetch/decode/issue
pipeline sending tensor loads/stores to the MMU and compute commands to the array and the vector unit."""
