"""Layer 2r, beside the backends: capture planning (schedule), the RL stage names (stages) and the
iteration observers (observers)."""
