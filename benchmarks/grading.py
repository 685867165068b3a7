"""Grading seconds per submission and where they go, per assignment (a part of `make bench`); a
class-scale run for sizing a grading machine; the Gradescope autograder against `make grade`.

    python benchmarks/grading.py [NN ...]                 # default: every assignment of solutions/
    python benchmarks/grading.py --class N [NN ...]       # N submissions of each assignment, --jobs 1 and 2
    python benchmarks/grading.py --gradescope [NN ...]    # run_autograder's seconds against make grade's, its memory

**One solution per assignment** (the default). Its solution notebook is graded as one submission by
the real grading command (`autograder.grade`: sandbox, judge, limits), one submission at a time
(`--jobs 1`) so that the figure is one submission's own time, after a first submission of the same
assignment has warmed the machine's file cache and built the stubbed library. The per-stage
breakdown is the grading row's own (`autograder.grade.stage_seconds`): copying in; nbgrader's and
the kernel's start up to the first cell; the cells less the judge; the judge's calls; nbgrader's
finish after the last cell; reading back. Hidden cases are made before the clock starts.

**A class** (`--class N`). Each assignment gets a course folder of N submissions: a share
(`--wrong`, default 0.2) are wrong, alternately the release notebook (nothing written) and the
solution with its first graded function left as the release's stub; the rest are the solution.
Each folder is graded by `autograder.grade.grade` at each of `--jobs` (default 1 and 2), the whole
command timed (preparing the course included), and printed: submissions per hour, seconds per
submission (the command's wall time over N) and the mean of the rows' own seconds, and the
grader's peak memory: the largest sum, sampled every 0.1 s, of the proportional set size (PSS: a
page shared by k processes counts 1/k in each, so shared libraries count once) of this process and
every process below it (nbgrader, the kernels, the judge's runners), read from
/proc/<pid>/smaps_rollup; a peak shorter than 0.1 s can be missed. Every solution must earn full
marks and every wrong submission less, or the figures are not printed as valid.

**Gradescope** (`--gradescope`). The assignment's autograder zip (`autograder.gradescope`) is
unpacked as Gradescope unpacks it and its run_autograder run on the solution (`--repeat` times,
default 3, after one run that builds its caches, as setup.sh does on Gradescope), against the
grading command on one submission (`python -m autograder.grade NN --jobs 1`, the same number of
times): each a fresh process, as each Gradescope submission is. Gradescope's own machines cannot be
measured here; these are this machine's seconds for the same work. Each run_autograder run also
gives its CPU seconds and its peak memory: the PSS sum over run_autograder's whole process tree
(the grader, nbgrader, the kernel, the judge's processes), sampled every 0.1 s, split by command at
the peak. `--container 768M,0.5` (root only) runs each timed run_autograder capped as Gradescope's
default container is, 768 MB and half a CPU (a memory cgroup and a CPU quota), and adds the
cgroup's own peak (page cache included) and its OOM kills.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def solutions(assignments: list[str] | None) -> list[str]:
    return assignments or sorted(p.name for p in (REPO / "solutions").glob("[0-9][0-9]"))


def notebook_of(folder: str, assignment: str) -> Path:
    return next((REPO / folder / assignment).glob("*.ipynb"))


def grade_solution(assignment: str, course: Path) -> dict:
    from autograder.grade import grade

    shutil.rmtree(course, ignore_errors=True)
    shutil.copytree(REPO / "solutions" / assignment, course / "submitted" / "solution" / assignment)
    t0 = time.perf_counter()
    row = grade(assignment, course, jobs=1)[0]
    row["command_seconds"] = round(time.perf_counter() - t0, 1)  # the whole command: + preparing the course
    return row


def make_cases(assignment: str) -> None:
    from autograder.assignments import hidden_calls
    from autograder.cases import ensure_cases

    for suite in hidden_calls(REPO / "solutions" / assignment):
        ensure_cases(suite)


def measure(assignments: list[str] | None = None) -> dict:
    out = {}
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        for a in solutions(assignments):
            make_cases(a)
            grade_solution(a, Path(tmp) / "warm")  # file cache, stubs, the sandbox's autograder copy
            row = grade_solution(a, Path(tmp) / a)
            out[a] = {"seconds": row["seconds"], "command_seconds": row["command_seconds"], "status": row["status"],
                      "score": row["score"], "max_score": row["max_score"], "stages": row.get("stages", {})}
            print(f"[bench] grading {a}: {row['seconds']} s {json.dumps(row.get('stages', {}))}", flush=True)
    return out


# ---------------------------------------------------------------- a class
class PeakMemory:
    """The largest PSS sum of process `pid` (default: this one) and its descendants, sampled every
    `every` seconds; `at_peak` splits that sample by what each process runs (its command line's
    first words: "python -m autograder.grade", "bwrap", ...)."""

    def __init__(self, every: float = 0.1, pid: int | None = None):
        self.every, self.pid, self.peak, self._stop = every, pid or os.getpid(), 0, threading.Event()
        self.at_peak: dict[str, int] = {}
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def sample(self) -> dict[str, int]:
        """PSS bytes now, by command (see the class docstring)."""
        from autograder.limits import _descendants

        out: dict[str, int] = {}
        for pid in _descendants({self.pid}):
            try:
                pss = next(int(line.split()[1]) * 1024 for line in
                           Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines() if line.startswith("Pss:"))
                words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except (OSError, ValueError, StopIteration):
                continue
            name = " ".join(Path(words[0].decode(errors="replace")).name if i == 0 else w.decode(errors="replace")
                            for i, w in enumerate(words[:3]) if w)
            out[name] = out.get(name, 0) + pss
        return out

    def pss_bytes(self) -> int:
        return sum(self.sample().values())

    def _record(self):
        now = self.sample()
        if sum(now.values()) > self.peak:
            self.peak, self.at_peak = sum(now.values()), now

    def _watch(self):
        while not self._stop.wait(self.every):
            self._record()

    def __enter__(self):
        self._record()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def wrong_notebook(assignment: str, kind: int) -> nbformat.NotebookNode:
    """The release notebook (kind 0), or the solution with its first graded function left as the
    release's stub (kind 1)."""
    release = nbformat.read(notebook_of("notebooks", assignment), as_version=4)
    if kind == 0:
        return release
    nb = nbformat.read(notebook_of("solutions", assignment), as_version=4)
    stubs = {c.metadata["nbgrader"]["grade_id"]: c.source for c in release.cells
             if c.metadata.get("nbgrader", {}).get("solution")}
    first = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    first.source = stubs[first.metadata["nbgrader"]["grade_id"]]
    return nb


