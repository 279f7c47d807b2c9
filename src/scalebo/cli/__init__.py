"""Command-line interface: ``scalebo COMMAND ...`` (see :mod:`scalebo.cli.main`)."""

from scalebo.cli.main import main

__all__ = ["main"]
