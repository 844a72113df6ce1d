"""DuoPD processing-near-memory SIMD lane and compute array: home of its RTL, built under its own issue."""
