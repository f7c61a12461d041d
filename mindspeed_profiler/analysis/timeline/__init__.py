"""The merged timeline: segments -> one trace (merge, spill, stream), Perfetto's protobuf (pftrace),
system reports on the run's clock (system_align, system_tracks)."""
