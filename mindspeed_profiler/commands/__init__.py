"""Subcommands of the `mindspeed-profiler` console script (see cli.py)."""
