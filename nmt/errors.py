"""Errors the user can act on. The CLI prints them as one line and exits non-zero, no traceback."""


class NmtError(Exception):
    """A failure caused by input, files or environment, with a message that says what to do."""

    exit_code = 1


class ConfigError(NmtError):
    """A config file or ``--set`` override is invalid (message names file, key and expectation)."""

    exit_code = 2


class DataError(NmtError):
    """The corpus, an archive or a text input is missing or not what was expected."""


class CheckpointError(NmtError):
    """A run directory or checkpoint is missing, corrupt, untrusted or incompatible."""
