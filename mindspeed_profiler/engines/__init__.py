"""Inference-engine captures driven by our config (vLLM, vllm-ascend, SGLang): `attach.attach_engine`,
`attach.engine_profiler_args`; docs/rollout.md, "Engine captures". Layer 4, beside the profiler,
so that `IntegratedProfiler.attach_engine` can hand over to it."""
