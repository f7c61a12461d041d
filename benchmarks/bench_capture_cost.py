#!/usr/bin/env python3
"""What a capture costs the training thread: captured iteration / uncaptured iteration, per level,
export included, with the export's phases and the process's peak host memory.

The workload is the issue 34 user's, scaled to the machine: a causal transformer LM; one iteration
is `actor_generate` (sampling --gen-tokens tokens for a batch of prompts, no KV cache: every token
is a forward over the sequence so far) then `actor_update` (forward + backward + AdamW on the
batch's sequences). Each mode runs in its own process (a clean peak RSS), iterations 1-4 run uncaptured (2-4: the ratios' base),
--captured iterations after them are captured (one capture), then 3 more run uncaptured; modes are
interleaved over --rounds rounds and the median round is kept.

Modes: `off` (profile: false), level0, level1, `level1+shapes+memory`, `with_stack` (level1 +
stack), each with the export in the background (the default) and, for level1+shapes+memory, inline
with gzip level 9 (what happened before issue 34: the whole export inside the step at torch's
default compression). Then two side measurements on the raw trace of that capture: gzip level 1 /
6 / 9 (seconds, MB) and the training thread's slowdown while a trace is compressed by a thread
against by a child process (which writer is cheaper).

    python benchmarks/bench_capture_cost.py                      # CPU, print the tables
    python benchmarks/bench_capture_cost.py --device cuda        # on a GPU
    python benchmarks/bench_capture_cost.py --write              # also write docs/perf_capture.md
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODES = {
    "off": {"profile": False},
    "level0": {"profile": True, "profile_level": "level0"},
    "level1": {"profile": True, "profile_level": "level1"},
    "level1+shapes+memory": {"profile": True, "profile_level": "level1", "profile_record_shapes": True,
                             "profile_with_memory": True},
    "level1+shapes+memory, inline, gzip 9 (before)": {"profile": True, "profile_level": "level1",
                                                      "profile_record_shapes": True, "profile_with_memory": True,
                                                      "background_export": False, "_gzip": 9},
    "level1+shapes+memory, export_after_run": {"profile": True, "profile_level": "level1",
                                               "profile_record_shapes": True, "profile_with_memory": True,
                                               "export_after_run": True},
    "with_stack": {"profile": True, "profile_level": "level1", "profile_with_stack": True},
    "full (level1+shapes+memory+stack: CPU memory snapshot)": {
        "profile": True, "profile_level": "level1", "profile_record_shapes": True, "profile_with_memory": True,
        "profile_with_stack": True},
    "full, inline, gzip 9 (before)": {"profile": True, "profile_level": "level1", "profile_record_shapes": True,
                                      "profile_with_memory": True, "profile_with_stack": True,
                                      "background_export": False, "_gzip": 9},
}
WARM = 4
AFTER = 3


# ------------------------------------------------------------------------------ the workload

def make_model(device: str, width: int, layers: int, vocab: int, seq: int):
    import torch

    torch.manual_seed(0)

    class LM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(vocab, width)
            self.pos = torch.nn.Embedding(seq, width)
            layer = torch.nn.TransformerEncoderLayer(width, max(1, width // 64), 4 * width, dropout=0.0,
                                                     batch_first=True, norm_first=True)
            self.body = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = torch.nn.Linear(width, vocab)

        def forward(self, ids):
            n = ids.shape[1]
            mask = torch.nn.Transformer.generate_square_subsequent_mask(n, device=ids.device)
            h = self.emb(ids) + self.pos(torch.arange(n, device=ids.device))
            return self.head(self.body(h, mask=mask, is_causal=True))

    model = LM().to(device)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4)


def iteration(prof, model, opt, prompts, gen_tokens: int) -> None:
    import torch

    with prof.stage("actor_generate"), torch.no_grad():
        ids = prompts
        for _ in range(gen_tokens):
            logits = model(ids)[:, -1]
            nxt = torch.multinomial(torch.softmax(logits.float(), -1), 1)
            ids = torch.cat([ids, nxt], 1)
    with prof.stage("actor_update"):
        logits = model(ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), ids[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    if ids.is_cuda:
        torch.cuda.synchronize()


def child(mode: str, args) -> dict:
    """One mode in this process: per-iteration seconds, the capture's metadata, peak RSS."""
    import torch

    from mindspeed_profiler import IntegratedProfiler, load_config
    from mindspeed_profiler.backends import trace_files

    settings = dict(MODES[mode])
    level = settings.pop("_gzip", None)
    if level is not None:
        trace_files.COMPRESS_LEVEL = level
    torch.set_num_threads(args.threads)
    model, opt = make_model(args.device, args.width, args.layers, args.vocab, args.prompt + args.gen_tokens)
    prompts = torch.randint(0, args.vocab, (args.batch, args.prompt), device=args.device)
    save = tempfile.mkdtemp(prefix="bench_capture_")
    first = WARM + 1
    cfg = load_config({"integrated": {**settings, "profile_save_path": save, "profile_step_start": first,
                                      "profile_step_end": first + args.captured}})
    prof = IntegratedProfiler(cfg, role="bench", rank=0, world_size=1)
    prof.start()
    times = []
    for _ in range(WARM + args.captured + AFTER):
        t0 = time.perf_counter()
        iteration(prof, model, opt, prompts, args.gen_tokens)
        prof.step()   # the iteration ends here: a capture's stop and on-thread export are in it
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    prof.stop()   # waits for the background export
    drain = time.perf_counter() - t0
    meta = prof.captures[0] if prof.captures else {}
    raw = None
    if meta.get("directory"):
        traces = [Path(meta["directory"]) / f for f in meta["trace_files"] if ".pt.trace.json" in f]
        raw = str(traces[0]) if traces else None
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"times": times, "phases": meta.get("export_phases") or {}, "status": meta.get("status"),
            "notes": meta.get("notes"), "drain_s": drain, "peak_rss_mb": peak_kb / 1024, "trace": raw,
            "trace_mb": os.path.getsize(raw) / 2**20 if raw else 0.0}


