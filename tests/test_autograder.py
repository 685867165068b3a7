"""The grader's pieces, each on its own: the comparison and its tolerances, the reports, the judge
server's bounds, the sandbox's view, the limits, the link-proof copies, the module layout; then
the grading command on every assignment of solutions/ (solutions full marks, the untouched
release 0) and on a small synthetic assignment. The attacks are tests/test_exploits.py.
"""

from __future__ import annotations

import ast
import json
import math
import os
import shutil
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import nbformat
import pytest
import torch

from autograder.compare import Expected, NearTie, compare, expected_tree, margin, verdict
from autograder.report import format_report, redact
from tests.helpers import REPO, fn_from, slot_leftovers

ROOT = Path(__file__).resolve().parents[1]
GRADING_LIMIT_S = float(os.environ.get("COURSE_NOTEBOOK_LIMIT_S", "240"))  # generous: shared CI cores
ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").glob("[0-9][0-9]") if any(p.glob("*.ipynb")))
SETTINGS = {}  # a suite's settings (`suite_settings`): none changes a comparison


def expect(native, truth=None, variants=(), eps=torch.finfo(torch.float32).eps):
    return expected_tree(native, native if truth is None else truth, list(variants), eps)


# ---------------------------------------------------------------- the comparison
def test_expected_values_are_the_float64_truth_with_a_tolerance_from_the_cases_own_rounding():
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64) / 3  # not exact in float32
    native = x.float()
    exp = expect({"y": native}, {"y": x})
    leaf = exp["y"]
    assert leaf.truth.dtype == torch.float64 and leaf.dtype == torch.float32
    rounding = float((native.double() - x).abs().max())
    assert math.isclose(leaf.atol, 16 * (rounding + torch.finfo(torch.float32).eps * float(x.abs().max())))
    assert compare({"y": native}, exp, SETTINGS) == []  # the reference's own float32 passes
    assert compare({"y": x.float()}, exp, SETTINGS) == []
    assert compare({"y": (x + 1e-3).float()}, exp, SETTINGS)[0]["what"] == "value"
    assert compare({"y": x}, exp, SETTINGS)[0]["what"] == "dtype"  # float64 where the reference gives float32


def test_a_float64_case_is_compared_at_float64_tolerances():
    x = torch.randn(50, dtype=torch.float64)
    exp = expected_tree(x, x, [], torch.finfo(torch.float64).eps)
    assert exp.atol < 1e-13 and compare(x + 1e-12, exp, SETTINGS)
    assert compare(x + 1e-16 * x.abs(), exp, SETTINGS) == []


def test_a_variant_that_batches_differently_widens_the_tolerance_to_its_spread():
    x = torch.randn(20, dtype=torch.float64)
    other = x + 1e-10
    exp = expected_tree(x, x, [other], torch.finfo(torch.float64).eps)
    assert compare(other, exp, SETTINGS) == [] and compare(x + 1e-7, exp, SETTINGS)


def test_a_near_tie_is_refused_so_the_case_is_redrawn():
    with pytest.raises(NearTie):  # a clip decision that flips between float32 and float64
        expect(torch.tensor([True, False]), torch.tensor([True, True]))
    with pytest.raises(NearTie):  # the reference's rounding is not small on this draw
        expect(torch.tensor([1.0, 0.5]), torch.tensor([1.0, 0.0], dtype=torch.float64))


def test_nan_inf_shapes_keys_and_exact_values():
    e = torch.tensor([float("nan"), 1.0, float("inf")])
    exp = expect(e)
    assert compare(e.clone(), exp, SETTINGS) == []
    assert compare(torch.tensor([0.0, 1.0, float("inf")]), exp, SETTINGS)[0]["what"] == "nan"
    assert compare(torch.zeros(3, 1), expect(torch.zeros(1, 3)), SETTINGS)[0]["what"] == "shape"
    assert compare({}, expect({"loss": 1.0}), SETTINGS)[0]["what"] == "missing keys:loss"
    assert compare({"loss": 1.0, "x": 2}, expect({"loss": 1.0}), SETTINGS)[0]["what"] == "extra keys"
    assert compare(torch.tensor([1, 2]), expect(torch.tensor([1, 3])), SETTINGS)[0]["what"] == "exact"
    assert compare("1,080", expect("1080"), SETTINGS)[0]["what"] == "exact"
    assert compare(True, expect(1.0), SETTINGS)[0]["what"] == "kind"


