"""Floating-point units shared by the DQB and the PNM lane; see `formats` for the NaN convention."""
