"""DuoPD MMU arbiter: home of its RTL, built under its own issue."""