def class_folder(assignment: str, course: Path, *, n: int, wrong_share: float) -> set[str]:
    """COURSE/submitted/<student>/NN for `n` students; returns the ids of the wrong ones."""
    n_wrong = math.ceil(n * wrong_share) if n > 1 else 0
    solution = nbformat.read(notebook_of("solutions", assignment), as_version=4)
    name = notebook_of("solutions", assignment).name
    wrong = set()
    for i in range(n):
        student = f"s{i:03d}"
        folder = course / "submitted" / student / assignment
        folder.mkdir(parents=True)
        if i < n_wrong:
            wrong.add(student)
        nbformat.write(wrong_notebook(assignment, i % 2) if i < n_wrong else solution, folder / name)
    return wrong


def grade_class(assignment: str, n: int, *, jobs: int, wrong_share: float) -> dict:
    from autograder.grade import grade

    with tempfile.TemporaryDirectory(prefix="bench-class-") as tmp:
        wrong = class_folder(assignment, Path(tmp), n=n, wrong_share=wrong_share)
        with PeakMemory() as memory:
            t0 = time.perf_counter()
            rows = grade(assignment, Path(tmp), jobs=jobs)
            wall = time.perf_counter() - t0
    valid = all((r["score"] < r["max_score"]) if r["student"] in wrong else
                (r["status"] == "ok" and r["score"] == r["max_score"]) for r in rows)
    return {"assignment": assignment, "jobs": jobs, "submissions": n, "wrong": len(wrong),
            "wall_seconds": round(wall, 1),
            "row_seconds_mean": round(statistics.mean(r.get("seconds", 0.0) for r in rows), 1),
            "peak_pss_gib": round(memory.peak / 2**30, 2), "valid": valid,
            "statuses": sorted({r["status"] for r in rows})}


