"""StreamDQ dequantization block (DQB): home of its RTL, built under its own issue."""
