"""The DuoPD PNM vector unit (paper §4.2): FP32 element-wise ops, approximations, reductions, online softmax."""
