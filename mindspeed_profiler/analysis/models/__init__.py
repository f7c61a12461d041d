"""The row models: one typed model per question (rows, questions), the summary-level fields, the
finding-rule registry, the shape of a summary read back, and the display helpers that read rows
through the models."""