def test_verdicts_tell_rounding_from_a_wrong_value():
    """Within ROUNDING_SCALE (4) tolerances a failure is at rounding scale; beyond, far: a wrong
    masked_whiten 52 tolerances off (error 4.5e-4 where the tolerance was 8.6e-6) is far."""
    from autograder.compare import ROUNDING_SCALE

    x = torch.linspace(0.1, 1.0, 10)
    exp = expect(x, x.double())
    allowed = exp.atol + exp.rtol * exp.truth.abs()
    assert verdict(compare(x, exp, SETTINGS)) == "pass" and margin(x, exp) < 1
    assert verdict(compare((exp.truth + 3.5 * allowed).float(), exp, SETTINGS)) == "rounding"
    assert verdict(compare((exp.truth + 4.5 * allowed).float(), exp, SETTINGS)) == "far"
    assert verdict(compare((exp.truth + 52 * allowed).float(), exp, SETTINGS)) == "far"
    assert verdict(compare(x + 0.1, exp, SETTINGS)) == "far"
    assert verdict(compare(x[:3], exp, SETTINGS)) == "wrong"
    problem = {"where": "'y'", "what": "value", "error": 4.5e-4, "tolerance": 8.6e-6}
    assert verdict([problem]) == "far" and ROUNDING_SCALE < 4.5e-4 / 8.6e-6
    text = format_report({"name": "masked_whiten", "kind": "practice", "passed": False, "problem": None,
                          "cases": [{"case": "c", "ok": False, "verdict": "far", "error": None, "problems": [problem]}]})
    assert "far from the truth" in text and "rounding" not in text


# ---------------------------------------------------------------- what a kernel may read
def test_a_hidden_report_reveals_no_number_no_expected_value_and_no_text_of_the_students():
    x = torch.tensor([0.123456, 7.5])
    exp = expect({"y": x, "s": "1080"}, {"y": x.double(), "s": "1080"})
    problems = compare({"y": x + 0.25, "s": "1,080", "planted key 31337": 1}, exp, SETTINGS)
    report = {"name": "f", "kind": "hidden", "passed": False, "problem": None,
              "cases": [{"case": "c1", "ok": False, "verdict": verdict(problems), "error": None, "problems": problems,
                         "margin": 3.3},
                        {"case": "c2", "ok": False, "verdict": "error", "error": "raised ValueError", "problems": []}]}
    text = format_report(redact(report))
    assert "FAIL c1" in text and "'y' is far from the truth" in text and "raised ValueError" in text
    for secret in ("0.25", "0.123", "7.5", "1080", "31337", "3.3"):
        assert secret not in text and secret not in json.dumps(redact(report)), secret
    practice = format_report({**report, "kind": "practice"})
    assert "largest error 0.25 where the tolerance is" in practice  # public cases show the numbers


def test_recognition_names_what_matches_every_case_of_a_signature_and_nothing_else():
    """A mistake is named when a failing function matches it on every case of its signature (within
    the tolerance of the mistake's own rounding, or by its error code); never for the release's stub;
    'the math is right' when only error cases fail. What a kernel reads of it is the catalogue's
    words and case names."""
    from autograder.recognition import errors_not_raised, recognise, unfinished

    wrong = torch.tensor([0.5, 2.0])
    signatures = {"halved": {"sentence": "halves it", "signature": {"c1": {"expected": expect(wrong, wrong.double())},
                                                                     "c2": {"error": "raised TypeError"}},
                             "returned": ["c1", "c3"]},
                  "empty": {"sentence": "passes this draw", "signature": {}}}
    same = {"c1": {"outputs": wrong.double().float() + 1e-8}, "c2": {"error": "raised TypeError"},
            "c3": {"outputs": torch.ones(2)}}
    assert [m["name"] for m in recognise(same, signatures, SETTINGS, passed=["c3"])] == ["halved"]
    assert recognise({**same, "c1": {"outputs": wrong + 0.1}}, signatures, SETTINGS, passed=["c3"]) == []
    assert recognise({**same, "c2": {"error": "raised ValueError"}}, signatures, SETTINGS, passed=["c3"]) == []
    # an error is the mistake's own only where the function behaves as the mistake wherever it returns
    assert recognise({**same, "c3": {"error": "raised TypeError"}}, signatures, SETTINGS) == []
    assert recognise(same, signatures, SETTINGS, passed=[]) == []  # it fails c3, which the mistake passes
    stub = {c: {"error": "raised NotImplementedError"} for c in ("c1", "c2")}
    assert recognise(stub, {"stubbed": {"sentence": "", "signature": {c: dict(v) for c, v in stub.items()}}}, SETTINGS) == []
    assert unfinished(stub) and not unfinished(same)
    # on an error case a suite records the stub's NotImplementedError as "another exception", as it
    # records a mistake's KeyError: the stub is still no KeyError mistake
    keyerror = {"sentence": "", "signature": {"c2": {"expected": expect({"raises": "other"}, {"raises": "other"})}}}
    stub_with_error_case = {"c1": {"error": "raised NotImplementedError"}, "c2": {"outputs": {"raises": "other"}}}
    assert unfinished(stub_with_error_case, error_cases=["c2"]) and not unfinished(stub_with_error_case)
    assert recognise(stub_with_error_case, {"keyerror": keyerror}, SETTINGS, error_cases=["c2"]) == []
    assert [m["name"] for m in recognise(stub_with_error_case, {"keyerror": keyerror}, SETTINGS)] == ["keyerror"]
    cases = [{"name": "math", "error_case": False}, {"name": "error_beta_0", "error_case": True}]
    entries = [{"case": "math", "ok": True}, {"case": "error_beta_0", "ok": False}]
    assert errors_not_raised(entries, cases) == ["error_beta_0"]
    assert errors_not_raised([{**entries[0], "ok": False}, entries[1]], cases) == []
    report = {"name": "f", "kind": "hidden", "passed": False, "problem": None, "errors_not_raised": ["error_beta_0"],
              "cases": [{"case": "c1", "ok": False, "verdict": "far", "error": None, "problems": []}],
              "mistakes": recognise(same, signatures, SETTINGS, passed=["c3"])}
    text = format_report(redact(report))
    assert "known mistake halved: halves it" in text and "these errors are not raised: error_beta_0" in text
    assert "not a known mistake" in format_report(redact({**report, "mistakes": [], "errors_not_raised": []}))
    stubbed = format_report(redact({**report, "mistakes": [], "errors_not_raised": [], "unfinished": True}))
    assert "still a stub" in stubbed and "not a known mistake" not in stubbed


