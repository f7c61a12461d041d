"""Same numbers before and after a change: analyse every real input with two code versions and compare.

    python tools/same_numbers.py [--base REV] [--other REV] [--reuse] [--only NAME ...] [--max N]

The base side is git revision REV (default HEAD); the other side is another revision, or the working
tree of this checkout when --other is left out. Each revision's code is `git archive REV` unpacked
under WORK/src/<commit> (kept); the working tree is run in place. Every input (INPUTS below; an
absent one is skipped with a note, tarballs are unpacked once under WORK/inputs) is analysed with
each side's code by `python -m mindspeed_profiler.analyse INPUT -o OUT -j 1 --export-type db -q`
(this interpreter, PYTHONPATH = that side's source), into WORK/base/NAME and WORK/other/NAME.

Compared, per input:
    exit     the two analyses' exit statuses
    summary  summary.json as `tools/summary_diff.py A B --ignore-times --inline` compares it
             (created, root, elapsed_s, analyse_s and absolute paths left out)
    db       every analysis.db table, row by row in rowid order, every column except the run-time
             ones (RUNTIME_COLUMNS: analyse_s, elapsed_s, created, root); the same tables and columns
             on both sides; 1 and 1.0 differ, NaN equals NaN
    models   every row model through RunAnalysis: for each model of questions.MODELS (its method where
             it has one), the rows of A's and of B's outputs, both loaded with the other side's code,
             compared as summary_diff --ignore-times compares JSON
One line per input: `equal` or `differs` with its first differences; exit 1 on any difference, 2 on
a usage error (an unknown revision, a stale --reuse baseline named against --base).

--reuse keeps the base side's outputs already in WORK/base (made by an earlier run; WORK/base/COMMIT
says of which commit) and analyses only the other side: the quick way to check the working tree
against a baseline taken before the change. Without a baseline there, the base side is analysed.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
WORK = Path("/tmp/same_numbers")
# analysis.db columns that differ between two analyses of the same data (wall times, when, where)
RUNTIME_COLUMNS = frozenset({"analyse_s", "elapsed_s", "created", "root"})

# (name, source): a directory, or "tar:FILE:SUBDIR" (a tarball under tests/data/ascend, unpacked once)
FIXED_INPUTS: tuple[tuple[str, str], ...] = (
    ("ascend-2rank/text", str(SHARED / "ascend-2rank" / "text")),
    ("ascend-2rank/db", str(SHARED / "ascend-2rank" / "db")),
    ("data/ascend", str(SHARED / "data" / "ascend")),
    ("data/kineto", str(SHARED / "data" / "kineto")),
    ("kineto-torch19", str(SHARED / "kineto-torch19")),
    ("ascend/text_l1", "tar:msinsight_pytorch_levels.tar.gz:text/level1"),
    ("ascend/text_l2", "tar:msinsight_pytorch_levels.tar.gz:text/level2"),
    ("ascend/db_l1", "tar:msinsight_pytorch_levels.tar.gz:db/level1"),
    ("ascend/db_l2", "tar:msinsight_pytorch_levels.tar.gz:db/level2"),
    ("ascend/pp4_l2", "tar:msinsight_st_level2_4rank.tar.gz:level2"),
    ("ascend/msinsight_cluster", str(REPO / "tests" / "data" / "ascend" / "msinsight_cluster")),
    ("ascend/mstt_advisor_cluster", str(REPO / "tests" / "data" / "ascend" / "mstt_advisor_cluster")),
)


def _summary_diff() -> Any:
    """tools/summary_diff.py as a module (tools/ is not a package): its Differ and totals reader."""
    spec = importlib.util.spec_from_file_location("summary_diff", Path(__file__).with_name("summary_diff.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


sd = _summary_diff()


# -- comparing (pure but for reading the two files) ---------------------------------------------

def same_value(a: Any, b: Any) -> bool:
    """SQLite values: equal and of one type (1 and 1.0 differ), NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def _tables(con: sqlite3.Connection) -> dict[str, list[str]]:
    names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
    return {t: [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')] for t in names}


def compare_dbs(a: Path, b: Path, ignore: Iterable[str] = RUNTIME_COLUMNS, limit: int = 10) -> list[str]:
    """Differences between two analysis.db files, table by table and row by row (rowid order), the
    `ignore` columns left out; at most `limit` row differences per table."""
    ignore = set(ignore)
    ca, cb = (sqlite3.connect(f"file:{p}?mode=ro", uri=True) for p in (a, b))
    try:
        ta, tb = _tables(ca), _tables(cb)
        diffs = [f"db: table {t} only in {'A' if t in ta else 'B'}" for t in sorted(ta.keys() ^ tb.keys())]
        for t in sorted(ta.keys() & tb.keys()):
            cols_a = [c for c in ta[t] if c not in ignore]
            cols_b = [c for c in tb[t] if c not in ignore]
            if cols_a != cols_b:
                diffs.append(f"db: {t}: columns {cols_a} != {cols_b}")
                continue
            if not cols_a:
                continue
            sel = f'SELECT {", ".join(chr(34) + c + chr(34) for c in cols_a)} FROM "{t}" ORDER BY rowid'
            ra, rb = ca.execute(sel).fetchall(), cb.execute(sel).fetchall()
            diffs.extend(f"db: {t}: {d}" for d in compare_rows(cols_a, ra, rb, limit))
    finally:
        ca.close()
        cb.close()
    return diffs


def compare_rows(cols: list[str], ra: list[tuple], rb: list[tuple], limit: int = 10) -> list[str]:
    """Row by row: each differing row by its index and first differing column; the counts."""
    out = [] if len(ra) == len(rb) else [f"{len(ra)} rows != {len(rb)} rows"]
    for i, (x, y) in enumerate(zip(ra, rb)):
        bad = [c for c, u, v in zip(cols, x, y) if not same_value(u, v)]
        if bad:
            if len(out) >= limit:
                out.append("... more rows differ")
                break
            j = cols.index(bad[0])
            out.append(f"row {i}: {bad[0]} {sd.short(x[j])} != {sd.short(y[j])}"
                       + (f" (and {len(bad) - 1} more columns)" if len(bad) > 1 else ""))
    return out


def compare_summaries(a: Path, b: Path) -> list[str]:
    """summary.json as `summary_diff.py A B --ignore-times --inline` compares it."""
    d = sd.Differ(ignore_times=True, loose=False)
    d.compare(sd.inline_totals(sd.load(a), a.parent), sd.inline_totals(sd.load(b), b.parent))
    return [f"summary: {x}" for x in d.diffs]


def compare_models(rows_a: dict, rows_b: dict) -> list[str]:
    """Two {model: rows} dicts (dumped by MODEL_DUMP) as JSON, run-time keys and absolute paths left out."""
    d = sd.Differ(ignore_times=True, loose=False)
    d.compare(rows_a, rows_b, "models")
    return d.diffs


def compare_outputs(a: Path, b: Path, limit: int = 10) -> list[str]:
    """summary.json and analysis.db of two output directories (a file on one side only: a difference)."""
    diffs: list[str] = []
    for name, fn in (("summary.json", compare_summaries), ("analysis.db", compare_dbs)):
        pa, pb = a / name, b / name
        if pa.is_file() and pb.is_file():
            diffs.extend(fn(pa, pb))
        elif pa.is_file() != pb.is_file():
            diffs.append(f"{name} only in {'A' if pa.is_file() else 'B'}")
    return diffs


# -- running the two code versions ---------------------------------------------------------------

# run with a side's code (PYTHONPATH): argv = OUT_JSON DIR...; writes {DIR: {model: rows}}
MODEL_DUMP = r"""
import importlib, json, math, sys
from mindspeed_profiler import RunAnalysis
q = importlib.import_module("mindspeed_profiler.analysis.questions")   # the old path: the base revision may predate analysis/models/
res = {}
for d in sys.argv[2:]:
    ra, rows = RunAnalysis(d), {}
    for m in q.MODELS:
        if m.select is None:
            continue
        key = m.method or m.question
        try:
            rows[key] = list(getattr(ra, m.method)() if m.method else ra.rows(m))
        except Exception as err:
            rows[key] = "error: %s: %s" % (type(err).__name__, err)
    res[d] = rows
with open(sys.argv[1], "w") as fh:
    json.dump(res, fh, default=str)
"""


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True, text=True).stdout.strip()


def source_of(rev: str | None, work: Path) -> tuple[Path, str]:
    """(the source directory, its label): a revision unpacked once under work/src, or this working tree."""
    if rev is None:
        return REPO, "working tree"
    commit = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    dest = work / "src" / commit
    if not (dest / "mindspeed_profiler").is_dir():
        tmp = dest.with_name(commit + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
    return dest, f"{rev} ({commit[:10]})"


def python(src: Path, *args: str) -> subprocess.CompletedProcess:
    """This interpreter on `args` with the code in `src`: PYTHONPATH=src, and the working directory a
    temporary one (python -c / -m put it first on sys.path: a checkout there would win over src)."""
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
    with tempfile.TemporaryDirectory(prefix="same_numbers_") as cwd:
        return subprocess.run([sys.executable, *args], env=env, cwd=cwd, capture_output=True, text=True)


def imports_from(src: Path) -> bool:
    """Whether `import mindspeed_profiler` with PYTHONPATH=src takes src's code (not the venv's install)."""
    p = python(src, "-c", "import mindspeed_profiler as m; print(m.__file__)")
    return p.returncode == 0 and Path(p.stdout.strip()).resolve().is_relative_to(src.resolve())


def resolve_inputs(work: Path) -> tuple[list[tuple[str, Path]], list[str]]:
    """The inputs that exist (tarballs unpacked under work/inputs) and notes on those skipped."""
    found, notes = [], []
    hta = REPO / "tests" / "data" / "hta"
    extra = [(f"hta/{p.name}", str(p)) for p in sorted(hta.iterdir()) if p.is_dir()] if hta.is_dir() else []
    for name, src in (*FIXED_INPUTS, *extra):
        if src.startswith("tar:"):
            _, tar_name, sub = src.split(":", 2)
            tar_path = REPO / "tests" / "data" / "ascend" / tar_name
            if not tar_path.is_file():
                notes.append(f"{name}: skipped ({tar_path} absent)")
                continue
            root = work / "inputs" / tar_name.split(".")[0]
            if not root.is_dir():
                tmp = root.with_name(root.name + ".partial")
                shutil.rmtree(tmp, ignore_errors=True)
                tmp.mkdir(parents=True)
                with tarfile.open(tar_path) as tf:
                    tf.extractall(tmp, filter="data")
                tmp.rename(root)
            path = root / sub
        else:
            path = Path(src)
        if path.exists():
            found.append((name, path))
        else:
            notes.append(f"{name}: skipped ({path} absent)")
    return found, notes


def analyse(src: Path, inp: Path, out: Path) -> int:
    """The analysis of `inp` by the code in `src` into `out` (emptied first); its exit status."""
    shutil.rmtree(out, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    p = python(src, "-m", "mindspeed_profiler.analyse", str(inp), "-o", str(out), "-j", "1", "--export-type", "db", "-q")
    (out.parent / f"{out.name}.log").write_text(p.stdout + p.stderr, encoding="utf-8")
    return p.returncode


def dump_models(src: Path, dirs: list[Path], dest: Path) -> dict:
    p = python(src, "-c", MODEL_DUMP, str(dest), *map(str, dirs))
    if p.returncode:
        raise RuntimeError(f"the model dump failed with {src}'s code: {p.stderr.strip()[-2000:]}")
    return json.loads(dest.read_text(encoding="utf-8"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", help="the base revision (default HEAD; with --reuse: the baseline's)")
    ap.add_argument("--other", help="the other revision (default: this working tree)")
    ap.add_argument("--reuse", action="store_true", help="keep the base outputs already in WORK/base")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="only these inputs (names as printed)")
    ap.add_argument("--work", type=Path, default=WORK, help=f"where sources and outputs go (default {WORK})")
    ap.add_argument("--max", type=int, default=8, help="differences printed per input (default 8; 0: all)")
    args = ap.parse_args(argv)
    work, t0 = args.work, time.monotonic()
    stamp = work / "base" / "COMMIT"
    reuse = args.reuse and stamp.is_file()
    try:
        if reuse:
            commit = stamp.read_text().strip()
            if args.base and git("rev-parse", "--verify", f"{args.base}^{{commit}}") != commit:
                print(f"same_numbers: the baseline in {work / 'base'} is of {commit[:10]}, not {args.base}",
                      file=sys.stderr)
                return 2
            base_src, base_label = source_of(commit, work)[0], f"the baseline of {commit[:10]}"
        else:
            base_src, base_label = source_of(args.base or "HEAD", work)
        other_src, other_label = source_of(args.other, work)
        wrong = [str(s) for s in (base_src, other_src) if not imports_from(s)]
        if wrong:
            print(f"same_numbers: PYTHONPATH does not make Python import the code in {', '.join(wrong)}", file=sys.stderr)
            return 2
    except subprocess.CalledProcessError as err:
        print(f"same_numbers: {err.cmd}: {(err.stderr or '').strip()}", file=sys.stderr)
        return 2
    inputs, notes = resolve_inputs(work)
    if args.only:
        inputs = [(n, p) for n, p in inputs if n in args.only]
    print(f"base: {base_label}{' (reused outputs)' if reuse else ''}; other: {other_label}")
    for n in notes:
        print(n)
    if not reuse:
        shutil.rmtree(work / "base", ignore_errors=True)
    (work / "base").mkdir(parents=True, exist_ok=True)
    (work / "other").mkdir(parents=True, exist_ok=True)
    total = 0
    for name, inp in inputs:
        slug = name.replace("/", "__")
        a, b = work / "base" / slug, work / "other" / slug
        rc_file = work / "base" / f"{slug}.rc"
        if reuse and rc_file.is_file():
            rc_a = int(rc_file.read_text())
        else:
            rc_a = analyse(base_src, inp, a)
            rc_file.write_text(str(rc_a))
        rc_b = analyse(other_src, inp, b)
        diffs = [] if rc_a == rc_b else [f"exit {rc_a} != {rc_b}"]
        diffs += compare_outputs(a, b)
        if (a / "summary.json").is_file() and (b / "summary.json").is_file():
            dumped = dump_models(other_src, [a, b], work / "other" / f"{slug}.models.json")
            diffs += compare_models(dumped[str(a)], dumped[str(b)])
        total += bool(diffs)
        shown = diffs[: args.max or None]
        more = f"; ... {len(diffs) - len(shown)} more" if len(diffs) > len(shown) else ""
        print(f"{name}: " + ("equal" if not diffs else f"differs: {'; '.join(shown)}{more}"))
    if not reuse:
        stamp.write_text(git("rev-parse", f"{base_src.name}^{{commit}}") + "\n")
    print(f"{'all equal' if not total else f'{total} of {len(inputs)} inputs differ'}: {len(inputs)} inputs, "
          f"{time.monotonic() - t0:.0f} s")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