def run_mode(mode: str, args) -> dict:
    cmd = [sys.executable, __file__, "--child", mode, *argv_of(args)]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{mode}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def argv_of(args) -> list[str]:
    return ["--device", args.device, "--threads", str(args.threads), "--width", str(args.width), "--layers",
            str(args.layers), "--vocab", str(args.vocab), "--batch", str(args.batch), "--prompt", str(args.prompt),
            "--gen-tokens", str(args.gen_tokens), "--captured", str(args.captured)]


# ------------------------------------------------------------------------------ side measurements

def compression_table(raw_gz: str) -> list[dict]:
    """gzip levels on the capture's trace (decompressed to its raw JSON first)."""
    with gzip.open(raw_gz, "rb") as fh:
        data = fh.read()
    rows = []
    for level in (1, 6, 9):
        t0 = time.perf_counter()
        out = zlib.compress(data, level)
        rows.append({"level": level, "s": time.perf_counter() - t0, "mb": len(out) / 2**20})
    return [{"raw_mb": len(data) / 2**20, **r} for r in rows]


def writer_table(raw_gz: str, args) -> dict:
    """The training thread's iteration time while the trace is compressed (level 1) beside it: by a
    thread of this process, by a child process, and with nothing beside it."""
    import torch

    torch.set_num_threads(args.threads)
    model, opt = make_model(args.device, args.width, args.layers, args.vocab, args.prompt + args.gen_tokens)
    prompts = torch.randint(0, args.vocab, (args.batch, args.prompt), device=args.device)

    class Null:
        def stage(self, name):
            import contextlib

            return contextlib.nullcontext()
    null = Null()
    with gzip.open(raw_gz, "rb") as fh:
        data = fh.read()
    src = Path(tempfile.mkdtemp()) / "t.json"
    src.write_bytes(data * 4)   # a few iterations' worth of compression, so it overlaps them

    def timed_iterations(n: int = 3) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            iteration(null, model, opt, prompts, args.gen_tokens)
        return (time.perf_counter() - t0) / n

    for _ in range(2):
        iteration(null, model, opt, prompts, args.gen_tokens)
    alone = timed_iterations()
    th = threading.Thread(target=lambda: zlib.compress(src.read_bytes(), 1))
    th.start()
    t_thread = timed_iterations()
    th.join()
    proc = subprocess.Popen([sys.executable, "-c", f"import zlib; zlib.compress(open({str(src)!r}, 'rb').read(), 1)"])
    t_proc = timed_iterations()
    proc.wait()
    return {"alone_s": alone, "thread_s": t_thread, "process_s": t_proc}


# ------------------------------------------------------------------------------ the report

def summarise(mode: str, res: dict) -> dict:
    """Ratios to the same process's uncaptured iterations before the capture (the first is left
    out: allocator and caches warming): a shared box's load drifts between processes, less within one."""
    base = statistics.median(res["times"][1:WARM])
    captured = res["times"][WARM:WARM + len(res["times"]) - WARM - AFTER]
    after = res["times"][-AFTER:]
    return {"mode": mode, "captured_mean_ratio": statistics.mean(captured) / base,
            "captured_worst_ratio": max(captured) / base, "after_ratio": statistics.mean(after) / base, "phases": res["phases"], "drain_s": res["drain_s"],
            "peak_rss_mb": res["peak_rss_mb"], "trace_mb": res["trace_mb"], "status": res["status"], "base_s": base}


