"""The base of sectorflow's own errors: entry points print these as one line, no traceback."""


class SectorflowError(Exception):
    """A failure a user can act on; the message names the thing, the value and the way out."""
