"""Field names unique per unit across the row models (issue 32): a name means one unit / kind in
every model. The four names below still mean two things; each is to become two names inside the
models, with the old one kept as the output name (analysis.db column, summary.json key, RunAnalysis
field), so the outputs do not change. A fifth such name fails here."""
from __future__ import annotations

from collections import defaultdict

from mindspeed_profiler.analysis.questions import MODELS

# name -> {unit: models}, as they stand (to be renamed: device_index / device, capture_id / rule, ...)
KNOWN = {
    "device": {"id": {"memory_peaks", "memory_sites"},
               "text": {"idle_causes", "memory_record_peaks", "memory_record_ops", "memory_stage_peaks"}},
    "id": {"id": {"captures"}, "text": {"findings"}},
    "metric": {"text": {"stage_rank", "slow_ranks", "tracker_metrics"}, "ratio": {"stragglers"}},
    "stream": {"id": {"idle_causes"}, "text": {"straggler_collectives"}},
}


def test_no_new_field_name_means_two_units():
    units: dict = defaultdict(lambda: defaultdict(set))
    for m in MODELS:
        for f in m.fields:
            units[f.name][f.unit].add(m.question)
    twofold = {n: {u: ms for u, ms in d.items()} for n, d in units.items() if len(d) > 1}
    assert twofold.keys() <= KNOWN.keys(), f"a field name with two units: {sorted(twofold.keys() - KNOWN.keys())}"
    for n, d in twofold.items():
        assert d.keys() <= KNOWN[n].keys(), f"{n}: a third unit"
