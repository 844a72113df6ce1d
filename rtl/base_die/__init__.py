"""The base die of one pseudo-channel group: the PNM (with its MMU) reading memory through the DQB."""
