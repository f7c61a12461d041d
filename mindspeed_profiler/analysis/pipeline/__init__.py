"""Running the analysis: discover what is where, collect (a local pool or Ray), one capture in a
worker, the batch that writes the outputs."""
