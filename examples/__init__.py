"""Runnable example trainers that use mindspeed-profiler end to end."""
