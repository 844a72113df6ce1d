"""The command line's error: a bad block name, parameter or value, reported on one line with exit code 2."""


class UsageError(Exception):
    """A bad block name, parameter or value: reported on one line, exit code 2."""