def test_recognition_never_names_a_mistake_from_what_a_correct_function_or_any_crash_also_gives():
    """A case where the mistake's tolerance holds the truth tells nothing (`could_be_correct`); a
    mistake that raises on every case is never named from its error class (a loss without a graph
    and an in-place clamp both raise RuntimeError everywhere); and a named function that fails cases
    its mistake passes is told that its values are wrong in another way too."""
    from autograder.recognition import besides, recognise
    from autograder.signatures import could_be_correct

    truth = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    case = expect(truth.float(), truth)
    lossy = expect((truth + 1e-3).float(), truth)  # a mistake whose float32 run loses 1e-3 to its float64 run
    assert lossy.atol > 1e-2 and could_be_correct(lossy, case, SETTINGS)
    assert not could_be_correct(expect((2 * truth).float(), 2 * truth), case, SETTINGS)
    assert not could_be_correct(expect(truth, truth, eps=torch.finfo(torch.float64).eps), case, SETTINGS)  # a dtype
    assert not could_be_correct({"loss": lossy}, case, SETTINGS)  # another structure

    crash = {c: {"error": "raised RuntimeError"} for c in ("c1", "c2")}
    detached = {"ratio_detached": {"sentence": "no graph", "signature": {c: dict(v) for c, v in crash.items()},
                                   "returned": []}}
    assert recognise(crash, detached, SETTINGS) == []
    partial = {"no_guard": {"sentence": "empty row", "signature": {"c2": {"error": "raised IndexError"}},
                            "returned": ["c1", "c3"]}}
    wrong_too = {"c1": {"outputs": torch.zeros(2)}, "c2": {"error": "raised IndexError"}, "c3": {"outputs": torch.ones(2)}}
    named = recognise(wrong_too, partial, SETTINGS, passed=["c1", "c3"])
    assert [m["name"] for m in named] == ["no_guard"]
    assert recognise(wrong_too, partial, SETTINGS, passed=["c3"]) == []  # wrong where the mistake is right
    assert besides(wrong_too, ["c1", "c2"], named, partial, SETTINGS) == "values"
    assert besides(wrong_too, ["c2", "c3"], named, partial, SETTINGS, error_cases=["c3"]) == "errors"
    assert besides(wrong_too, ["c2"], named, partial, SETTINGS) == ""
    report = {"name": "f", "kind": "hidden", "passed": False, "problem": None, "cases": [], "mistakes": named,
              "besides": "values"}
    assert "its values are wrong in another way too" in format_report(redact(report))


