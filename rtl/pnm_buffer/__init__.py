"""The DuoPD PNM buffer (paper §4.2): banked SRAM shared by the array, the vector unit and the MMU's TSV path."""
