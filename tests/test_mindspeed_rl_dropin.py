"""MindSpeed-RL drop-in: a worker written as MindSpeed-RL writes them (mindspeed_rl/workers/
actor_hybrid_worker.py @ Ascend/MindSpeed-RL master: `profiler_start(cfg, cfg.role)` at the end of
init, `profiler_start(cfg, role=<stage>, profiler_iteration=self.prof_iteration)` around each stage,
`profiler_step` after it, `self.prof_iteration += 1`, `profiler_step(self.actor_profiler)` at the end
of the update, `@mstx_timer_decorator` on model methods), with only the import line changed, on a
real torch model, producing the expected captures."""
from __future__ import annotations

import pytest
import torch

from mindspeed_profiler import load_config
from mindspeed_profiler.integrations.mindspeed_rl import get_grpo_profiler, mstx_timer_decorator, profiler_start, profiler_step
from profiler_testutil import capture_dirs, meta_of, rel_names


class TheirProfilerConfig:
    """MindSpeed-RL's ProfilerConfig (mindspeed_rl/config_cls/mindstudio_config.py + BaseConfig.update:
    attribute defaults, `-` -> `_` in keys, unknown keys refused)."""

    def __init__(self, config_dict, role=""):
        self.role = role
        self.profile = False
        self.mstx = False
        self.stage = "all"
        self.profile_save_path = ""
        self.profile_export_type = "text"
        self.profile_level = "level0"
        self.profile_with_memory = False
        self.profile_record_shapes = False
        self.profile_with_cpu = True
        self.profile_with_npu = True
        self.profile_with_module = False
        self.profile_step_start = 1
        self.profile_step_end = 2
        self.profile_analysis = False
        self.profile_ranks = "all"
        for key, value in config_dict.items():
            key = key.replace("-", "_")
            if not hasattr(self, key):
                raise ValueError(f"The key: {key} is missing")
            setattr(self, key, value)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    @mstx_timer_decorator
    def compute_log_prob(self, x):
        return torch.log_softmax(self.lin(x), -1)

    @mstx_timer_decorator
    def update_actor(self, x, opt):
        loss = -self.compute_log_prob(x).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return float(loss.detach())


class ActorWorker:
    """The call pattern of MindSpeed-RL's ActorHybridWorker, verbatim where it touches the profiler."""

    def __init__(self, profiler_config=None):
        self.profiler_config = profiler_config
        self.prof_iteration = 1
        self.model = Model()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.x = torch.randn(8, 16)
        self.actor_profiler = profiler_start(self.profiler_config, getattr(self.profiler_config, "role", None)) \
            if not isinstance(self.profiler_config, dict) else profiler_start(self.profiler_config, "integrated")

    def generate_sequences(self):
        actor_generate_profiler = profiler_start(self.profiler_config, role="actor_generate",
                                                 profiler_iteration=self.prof_iteration)
        with torch.no_grad():
            self.model.compute_log_prob(self.x)
        profiler_step(actor_generate_profiler)

    def compute_image_embeds(self):
        actor_image_embeds_profiler = profiler_start(self.profiler_config, role="actor_image_embeds",
                                                     profiler_iteration=self.prof_iteration)
        with torch.no_grad():
            self.model.lin(self.x)
        profiler_step(actor_image_embeds_profiler)

    def update(self):
        actor_update_profiler = profiler_start(self.profiler_config, role="actor_update",
                                               profiler_iteration=self.prof_iteration)
        loss = self.model.update_actor(self.x, self.opt)
        profiler_step(actor_update_profiler)
        self.prof_iteration += 1
        profiler_step(self.actor_profiler)
        return loss


def train(worker, iters=4):
    losses = []
    for _ in range(iters):
        worker.generate_sequences()
        worker.compute_image_embeds()
        losses.append(worker.update())
    if worker.actor_profiler is not None:
        worker.actor_profiler.stop()   # MindSpeed-RL relies on exit; ours also stops at exit
    return losses


def baseline():
    torch.manual_seed(0)
    return train(ActorWorker(None))


def test_no_config_means_no_profiler_and_the_same_training():
    assert profiler_start(None, "integrated") is None and get_grpo_profiler(None) is None
    profiler_step(None)
    torch.manual_seed(0)
    assert train(ActorWorker(None)) == baseline()


def test_stage_all_window_with_their_config_object(tmp_path):
    cfg = TheirProfilerConfig({"profile": True, "profile-save-path": str(tmp_path), "profile_step_start": 2,
                               "profile_step_end": 4, "mstx": True}, role="integrated")
    torch.manual_seed(0)
    losses = train(ActorWorker(cfg))
    assert losses == baseline()   # profiling does not change training
    assert rel_names(tmp_path) == ["all/integrated_rank0_step2-3"]
    (d,) = capture_dirs(tmp_path)
    assert meta_of(d)["steps"] == [2, 3]


def test_named_stages_one_capture_per_call_including_their_own_stage_names(tmp_path):
    cfg = TheirProfilerConfig({"profile": True, "profile_save_path": str(tmp_path), "profile_step_start": 2,
                               "profile_step_end": 3, "stage": ["actor_update", "actor_image_embeds"]}, role="integrated")
    w = ActorWorker(cfg)
    assert w.actor_profiler is None        # stage != all: the worker-level call selects nothing
    train(w)
    assert rel_names(tmp_path) == ["actor_image_embeds/integrated_rank0_step2-2", "actor_update/integrated_rank0_step2-2"]


def test_a_plain_dict_and_ours_work_too(tmp_path):
    block = {"profile": True, "profile_save_path": str(tmp_path / "d"), "stage": "actor_generate",
             "profile_step_start": 3, "profile_step_end": 4}
    train(ActorWorker(block))
    assert rel_names(tmp_path / "d") == ["actor_generate/integrated_rank0_step3-3"]
    ours = load_config({"integrated": {**block, "profile_save_path": str(tmp_path / "o")}})
    assert profiler_start(ours, role="actor_update", profiler_iteration=3) is None   # not selected
    shot = profiler_start(ours.integrated, role="actor_generate", profiler_iteration=3)
    profiler_step(shot)
    assert rel_names(tmp_path / "o") == ["actor_generate/integrated_rank0_step3-3"]


def test_their_none_semantics(tmp_path, monkeypatch):
    cfg = TheirProfilerConfig({"profile": True, "profile_save_path": str(tmp_path), "profile_ranks": [1]}, role="integrated")
    monkeypatch.setenv("RANK", "0")
    assert get_grpo_profiler(cfg) is None and profiler_start(cfg, "integrated") is None   # rank 0 not selected
    monkeypatch.setenv("RANK", "1")
    assert get_grpo_profiler(cfg, role="actor") is not None
    assert profiler_start(cfg, "other_role") is None                          # stage all: only the config's role
    assert profiler_start(cfg, "integrated", profiler_iteration=5) is None    # outside [1, 2)
    off = TheirProfilerConfig({"profile": False}, role="integrated")
    assert get_grpo_profiler(off) is None and profiler_start(off, "integrated") is None
    with pytest.raises(ValueError, match="missing"):
        TheirProfilerConfig({"not-a-field": 1})
