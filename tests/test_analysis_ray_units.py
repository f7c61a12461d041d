"""The pieces of `analyse --ray` that need no cluster (fast): routing, the where-written check, the
shared-storage fingerprint, DIR as a node sees it, the options, and the metadata's `node` key. The
cluster itself: tests/test_analysis_ray.py (slow)."""
from __future__ import annotations

import os
import shutil
import sys
import types

import pytest

from mindspeed_profiler.core import formats
from mindspeed_profiler import load_config
from mindspeed_profiler.analysis.pipeline.discover import Capture, discover
from mindspeed_profiler.analysis.pipeline.ray_batch import (
    Node,
    choose_node,
    fingerprint,
    resolve_dir,
    where_written_warning,
)
from mindspeed_profiler.cli import main
from mindspeed_profiler.runtime.manifest import capture_metadata, ray_node_id

A, B, C = "a" * 56, "b" * 56, "c" * 56


def node(nid: str, host: str) -> Node:
    return Node(nid, "10.0.0.1", 8.0, host=host)


def cap(meta: dict | None) -> Capture:
    return Capture(path="all/x_pt", kind="torch", meta=meta)


def test_a_shared_capture_goes_to_the_node_that_wrote_it_else_its_host_else_the_least_loaded():
    na, nb, nc = node(A, "h1"), node(B, "h2"), node(C, "h2")
    seen = [na, nb, nc]
    load = {A: 10, B: 5, C: 0}
    assert choose_node(cap({"node": {"host": "h1", "ray_node_id": B}}), seen, load) is nb     # its Ray node
    assert choose_node(cap({"node": {"host": "h1", "ray_node_id": "gone"}}), seen, load) is na  # cluster rebuilt: its host
    assert choose_node(cap({"host": "h2"}), seen, load) is nc     # older metadata without `node`: host, least loaded
    assert choose_node(cap(None), seen, load) is nc               # a Kineto file of elsewhere: least loaded
    assert choose_node(cap({"node": "junk", "host": 7}), seen, {A: 0, B: 0, C: 0}) is na   # damaged: ignored, ties by id


def test_the_where_written_check():
    na, nb = node(A, "h1"), node(B, "h2")
    ids = {A, B}
    assert where_written_warning(cap({"node": {"host": "h1", "ray_node_id": A}}), na, ids) is None
    w = where_written_warning(cap({"node": {"host": "h1", "ray_node_id": A}}), nb, ids)
    assert "written on Ray node aaaaaaaa (h1) but analysed on h2 (Ray node bbbbbbbb)" in w
    # a node id of another cluster (restarted since): the host decides
    assert where_written_warning(cap({"node": {"host": "h2", "ray_node_id": C}}), nb, ids) is None
    assert "written on host h3" in where_written_warning(cap({"node": {"host": "h3", "ray_node_id": C}}), nb, ids)
    assert where_written_warning(cap(None), nb, ids) is None


def test_the_fingerprint_tells_a_shared_directory_from_copies(tmp_path, shared_data):
    src = shared_data / "kineto" / "gpu_rank0.json.gz"
    for d in ("n1", "n2"):
        (tmp_path / d / "all" / "actor_rank0_step1-1_h_1_20261130120000000_pt").mkdir(parents=True)
    one, two = (tmp_path / d / "all" / "actor_rank0_step1-1_h_1_20261130120000000_pt" for d in ("n1", "n2"))
    shutil.copy(src, one / "t.pt.trace.json.gz")
    shutil.copy(src, two / "t.pt.trace.json.gz")
    os.utime(two / "t.pt.trace.json.gz", ns=(1, 1))
    (c1,), (c2,) = discover(tmp_path / "n1"), discover(tmp_path / "n2")
    assert c1.path == c2.path
    assert fingerprint(tmp_path / "n1", c1) == fingerprint(tmp_path / "n1", c1)   # the same directory seen twice
    assert fingerprint(tmp_path / "n1", c1) != fingerprint(tmp_path / "n2", c2)   # same path, another file


def test_dir_as_a_node_sees_it(monkeypatch):
    monkeypatch.setenv("MSP_SCRATCH", "/scratch/x")
    assert str(resolve_dir("$MSP_SCRATCH/profiler_data", "/driver")) == "/scratch/x/profiler_data"
    assert str(resolve_dir("./profiler_data", "/driver/cwd")) == "/driver/cwd/profiler_data"
    assert str(resolve_dir("/abs/p", "/driver")) == "/abs/p"


@pytest.mark.parametrize("argv, message", [
    (["--address", "ray://x:10001"], "need --ray"),
    (["--ray-task-cpus", "1"], "need --ray"),
    (["--ray", "--ray-task-cpus", "0"], "--ray-task-cpus must be > 0"),
])
def test_ray_options_are_checked(tmp_path, capsys, argv, message):
    assert main(["analyse", str(tmp_path), *argv]) == 2
    assert message in capsys.readouterr().err


def test_without_ray_installed_ray_is_a_usage_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)   # `import ray` raises ImportError
    assert main(["analyse", str(tmp_path), "--ray", "-q"]) == 2
    assert "--ray needs Ray" in capsys.readouterr().err


def _meta(tmp_path) -> dict:
    cfg = load_config({"integrated": {"profile": True, "profile_save_path": str(tmp_path)}}).integrated
    return capture_metadata(cfg, run_id=None, role="actor", stage=None, rank=0, world_size=1, local_rank=None,
                            first=1, last=1, warmup=0, requested_warmup=0, backend="torch", device="cpu", host="h",
                            notes=[])


def test_the_metadata_names_the_node_it_was_written_on(tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "ray", raising=False)
    assert ray_node_id() is None   # Ray not imported: never imported for this
    assert "ray" not in sys.modules
    assert _meta(tmp_path)["node"] == {"host": "h", "ray_node_id": None}
    fake = types.SimpleNamespace(is_initialized=lambda: False,
                                 get_runtime_context=lambda: types.SimpleNamespace(get_node_id=lambda: A))
    monkeypatch.setitem(sys.modules, "ray", fake)
    assert ray_node_id() is None   # imported, not initialised
    fake.is_initialized = lambda: True
    assert _meta(tmp_path)["node"] == {"host": "h", "ray_node_id": A}
    fake.get_runtime_context = lambda: 1 / 0
    assert ray_node_id() is None   # a broken Ray never breaks a capture
    assert "node" in formats.META_KEYS