def measure_class(assignments: list[str] | None, n: int, *, jobs: list[int], wrong_share: float) -> dict:
    out = {"runs": [], "load_average_before": os.getloadavg()}
    for a in solutions(assignments):
        make_cases(a)
        with tempfile.TemporaryDirectory(prefix="bench-warm-") as warm:
            grade_solution(a, Path(warm))  # stubs, caches, file cache
        for j in jobs:
            run = grade_class(a, n, jobs=j, wrong_share=wrong_share)
            out["runs"].append(run)
            print(f"[bench] class {a} jobs {j}: {json.dumps(run)}", flush=True)
    for j in jobs:
        runs = [r for r in out["runs"] if r["jobs"] == j]
        submissions, wall = sum(r["submissions"] for r in runs), sum(r["wall_seconds"] for r in runs)
        per_hour = submissions / wall * 3600
        out[f"jobs_{j}"] = {"submissions": submissions, "wall_seconds": round(wall, 1),
                            "submissions_per_hour": round(per_hour),
                            "seconds_per_submission": round(wall / submissions, 2),
                            "peak_pss_gib": max(r["peak_pss_gib"] for r in runs),
                            "valid": all(r["valid"] for r in runs),
                            "hours_for_200_x_15_at_this_rate": round(200 * 15 / per_hour, 1)}
    out["load_average_after"] = os.getloadavg()
    return out


# ---------------------------------------------------------------- Gradescope against make grade
def gradescope_root(place: Path, source: Path, *, name: str, assignment: str) -> Path:
    """A Gradescope root for one run: the unpacked zip (a link), run_autograder, the solution as the upload."""
    root = place / name
    (root / "submission").mkdir(parents=True)
    (root / "source").symlink_to(source)
    shutil.copy(source / "run_autograder", root / "run_autograder")
    shutil.copy(notebook_of("solutions", assignment), root / "submission" / "upload.ipynb")
    return root


def timed(cmd: list[str], env: dict, cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


class Container:
    """A cap on memory and CPU like a Gradescope container's, for the processes that join it: a
    memory cgroup (`autograder.limits.Cgroup`) and a CPU quota (cgroup v2's cpu.max in the same
    cgroup, or v1's cpu hierarchy: cfs_quota_us over cfs_period_us); SystemExit where there is no memory cgroup."""

    PERIOD_US = 100_000
    _made = itertools.count()

    def __init__(self, memory_bytes: int, cpus: float):
        from autograder.limits import CGROUP_ROOT, Cgroup

        name = f"course-bench-container-{os.getpid()}-{next(Container._made)}"
        self.memory = Cgroup.make("memory", name)
        if self.memory is None:
            raise SystemExit("--container: no memory cgroup can be made here")
        self.memory.limit(memory_bytes)
        quota = f"{round(cpus * self.PERIOD_US)} {self.PERIOD_US}"
        if self.memory.version == 2:
            (self.memory.path.parent / "cgroup.subtree_control").write_text("+cpu")
            (self.memory.path / "cpu.max").write_text(quota)
            self.cpu = None
        else:
            self.cpu = CGROUP_ROOT / "cpu" / name
            self.cpu.mkdir()
            (self.cpu / "cpu.cfs_period_us").write_text(str(self.PERIOD_US))
            (self.cpu / "cpu.cfs_quota_us").write_text(str(round(cpus * self.PERIOD_US)))

    def join(self) -> None:
        """A preexec_fn: the calling process joins the container."""
        self.memory.join()
        if self.cpu is not None:
            (self.cpu / "cgroup.procs").write_text(str(os.getpid()))

    def peak_bytes(self) -> int | None:
        """The largest memory the cgroup was charged (page cache included), where the kernel keeps it."""
        for name in ("memory.peak", "memory.max_usage_in_bytes"):
            try:
                return int((self.memory.path / name).read_text())
            except (OSError, ValueError):
                continue
        return None

    def close(self) -> dict:
        facts = {"container_peak_gib": round((self.peak_bytes() or 0) / 2**30, 2), "oom_kills": self.memory.hits()}
        self.memory.close()
        if self.cpu is not None:
            self.cpu.rmdir()  # its processes are the memory cgroup's, killed by its close
        return facts


def measured(cmd: list[str], env: dict, cwd: Path, container: tuple[int, float] | None = None) -> dict:
    """One run of `cmd`: its seconds, CPU seconds (user + system of its processes, as the kernel
    counts them for this process's waited-for children), peak PSS over its process tree (sampled
    every 0.1 s) and, inside a `container` (bytes, CPUs), the cgroup's own peak and its OOM kills."""
    box = Container(*container) if container else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=box.join if box else None)
    with PeakMemory(pid=proc.pid) as memory:
        proc.wait()
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} exited {proc.returncode}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    at_peak = {name: round(b / 2**30, 3) for name, b in sorted(memory.at_peak.items(), key=lambda kv: -kv[1])}
    return {"seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1), "peak_pss_gib": round(memory.peak / 2**30, 2),
            "at_peak_gib": at_peak, **(box.close() if box else {})}