@pytest.mark.slow
def test_check_hidden_passes_fails_and_refuses_the_reference():
    """Outside grading, `check_hidden` starts a fresh judge (`python -m autograder.judge`)."""
    from autograder.cases import load_cases
    from autograder.checker import HiddenCheckFailed, check_hidden

    source = '''
import re
import course_lib
_FINAL = re.compile(r"####(?!.*####)\\s*(.+?)\\s*$", re.DOTALL)

def good(answer_text):
    match = _FINAL.search(answer_text)
    if match is None:
        raise ValueError("no final answer")
    return match.group(1).strip().replace(",", "")

def keeps_commas(answer_text):
    match = _FINAL.search(answer_text)
    if match is None:
        raise ValueError("no final answer")
    return match.group(1).strip()

def delegates(answer_text):
    try:
        return course_lib.extract_gsm8k_answer(answer_text)
    except Exception:
        return good(answer_text)
'''
    check_hidden("extract_gsm8k_answer", fn_from(source, "good"))
    with pytest.raises(HiddenCheckFailed) as wrong:
        check_hidden("extract_gsm8k_answer", fn_from(source, "keeps_commas"))
    text = str(wrong.value)
    assert "FAIL thousands_commas" in text and "differs from the expected value" in text
    expected = [s for c in load_cases("extract_gsm8k_answer")["cases"] for s in c["expected"]["answers"] if s.truth]
    assert not any(s.truth in text for s in expected if len(s.truth) > 2), "the report holds an expected value"
    with pytest.raises(HiddenCheckFailed) as delegated:
        check_hidden("extract_gsm8k_answer", fn_from(source, "delegates"))
    assert "calls the reference implementation in course_lib (no credit)" in str(delegated.value)


def test_every_graded_cell_calls_check_hidden_first():
    """Its hidden check opens each graded cell, so that a failing visible check cannot stop it before
    the judge sees the function (and names its known mistake)."""
    from autograder.assignments import HIDDEN_CALL

    for path in sorted((ROOT / "solutions").glob("[0-9][0-9]/*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade"):
                assert HIDDEN_CALL.search(cell.source), f"{path.name}: graded cell {meta['grade_id']} has no check_hidden call"
                assert cell.source.lstrip().startswith("### BEGIN HIDDEN TESTS"), \
                    f"{path.name}: graded cell {meta['grade_id']} does not open with its hidden check"


# ---------------------------------------------------------------- the judge server
def ask(path: Path, name: str, fn) -> dict:
    import cloudpickle

    from autograder.protocol import recv_message, send_message

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(path))
        send_message(sock, {"name": name}, cloudpickle.dumps(fn))
        return recv_message(sock)[0]


@pytest.mark.slow
def test_the_judge_answers_each_graded_check_once_and_only_for_its_assignment(tmp_path):
    from autograder.cases import ensure_cases
    from autograder.judge import JudgeServer

    ensure_cases("compute_entropy")
    entropy = fn_from("import torch\ndef compute_entropy(logits):\n    return torch.zeros(logits.shape[:-1])\n",
                      "compute_entropy")
    with JudgeServer(tmp_path / "j.sock", assignment="02", budget=Counter({"compute_entropy": 1})) as judge:
        first = ask(tmp_path / "j.sock", "compute_entropy", entropy)
        second = ask(tmp_path / "j.sock", "compute_entropy", entropy)
        later = ask(tmp_path / "j.sock", "grpo_train_step", entropy)
        unknown = ask(tmp_path / "j.sock", "no_such_suite", entropy)
    assert first["cases"] and not first["passed"] and first["problem"] is None
    assert all(set(c) == {"case", "ok", "verdict", "error", "problems"} for c in first["cases"])
    assert all(set(p) == {"where", "what"} for c in first["cases"] for p in c["problems"])
    assert (second["problem"], later["problem"], unknown["problem"]) == ("budget", "assignment", "unknown")
    assert not second["cases"] and not later["cases"]
    assert judge.verdicts == {"compute_entropy": [False]} and judge.refused == Counter(
        {"compute_entropy": 1, "grpo_train_step": 1, "no_such_suite": 1})


@pytest.mark.slow
def test_each_call_runs_in_a_fresh_process_and_a_call_that_kills_its_runner_fails_alone(tmp_path):
    """The judge's runner forks a child per call: what one call leaves behind (a changed module,
    a killed runner) reaches no other call."""
    from autograder.cases import ensure_cases, load_cases
    from autograder.judge import JudgeServer

    ensure_cases("compute_entropy")
    entropy = ("    lp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), -1)\n"
               "    h = -(lp.exp() * lp).sum(-1)\n")
    right = fn_from("import torch\ndef compute_entropy(logits):\n" + entropy + "    return h\n", "compute_entropy")
    # right while this process has run at most one call's cases (it counts them on torch)
    n_cases = len(load_cases("compute_entropy")["cases"])
    marking = fn_from("import torch\ndef compute_entropy(logits):\n"
                      "    torch.calls_seen = getattr(torch, 'calls_seen', 0) + 1\n" + entropy +
                      f"    return h if torch.calls_seen <= {n_cases} else h + 1.0\n", "compute_entropy")
    killer = fn_from("import os, signal\ndef compute_entropy(logits):\n    os.kill(os.getppid(), signal.SIGKILL)\n",
                     "compute_entropy")
    before = set(slot_leftovers())
    with JudgeServer(tmp_path / "j.sock", assignment="02", budget=Counter({"compute_entropy": 4})) as judge:
        reports = [ask(tmp_path / "j.sock", "compute_entropy", fn) for fn in (marking, marking, killer, right)]
    # the killed runner's own slot (a judge without a submission's slot gives each runner one) is gone too
    assert set(slot_leftovers()) - before == set(), "left behind by the judge"
    assert [r["passed"] for r in reports] == [True, True, False, True], reports
    assert reports[2]["problem"] is not None and not reports[2]["cases"]
    assert judge.verdicts == {"compute_entropy": [True, True, False, True]}


