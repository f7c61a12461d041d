"""Layer 1: the on-disk contract and the plumbing every layer shares, standard library only:
formats (every name on disk), fileio (atomic writes, locked run.json, bounded reads), registry,
warn (warn once), yaml_bounded, jsonsafe, capture_options (what a capture records), state (the
process-wide flags the markers read)."""
