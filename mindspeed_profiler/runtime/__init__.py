"""The capture lifecycle inside a training process, apart from the profiler object: the captures of
one profiler (captures.py), the order of work at each iteration boundary and stage call
(boundary.py), timeline spans and warnings scoped to one profiler (spans.py), and what the modules
around the profiler may use of it (protocols.py)."""