# ---------------------------------------------------------------- the sandbox's view
PROBE = r"""
import json, os, pathlib, course_lib, course_lib.logprobs, inspect
repo = pathlib.Path(course_lib.__file__).resolve().parent.parent
seen = {p: (repo / p).exists() and any((repo / p).iterdir()) for p in
        ["solutions", "lessons", "notebooks", "tests", ".git", "build", "autograder/hidden", "autograder/graded",
         "data", "course_lib"]}
seen["grader modules"] = any((repo / "autograder" / m).exists() for m in ("cases.py", "judge.py", "grade.py",
                                                                         "signatures.py", "mistakes.py"))
seen["grader.py"] = any((repo / "autograder" / "graded").rglob("grader.py"))
seen["graded test"] = any((repo / "autograder" / "graded").rglob("test_*.py"))
seen["stub"] = "NotImplementedError" in inspect.getsource(course_lib.logprobs.compute_entropy)
seen["early_reference"] = "NotImplementedError" not in inspect.getsource(course_lib.extract_gsm8k_answer)
seen["other copy"] = os.path.exists(os.environ["OTHER_COPY"])
seen["home"] = sorted(os.listdir(os.path.expanduser("~"))) if os.path.isdir(os.path.expanduser("~")) else None
print(json.dumps(seen))
"""