def measure_gradescope(assignments: list[str] | None, repeat: int, container: tuple[int, float] | None = None) -> dict:
    from autograder.gradescope import build

    out = {"load_average_before": os.getloadavg(), "container": container}
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOGRADER_")}
    for a in solutions(assignments):
        make_cases(a)
        with tempfile.TemporaryDirectory(prefix="bench-gradescope-") as tmp:
            place = Path(tmp)
            place.chmod(0o755)
            source = place / "source"
            subprocess.run(["unzip", "-q", str(build(a, place / "zip")), "-d", str(source)], check=True)
            gs, mg, results = [], [], []
            for i in range(repeat + 1):  # the first run of each builds its caches (setup.sh does, on Gradescope)
                root = gradescope_root(place, source, name=f"r{i}", assignment=a)
                gs.append(measured([str(root / "run_autograder")], {**env, "AUTOGRADER_ROOT": str(root),
                                                                    "AUTOGRADER_PYTHON": sys.executable}, root,
                                   container=container if i else None))
                results.append(json.loads((root / "results" / "results.json").read_text()))
                course = place / f"c{i}"
                shutil.copytree(REPO / "solutions" / a, course / "submitted" / "solution" / a)
                mg.append(timed([sys.executable, "-m", "autograder.grade", a, "--course", str(course), "--jobs", "1"],
                                env, REPO))
            out[a] = {"run_autograder": gs[1:], "make_grade_seconds": [round(s, 1) for s in mg[1:]],
                      "run_autograder_mean": round(statistics.mean(g["seconds"] for g in gs[1:]), 1),
                      "make_grade_mean": round(statistics.mean(mg[1:]), 1),
                      "peak_pss_gib": max(g["peak_pss_gib"] for g in gs[1:]),
                      "scores": [r["score"] for r in results[1:]],
                      "statuses": [next((t["status"] for t in r.get("tests", []) if t["name"] == "Submission"), None)
                                   for r in results[1:]]}
            print(f"[bench] gradescope {a}: {json.dumps(out[a])}", flush=True)
    out["load_average_after"] = os.getloadavg()
    return out


def container_of(text: str) -> tuple[int, float]:
    """--container's MEMORY,CPUS (768M,0.5 or 2G,1) as (bytes, CPUs)."""
    memory, cpus = text.split(",")
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    return int(float(memory[:-1]) * units[memory[-1].upper()]), float(cpus)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignments", nargs="*", help="e.g. 01 07 (default: every assignment)")
    parser.add_argument("--class", dest="class_size", type=int, default=None, help="N submissions of each assignment")
    parser.add_argument("--jobs", default="1,2", help="with --class: submissions graded at once, e.g. 1,2")
    parser.add_argument("--wrong", type=float, default=0.2, help="with --class: the share of wrong submissions")
    parser.add_argument("--gradescope", action="store_true", help="run_autograder against make grade, per submission")
    parser.add_argument("--repeat", type=int, default=3, help="with --gradescope: timed runs of each")
    parser.add_argument("--container", type=container_of, default=None, metavar="MEMORY,CPUS",
                        help="with --gradescope: each timed run_autograder capped like a container, e.g. 768M,0.5 "
                             "(Gradescope's default)")
    args = parser.parse_args(argv)
    if args.class_size:
        result = measure_class(args.assignments or None, args.class_size,
                               jobs=[int(j) for j in args.jobs.split(",")], wrong_share=args.wrong)
    elif args.gradescope:
        result = measure_gradescope(args.assignments or None, args.repeat, args.container)
    else:
        result = measure(args.assignments or None)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