def table(rows: list[dict]) -> str:
    base = statistics.median(r["base_s"] for r in rows)
    lines = [f"uncaptured iteration: {base * 1e3:.0f} ms (median over the modes of each process's iterations 2-{WARM}, "
             "the base of that process's ratios)", "",
             "| mode | captured / uncaptured (mean) | worst captured iteration | the 3 iterations after | "
             "on the thread: stop / write / snapshot_take (s) | deferred: compress / snapshot (s) | wait at stop() (s) | "
             "trace MB (gz) | peak RSS MB |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ph = r["phases"]
        lines.append(f"| {r['mode']} | {r['captured_mean_ratio']:.2f}x | {r['captured_worst_ratio']:.2f}x | "
                     f"{r['after_ratio']:.2f}x | {ph.get('stop', 0):.2f} / {ph.get('write', 0):.2f} / "
                     f"{ph.get('snapshot_take', 0):.2f} | {ph.get('compress', 0):.2f} / {ph.get('snapshot', 0):.2f} | "
                     f"{r['drain_s']:.2f} | {r['trace_mb']:.1f} | {r['peak_rss_mb']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=96)
    ap.add_argument("--gen-tokens", type=int, default=16)
    ap.add_argument("--captured", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", help="a ;-separated subset of the modes (off is always run)")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args)))
        return 0
    modes = list(MODES) if not args.modes else ["off"] + [m for m in MODES if m != "off" and m in args.modes.split(";")]
    results: dict[str, list[dict]] = {m: [] for m in modes}
    for r in range(args.rounds):
        for mode in modes[r % len(modes):] + modes[:r % len(modes)]:
            print(f"round {r + 1}/{args.rounds}: {mode}", file=sys.stderr, flush=True)
            results[mode].append(run_mode(mode, args))
    rows = []
    for mode in modes:
        per_round = [summarise(mode, res) for res in results[mode]]
        rows.append(sorted(per_round, key=lambda x: x["captured_mean_ratio"])[len(per_round) // 2])
    traced = [res["trace"] for m in ("level1+shapes+memory", *modes) for res in results.get(m, []) if res["trace"]]
    trace = traced[0]
    comp = compression_table(trace)
    writer = writer_table(trace, args)
    import torch

    env = (f"{platform.machine()}, {args.device}, {args.threads} torch threads, torch {torch.__version__}, Python "
           f"{platform.python_version()}; load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    model = (f"causal transformer LM width {args.width}, {args.layers} layers, vocab {args.vocab}; an iteration = "
             f"actor_generate ({args.gen_tokens} tokens sampled for {args.batch} prompts of {args.prompt}, no KV cache) + "
             f"actor_update (forward + backward + AdamW); {args.captured} iterations captured after {WARM}, "
             f"{args.rounds} rounds, the median round per mode")
    out = [f"Measured by `python benchmarks/bench_capture_cost.py{' --device ' + args.device if args.device != 'cpu' else ''}` "
           f"in one run ({env}); {model}.", "", table(rows), "",
           "Compression of that trace (level1+shapes+memory's raw JSON; zlib, one core):", "",
           "| gzip level | seconds | MB | MB/s of raw JSON |", "|---|---|---|---|"]
    for c in comp:
        out.append(f"| {c['level']} | {c['s']:.3f} | {c['mb']:.2f} (raw {c['raw_mb']:.1f}) | {c['raw_mb'] / c['s']:.0f} |")
    out += ["", "The training thread while four copies of that raw JSON are compressed (gzip 1) beside it: "
            f"alone {writer['alone_s'] * 1e3:.0f} ms per iteration, with a writer thread "
            f"{writer['thread_s'] * 1e3:.0f} ms ({writer['thread_s'] / writer['alone_s']:.2f}x), with a child process "
            f"{writer['process_s'] * 1e3:.0f} ms ({writer['process_s'] / writer['alone_s']:.2f}x; its start included)."]
    text = "\n".join(out)
    print(text)
    print(json.dumps({"rows": rows, "compression": comp, "writer": writer}), file=sys.stderr)
    if args.write:
        from doc_section import write_region   # benchmarks/, this script's directory

        doc = REPO / "docs" / ("perf_capture.md" if args.device == "cpu" else f"perf_capture_{args.device}.md")
        write_region(doc, f"bench_capture_cost.py --device {args.device}", text,
                     f"## The latest `--write` run ({args.device})", "# Capture cost (what a capture costs the training thread)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