def test_the_sandbox_is_built_from_what_it_needs(tmp_path):
    """Only the environment, the stubbed library, the kernel side of autograder, data and configs
    are there (no suite, hidden case, catalogue of mistakes or grader module); an instructor's other
    copy of the course elsewhere is not, without being named."""
    from autograder.sandbox import sandbox_available, sandboxed
    from autograder.stubs import stub_for_suite

    if not sandbox_available():
        pytest.skip("bubblewrap is not available")
    other = Path(os.path.expanduser("~")) / ".course-copy-for-a-test"
    shutil.rmtree(other, ignore_errors=True)
    shutil.copytree(ROOT / "lessons", other / "lessons")
    try:
        cmd = sandboxed([sys.executable, "-c", PROBE], course_lib=stub_for_suite("compute_entropy"))
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT,
                              env={**os.environ, "OTHER_COPY": str(other / "lessons")})
    finally:
        shutil.rmtree(other, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    home = seen.pop("home")
    assert seen == {"solutions": False, "lessons": False, "notebooks": False, "tests": False, ".git": False,
                    "build": False, "autograder/hidden": False, "autograder/graded": True, "grader.py": False,
                    "graded test": False, "data": True, "course_lib": True, "grader modules": False, "stub": True,
                    "early_reference": True, "other copy": False}, seen
    assert not home or home == [".pyenv"] or not any("course" in h for h in home), home


# ---------------------------------------------------------------- the limits
def test_run_limited_stops_output_floods_and_fork_bombs():
    from autograder.limits import Slot, run_limited

    flood = run_limited([sys.executable, "-c", "import os\nfor _ in range(64): os.write(1, b'x' * 2**20)"],
                        timeout=60, file_bytes=2**20)
    assert "output" in flood.hit and len(flood.stdout) <= 2**20 and flood.returncode != 0
    with Slot(None, 4) as probe:
        kind = probe.kind
    if kind["processes"] != "cgroup":
        pytest.skip("no pids cgroup here: the process limit is RLIMIT_NPROC (or none for root), not observable")
    bomb = ("import os, time\nn = 0\nfor _ in range(100):\n    try:\n        if os.fork() == 0:\n"
            "            time.sleep(5); os._exit(0)\n        n += 1\n    except OSError:\n        break\nprint(n)")
    limited = run_limited([sys.executable, "-c", bomb], timeout=60, max_processes=20)
    assert "processes" in limited.hit and int(limited.stdout) < 20, limited


CHILDREN = """
import os, time
kids = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        block = bytearray(700 * 2**20)  # touched: 700 MiB resident in each child
        time.sleep(3)
        print("held", flush=True)
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
"""


def test_memory_is_limited_over_all_processes_together():
    """Three children of 700 MiB each under a limit of 1.5 GiB: each alone is within it."""
    from autograder.limits import run_limited

    run = run_limited([sys.executable, "-c", CHILDREN], timeout=60, memory_bytes=int(1.5 * 2**30))
    assert "memory" in run.hit and run.stdout.count(b"held") < 3, run


def test_everything_left_in_a_slot_dies_with_it():
    from autograder.limits import Slot, run_limited

    daemon = ("import os, sys, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
              "        print(os.getpid(), flush=True)\n        time.sleep(300)\n    os._exit(0)\ntime.sleep(1)")
    with Slot(2**30) as slot:
        run = run_limited([sys.executable, "-c", daemon], timeout=30, slot=slot)
        pid = int(run.stdout.split()[0])
    try:
        os.kill(pid, 0)
        alive = Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        alive = False
    assert not alive, f"the double-forked daemon {pid} outlived its slot ({slot.kind})"


ABANDONED = """
import os, signal, subprocess, sys
from autograder.limits import Slot
slot = Slot(2**30, 16)
sleeper = subprocess.Popen(["sleep", "300"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           preexec_fn=slot.preexec(file_bytes=None, address_space=None))
print(sleeper.pid, *(g.path for g in (slot.memory, slot.processes) if g is not None), flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # a grading killed before its slot closed
"""


def test_slots_of_a_killed_grading_are_removed_by_the_next_one():
    """A grading killed mid-run leaves its cgroups and what runs in them; the next process that
    makes a slot kills those processes and removes the cgroups (the maker is gone)."""
    from autograder.limits import Slot

    with Slot(2**30, 4) as probe:
        kind = probe.kind
    if kind != {"memory": "cgroup", "processes": "cgroup"}:
        pytest.skip("no memory and pids cgroups here: nothing of a slot outlives its process")
    killed = subprocess.run([sys.executable, "-c", ABANDONED], capture_output=True, text=True, cwd=REPO, timeout=60)
    pid, *groups = killed.stdout.split()
    assert killed.returncode == -9 and len(groups) == 2 and all(Path(g).is_dir() for g in groups), killed
    try:
        subprocess.run([sys.executable, "-c", "from autograder.limits import Slot; Slot(2**30, 16).close()"],
                       check=True, cwd=REPO, timeout=60)
        assert not any(Path(g).exists() for g in groups), groups
        assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    finally:
        from autograder.limits import Cgroup

        for g in groups:  # whatever the outcome, leave nothing behind
            if Path(g).is_dir():
                Cgroup(Path(g), controller="pids", version=1).close()


def test_a_slot_that_was_slow_to_empty_is_removed_before_the_run_ends():
    """A close that gives up (here at once, while the killed process is still exiting) leaves the
    cgroup pending; the grading run's `drain_pending` (called before `grade` returns) removes it."""
    from autograder.limits import Slot, drain_pending

    slot = Slot(2**30, 16)
    if slot.kind["processes"] != "cgroup":
        slot.close()
        pytest.skip("no pids cgroup here: nothing of a slot outlives its process")
    proc = subprocess.Popen(["sleep", "60"], preexec_fn=slot.preexec(file_bytes=None, address_space=None))
    try:
        assert slot.processes.close(patience=0.0) is False and slot.processes.path.exists()
        proc.wait(timeout=30)
        assert drain_pending(patience=30) == [] and not slot.processes.path.exists()
    finally:
        proc.kill()
        proc.wait()
        slot.close()


# ---------------------------------------------------------------- link-proof copies
def test_copies_never_follow_links_and_are_bounded(tmp_path):
    from autograder.safe_files import copy_tree, read_file

    src, secret = tmp_path / "submission", tmp_path / "secret"
    (src / "sub").mkdir(parents=True)
    secret.mkdir()
    (secret / "hidden.pt").write_bytes(b"expected values")
    (src / "01.ipynb").write_text("{}")
    (src / "hidden.pt").symlink_to(secret / "hidden.pt")
    (src / "classmate").symlink_to(secret)
    (src / "sub" / "deep").symlink_to("../../secret/hidden.pt")
    os.mkfifo(src / "pipe")
    with open(src / "sparse.bin", "wb") as f:
        f.truncate(2**30)  # 1 GiB of apparent size, no disk blocks
    report = copy_tree(src, tmp_path / "copy", max_bytes=2**20)
    copied = sorted(str(p.relative_to(tmp_path / "copy")) for p in (tmp_path / "copy").rglob("*"))
    assert copied == ["01.ipynb", "sub"], copied
    assert sorted(report.links) == ["classmate", "hidden.pt", "sub/deep"] and report.special == ["pipe"]
    assert report.too_large == ["sparse.bin"]
    assert read_file(src / "hidden.pt", 100) is None and read_file(src / "pipe", 100) is None
    assert read_file(src / "01.ipynb", 100) == b"{}"


# ---------------------------------------------------------------- layout of the autograder
COMMANDS = ("make_cases", "grade", "feedback", "release", "kit", "practice", "gradescope", "class_report", "twins")


def test_no_autograder_module_imports_a_command_module():
    for path in sorted((ROOT / "autograder").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                module = (node.module or "").split(".")[0]
                names = [module] if module else [a.name for a in node.names]
                bad = [n for n in names if n in COMMANDS and n != path.stem]
                assert not bad, f"{path.name} imports the command module(s) {bad}"


def test_the_kernel_side_imports_only_the_kernel_side():
    """What a kit and a grading sandbox carry of autograder imports nothing else of it."""
    from autograder.harness import KERNEL_SIDE

    side = {n[:-3] for n in KERNEL_SIDE}
    # imported only on paths a kit never takes: a sandbox asked for; `make check` in the repository; the
    # stubbed names of an assignment (a kit and a runner read the tripwire only)
    allowed = {"trial.py": {"sandbox", "uids"}, "practice.py": {"assignments", "cases", "stubs"},
               "student_view.py": {"assignments"}}
    for name in KERNEL_SIDE:
        for node in ast.walk(ast.parse((ROOT / "autograder" / name).read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                module = (node.module or "").split(".")[0]
                assert module in side | allowed.get(name, set()), \
                    f"{name} imports autograder.{module}, which the kernel side lacks"


# ---------------------------------------------------------------- the grading command
def grade(assignment, course, **kwargs):
    from autograder.grade import grade as run

    return {r["student"]: r for r in run(assignment, course, **kwargs)}


def error_outputs(nb) -> list[tuple[int, str, str]]:
    """(cell index, exception name, its message) of every error output of an executed notebook."""
    return [(i, o.get("ename", ""), o.get("evalue", "")) for i, c in enumerate(nb.cells) if c.cell_type == "code"
            for o in c.get("outputs", []) if o.get("output_type") == "error"]


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_autograde_solutions_full_marks_release_zero(assignment, tmp_path):
    """The solution notebook and its release, graded as students' in the sandbox (the course's one
    run of each): the solution runs top to bottom with no error in any cell within GRADING_LIMIT_S,
    and earns full marks; in the release nothing errs before its first graded cell, the first error
    is a graded cell's test failing on the stub (NotImplementedError), and it earns nothing."""
    for student, folder in (("solution", "solutions"), ("release", "notebooks")):
        target = tmp_path / "submitted" / student / assignment
        shutil.copytree(ROOT / folder / assignment, target)
    rows = grade(assignment, tmp_path, jobs=2, timeout=600)
    solution, release = rows["solution"], rows["release"]
    assert solution["status"] == "ok" and solution["max_score"] > 0, solution
    executed = nbformat.read(next((tmp_path / "autograded" / "solution" / assignment).glob("*.ipynb")), as_version=4)
    errors = error_outputs(executed)
    assert len(executed.cells) > 1 and not errors, f"{assignment}: {errors[:3]}"
    assert solution["seconds"] < GRADING_LIMIT_S, f"{assignment}: graded in {solution['seconds']} s"
    assert solution["score"] == solution["max_score"], solution
    assert release["status"] == "ok", release
    assert release["cells"] and all(v == 0 for v in release["cells"].values()), release
    released = nbformat.read(next((tmp_path / "autograded" / "release" / assignment).glob("*.ipynb")), as_version=4)
    first = min(i for i, c in enumerate(released.cells) if c.metadata.get("nbgrader", {}).get("solution"))
    index, ename, evalue = error_outputs(released)[0]
    meta = released.cells[index].metadata.get("nbgrader", {})
    assert index >= first and (meta.get("solution") or meta.get("grade")), \
        f"{assignment}: cell {index} raised {ename} before the first graded cell ({first}) or its test"
    assert ename == "HiddenCheckFailed" and "raised NotImplementedError" in evalue, (assignment, index, ename, evalue[:500])
    assert (tmp_path / "grades" / f"{assignment}.csv").is_file()
    assert (tmp_path / "autograded" / "solution" / assignment).is_dir()
    print(f"{assignment}: solution graded in {solution['seconds']} s, release in {release['seconds']} s")


@pytest.mark.slow
def test_feedback_renders_the_class_in_one_run_and_a_broken_notebook_alone(tmp_path, monkeypatch):
    """`make feedback`: the class in one run of nbgrader; where that run fails (here: a graded cell
    whose id the gradebook does not know), each student in a run of their own, so the broken
    notebook costs its student a FAILED.txt and the others keep their feedback."""
    import autograder.feedback as fb

    for student in ("ann", "bob", "cat"):
        shutil.copytree(ROOT / "solutions" / "02", tmp_path / "submitted" / student / "02")
    rows = grade("02", tmp_path, jobs=2, timeout=600)
    assert [rows[s]["score"] for s in ("ann", "bob", "cat")] == [5, 5, 5], rows
    runs, real = [], fb.nbgrader
    monkeypatch.setattr(fb, "nbgrader", lambda args, *a, **k: runs.append(args) or real(args, *a, **k))

    written = fb.feedback("02", tmp_path)
    assert runs == [["generate_feedback", "02", "--force"]]
    assert sorted(p.parts[-3] for p in written) == ["ann", "bob", "cat"]
    assert all("5.0 / 5.0" in p.read_text(encoding="utf-8") for p in written)

    path = next((tmp_path / "autograded" / "bob" / "02").glob("*.ipynb"))
    nb = nbformat.read(path, as_version=4)
    next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")).metadata.nbgrader.grade_id = "not_a_cell"
    nbformat.write(nb, path)
    runs.clear()
    written = fb.feedback("02", tmp_path)
    assert runs == [["generate_feedback", "02", "--force"]] + [
        ["generate_feedback", "02", "--student", s, "--force"] for s in ("ann", "bob", "cat")]
    assert sorted(p.parts[-3] for p in written) == ["ann", "cat"]
    assert (tmp_path / "feedback" / "bob" / "02" / "FAILED.txt").is_file()
    assert not list((tmp_path / "feedback" / "bob" / "02").glob("*.html"))


SYNTH_SOLUTION = '''def extract_gsm8k_answer(answer_text):
    """The final answer after the last '####', thousands commas removed."""
    ### BEGIN SOLUTION
    import re
    match = re.search(r"####(?!.*####)\\s*(.+?)\\s*$", answer_text, re.DOTALL)
    if match is None:
        raise ValueError("no final answer")
    return match.group(1).strip().replace(",", "")
    ### END SOLUTION'''
SYNTH_VISIBLE = 'assert extract_gsm8k_answer("x\\n#### 1,080") == "1080", "thousands commas kept"'
SYNTH_HIDDEN = '''### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("extract_gsm8k_answer", extract_gsm8k_answer)
### END HIDDEN TESTS'''


def synthetic_assignment(source: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
                   "language_info": {"name": "python"}}
    cells = [
        nbformat.v4.new_markdown_cell("# A small assignment"),
        nbformat.v4.new_code_cell(SYNTH_SOLUTION),
        nbformat.v4.new_code_cell(SYNTH_VISIBLE),
        nbformat.v4.new_code_cell(SYNTH_VISIBLE + "\n" + SYNTH_HIDDEN),
    ]
    meta = [None,
            {"grade": False, "solution": True, "locked": False, "grade_id": "answer", "schema_version": 3},
            {"grade": True, "solution": False, "locked": True, "grade_id": "visible", "points": 1, "schema_version": 3},
            {"grade": True, "solution": False, "locked": True, "grade_id": "hidden", "points": 2, "schema_version": 3}]
    nb.cells = cells
    for i, (cell, m) in enumerate(zip(cells, meta)):
        cell.id = f"c{i}"
        if m:
            cell.metadata["nbgrader"] = m
    (source / "90").mkdir(parents=True)
    nbformat.write(nb, source / "90" / "small.ipynb")


def submit(course: Path, student: str, source: Path, answer_cell: str | None) -> None:
    nb = nbformat.read(source / "90" / "small.ipynb", as_version=4)
    if answer_cell is not None:
        nb.cells[1].source = answer_cell
    target = course / "submitted" / student / "90"
    target.mkdir(parents=True)
    nbformat.write(nb, target / "small.ipynb")


@pytest.mark.slow
def test_grading_an_assignment_no_lesson_defines_with_an_ungated_cell(tmp_path):
    """Every graded name is a stub for an assignment no lesson defines; a visible cell without a
    hidden check still counts; an empty and a crashing submission get their statuses, a correct
    one full marks (loops, floods, bombs and the rest are tests/test_exploits.py's catalogue)."""
    source, course = tmp_path / "source", tmp_path / "course"
    synthetic_assignment(source)
    submit(course, "good", source, None)
    submit(course, "crashes", source, "import os\nos._exit(3)")
    (course / "submitted" / "empty" / "90").mkdir(parents=True)
    rows = grade("90", course, jobs=2, timeout=60, memory_gb=6, source=source)
    print(json.dumps({s: (r["status"], r["score"]) for s, r in rows.items()}))
    assert rows["good"]["status"] == "ok" and rows["good"]["score"] == 3, rows["good"]
    assert rows["empty"]["status"] == "no notebook" and rows["empty"]["score"] == 0
    assert rows["crashes"]["status"] == "crashed" and rows["crashes"]["score"] == 0, rows["crashes"]
