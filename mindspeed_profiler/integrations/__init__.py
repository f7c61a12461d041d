"""Glue to the frameworks around the profiler: Megatron (parallel layout) and Ray (actors)."""
