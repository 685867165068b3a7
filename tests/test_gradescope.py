"""The Gradescope autograder of notebook 07, built by `make gradescope` and run offline.

One zip is built per test process and unpacked as Gradescope unpacks it (ROOT/source, with
run_autograder copied to ROOT/run_autograder); each test gives `run_autograder` its own ROOT
(AUTOGRADER_ROOT) holding the upload in ROOT/submission, and checks ROOT/results/results.json
against Gradescope's format (`autograder.gradescope_results.problems`) and the grade. The roots
live in a folder every user can pass through, for the runs as unprivileged ids.

Where Gradescope most likely grades, bubblewrap cannot make its namespaces: the tests marked so
run `run_autograder` as it would run there (`tests/container.py`: Docker's capabilities and
namespace refusals, no cgroup), where it chooses the unprivileged ids itself. There, hostile
notebooks reach no secret and no hidden input, the at-once view is the same whatever the run did,
and a daemon that holds the judge or memory is gone, and results.json written, within the zip's
time limit plus a minute.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder import requirements_lock
from autograder.gradescope import DEFAULT_CONTAINER_GIB, GRADER_GIB, MEASURED, build, container_advice
from autograder.gradescope_results import at_once_view, error_results, problems
from autograder.mistakes import catalogue
from autograder.safe_files import remove_tree
from autograder.sandbox import bubblewrap_works
from tests.container import container_like, usable, user_python
from tests.exploits import HOARD, TRICKLE, leak_attack

# this module's daemons and leaking runners go by names of their own: the exploit catalogue, graded
# beside it, looks for its own by name (`tests.exploits.DAEMONS`)
DAEMONS = ("gs-trickle", "gs-hoard")
LEAK_TAG = "GSLK"

pytestmark = pytest.mark.xdist_group("gradescope")  # the zip built once, not once per worker

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "07_clip_loss.ipynb"
SUITES = ["compute_grpo_clip_loss", "compute_naive_policy_gradient_loss", "compute_policy_gradient_loss",
          "grpo_microbatch_train_step", "masked_mean"]
CELLS = ["compute_naive_policy_gradient_loss", "compute_grpo_clip_loss", "compute_policy_gradient_loss", "masked_mean",
         "grpo_microbatch_train_step"]
MAX = {"compute_naive_policy_gradient_loss": 2.0, "compute_grpo_clip_loss": 4.0, "compute_policy_gradient_loss": 3.0,
       "masked_mean": 2.0, "grpo_microbatch_train_step": 4.0}


@pytest.fixture(scope="module")
def place():
    """A folder every user can pass through (pytest's own temporary folders are root's only)."""
    folder = Path(tempfile.mkdtemp(prefix="course-gradescope-test-"))
    folder.chmod(0o755)
    yield folder
    remove_tree(folder)  # an upload there is 1,100 folders deep


@pytest.fixture(scope="module")
def built(place):
    """The zip of 07, and the repository's hidden case files that were there untouched by building it.
    (Tests beside this one may add case files, and reading any touches a lock, meanwhile: so the
    files that were there are compared, locks left out.)"""
    hidden = ROOT / "autograder" / "hidden"
    files = [p for p in hidden.glob("*") if not p.name.startswith(".")] if hidden.is_dir() else []
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in files}
    path = build("07", place / "zip")
    after = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in files if p.exists()}
    assert before == after, "building the zip wrote into the repository's autograder/hidden/"
    return path


def unpack(zip_path: Path, into: Path, timeout: float | None = None) -> Path:
    """The zip unpacked as Gradescope does (`unzip` keeps the modes); `timeout` rewrites the settings."""
    into.mkdir(parents=True)
    subprocess.run(["unzip", "-q", str(zip_path), "-d", str(into)], check=True)
    if timeout is not None:
        settings = json.loads((into / "gradescope.json").read_text())
        (into / "gradescope.json").write_text(json.dumps({**settings, "timeout": timeout}))
    return into


@pytest.fixture(scope="module")
def source(built, place):
    return unpack(built, place / "source")


@pytest.fixture(scope="module")
def id_python(place):
    """A Python unprivileged ids can run, for the container-like runs (skipped where they cannot run)."""
    if usable():
        pytest.skip(f"the container-like run {usable()}")
    python = user_python(place)
    if python is None:
        pytest.skip("no Python of this version that an unprivileged id can run")
    return python


def run_autograder(place: Path, source: Path, *, name: str, files: dict, env: dict | None = None,
                   container: str | None = None, landlock: bool = True) -> tuple[dict, str, float]:
    """Run run_autograder on an upload ({relative path: bytes, or Path for a symbolic link to it});
    (results.json, its stdout, seconds). `container`: a Python unprivileged ids can run, to run it
    in a container-like run (`tests.container`) with that Python; without `landlock` there, as on a
    kernel or a Docker that refuses Landlock's calls."""
    root = place / name
    (root / "submission").mkdir(parents=True)
    (root / "source").symlink_to(source)
    shutil.copy(source / "run_autograder", root / "run_autograder")
    for rel, content in files.items():
        path = root / "submission" / rel
        folder = root / "submission"
        for part in Path(rel).parts[:-1]:  # one level at a time: an upload may be deeper than any recursion
            folder = folder / part
            folder.mkdir(exist_ok=True)
        if isinstance(content, Path):
            path.symlink_to(content)
        else:
            path.write_bytes(content)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AUTOGRADER_")}
    clean.update({"AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": container or sys.executable, **(env or {})})
    cmd = [str(root / "run_autograder")]
    started = time.perf_counter()
    if container:
        cmd = container_like(cmd, python=container, landlock=landlock)
    proc = subprocess.run(cmd, cwd=root, env=clean, capture_output=True, text=True, timeout=900)
    seconds = time.perf_counter() - started
    data = json.loads((root / "results" / "results.json").read_text())
    assert problems(data) == [], (problems(data), proc.stdout[-3000:])
    return data, proc.stdout + proc.stderr, seconds


def notebook_bytes(nb) -> bytes:
    return nbformat.writes(nb).encode()


def solution():
    return nbformat.read(ROOT / "solutions" / "07" / NOTEBOOK, as_version=4)


def with_cell(nb, grade_id: str, edit) -> nbformat.NotebookNode:
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            cell.source = edit(cell.source)
    return nb


def by_name(data: dict) -> dict:
    return {t["name"]: t for t in data["tests"]}


# ---------------------------------------------------------------- graded uploads
@pytest.mark.slow
def test_the_solution_earns_full_marks_from_any_file_name_and_folder(place, source):
    """The solution, renamed and nested as an upload of a folder would be, beside an editor's
    checkpoint copy and a macOS archive's resource file (neither counts as a second notebook)."""
    files = {"my work/hw 7/clip loss (final).ipynb": notebook_bytes(solution()),
             "my work/hw 7/.ipynb_checkpoints/clip loss (final)-checkpoint.ipynb": notebook_bytes(solution()),
             "__MACOSX/my work/._clip loss (final).ipynb": b"\0\5\26\7"}
    data, out, seconds = run_autograder(place, source, name="solution", files=files)
    tests = by_name(data)
    assert data["score"] == sum(MAX.values()) == 15, (data, out[-3000:])
    assert list(tests) == [*CELLS, "Status", "Submission"]
    for cell in CELLS:
        t = tests[cell]
        assert (t["score"], t["max_score"], t["status"], t["visibility"]) == (MAX[cell], MAX[cell], "passed",
                                                                             "after_due_date"), t
        assert f"{cell}: " in t["output"] and "hidden cases passed" in t["output"], t["output"]
    assert tests["Submission"]["status"] == "passed" and tests["Submission"]["visibility"] == "visible"
    assert "my work/hw 7/clip loss (final).ipynb" in data["output"]
    assert "shown after the due date" in data["output"]
    assert data["stdout_visibility"] == "hidden" and data["visibility"] == "after_due_date"
    assert "execution_time" not in data and tests["Status"]["output"].startswith("graded (")
    assert tests["Status"]["visibility"] == "after_due_date"
    print(f"run_autograder on the solution: {seconds:.1f} s")


@pytest.mark.slow
def test_the_release_notebook_earns_nothing(place, source):
    """The release notebook's stubs earn nothing, and each cell says it is still a stub: no mistake
    is named for NotImplementedError."""
    release = nbformat.read(ROOT / "notebooks" / "07" / NOTEBOOK, as_version=4)
    data, out, _ = run_autograder(place, source, name="release", files={"07.ipynb": notebook_bytes(release)})
    tests = by_name(data)
    assert data["score"] == 0, out[-3000:]
    for cell in CELLS:
        assert tests[cell]["score"] == 0 and tests[cell]["status"] == "failed", tests[cell]
        assert "the function is still a stub, or calls one" in tests[cell]["output"], tests[cell]
        assert "known mistake" not in tests[cell]["output"], tests[cell]
    assert tests["Submission"]["status"] == "passed"  # it was graded: its status is ok


@pytest.mark.slow
def test_a_wrong_function_loses_its_cell_and_a_link_is_left_out(place, source):
    """A step that never divides by gradient_accumulation_steps (a catalogued mistake) loses its cell:
    its output reads the judge's redacted report (the failing cases, no value) and the mistake's
    name and sentence; the other cells keep their points. A link to the hidden cases beside the
    notebook is left out and noted."""
    mistake = catalogue("grpo_microbatch_train_step")["step_no_division_by_accumulation_steps"]
    wrong = with_cell(solution(), "solution_grpo_microbatch_train_step", lambda s: s.replace(
        "loss = masked_mean(per_token, response_mask, dim=-1).mean() / gradient_accumulation_steps",
        "loss = masked_mean(per_token, response_mask, dim=-1).mean()"))
    hidden = source / "course" / "autograder" / "hidden" / "grpo_microbatch_train_step.pt"
    files = {"07.ipynb": notebook_bytes(wrong), "cases.pt": hidden}
    data, out, _ = run_autograder(place, source, name="wrong", files=files)
    tests = by_name(data)
    step = tests["grpo_microbatch_train_step"]
    assert step["score"] == 0 and step["status"] == "failed", (step, out[-3000:])
    assert "HiddenCheckFailed: grpo_microbatch_train_step: " in step["output"], step["output"]
    assert "FAIL " in step["output"], step["output"]
    assert f"known mistake step_no_division_by_accumulation_steps: {mistake.sentence}" in step["output"], step["output"]
    assert "largest error" not in step["output"] and "tolerance is" not in step["output"]
    assert data["score"] == 15 - 4 and all(tests[c]["score"] == MAX[c] for c in CELLS[:-1]), data
    assert "symbolic link(s) not followed and left out (cases.pt)" in tests["Submission"]["output"]


@pytest.mark.slow
def test_an_endless_loop_is_a_timeout_result(place, built):
    """Its own settings (a 6 s limit) in a second unpacked copy: a timeout, not a hang, with
    results.json within the limit plus a minute. (On a loaded machine the whole grading's deadline,
    the limit plus GRACE, may stop it before the notebook's own limit does: a timeout either way.)"""
    short = unpack(built, place / "source-6s", timeout=6)
    nb = with_cell(solution(), "solution_compute_naive_policy_gradient_loss", lambda s: "while True:\n    pass\n")
    data, out, seconds = run_autograder(place, short, name="loop", files={"loop.ipynb": notebook_bytes(nb)})
    tests = by_name(data)
    assert data["score"] == 0 and tests["Status"]["status"] == "failed", out[-3000:]
    assert tests["Status"]["output"].startswith("timeout (") and ("stopped after 6 s" in tests["Status"]["output"] or
                                                                  "the grading passed its time limit" in tests["Status"]["output"])
    assert all(tests[c]["output"] == "not run (timeout)" for c in CELLS)
    assert seconds < 6 + 60, seconds


# ---------------------------------------------------------------- where bubblewrap cannot run
SHORT_S = 90  # a limit the solution's first cells reach on a loaded machine (load 15-25 here), not its last
LOOP_S = 20  # an endless loop times out wherever its cell is reached (niced: it spins on idle cores until the limit)
LOOP = "\nimport os\nos.nice(19)\nwhile True:\n    pass\n"
FLOOD = "\nimport os\nfor _ in range(100):\n    os.write(1, b'x' * 2**20)\n"


def wrong_naive(nb):
    """The notebook with compute_naive_policy_gradient_loss wrong (its hidden check fails)."""
    return with_cell(nb, "solution_compute_naive_policy_gradient_loss",
                     lambda s: s + "\n\ndef compute_naive_policy_gradient_loss(raw_rewards_or_advantages, "
                                   "policy_log_probs):\n    return policy_log_probs * 0\n")


@pytest.mark.slow
def test_the_at_once_view_is_the_same_whatever_the_run(place, built, source, id_python):
    """What a student sees before the due date (`at_once_view`: the top-level output and the tests
    shown at once) is byte for byte the same for the solution and for a notebook that, after a
    failing hidden check, raises MemoryError, loops until its time limit or floods its output, all
    uploaded as 07.ipynb: nothing of it depends on how the notebook ran."""
    short = unpack(built, place / "source-at-once", timeout=SHORT_S)
    shorter = unpack(built, place / "source-at-once-loop", timeout=LOOP_S)
    after = {"memory": "\nraise MemoryError()\n", "loop": LOOP, "flood": FLOOD}
    views, statuses = {}, {}
    for name, tail in [("pass", None), *after.items()]:
        nb = solution() if tail is None else with_cell(wrong_naive(solution()), "solution_compute_grpo_clip_loss",
                                                       lambda s, tail=tail: s + tail)
        limit, folder = (300, source) if tail is None else (LOOP_S, shorter) if name == "loop" else (SHORT_S, short)
        data, out, seconds = run_autograder(place, folder, name=f"at-once-{name}",
                                            files={"07.ipynb": notebook_bytes(nb)}, container=id_python)
        views[name] = json.dumps(at_once_view(data), sort_keys=True)
        statuses[name] = (data["score"], by_name(data)["Status"]["output"].split(" (")[0])
        assert seconds < limit + 60, (name, seconds)
    print(statuses)
    assert statuses["pass"] == (15, "graded") and statuses["memory"][1] == "out of memory", statuses
    assert statuses["loop"][1] == "timeout" and statuses["flood"][1] == "output flood", statuses
    assert len(set(views.values())) == 1, views
    assert "07.ipynb" in views["pass"] and "shown after the due date" in views["pass"]


@pytest.mark.slow
@pytest.mark.parametrize("landlock", [True, False], ids=["landlock", "no landlock"])
def test_no_hidden_input_reaches_the_results(place, source, id_python, landlock):
    """compute_naive_policy_gradient_loss, run by the judge on the hidden inputs, leaves them in every
    shared place (`tests.exploits.leak_attack`: /tmp, /var/tmp, /dev/shm, the kernel's folders,
    sockets, its process name and command line, a daemon) while the kernel watches the runner's
    /proc entries; compute_grpo_clip_loss, called by its graded cell's visible checks, prints what
    reached the kernel. Nothing did, no hidden input is in results.json, and both functions, being
    right, keep their points. Without Landlock too (the runner's filter alone keeps it from writing
    anywhere)."""
    import torch

    leave, report = leak_attack("compute_naive_policy_gradient_loss", "compute_grpo_clip_loss", tag=LEAK_TAG)
    nb = with_cell(solution(), "solution_compute_naive_policy_gradient_loss", lambda s: s + "\n" + leave)
    nb = with_cell(nb, "solution_compute_grpo_clip_loss", lambda s: s + "\n" + report)
    data, out, _ = run_autograder(place, source, name=f"leak-{landlock}", files={"07.ipynb": notebook_bytes(nb)},
                                  container=id_python, landlock=landlock)
    tests = by_name(data)
    assert data["score"] == 15, (json.dumps(data, indent=1)[:4000], out[-3000:])
    assert "LEAK REPORT: 0 file(s), 0 other(s)" in tests["compute_grpo_clip_loss"]["output"], tests
    cases = torch.load(source / "course" / "autograder" / "hidden" / "compute_naive_policy_gradient_loss.pt",
                       weights_only=False)["cases"]
    values = {repr(v) for c in cases for t in c["inputs"].values() if isinstance(t, torch.Tensor)
              and t.is_floating_point() for v in t.flatten().tolist() if abs(v) > 1e-3 and len(repr(v)) > 8}
    assert len(values) > 20
    text = json.dumps(data) + out
    assert not [v for v in values if v in text]


@pytest.mark.slow
@pytest.mark.parametrize("attack", ["a trickling daemon", "memory in a daemon"])
def test_a_daemon_is_gone_and_results_written_in_time(place, built, id_python, attack):
    """A double-forked daemon that holds the judge with a request that never completes (a byte every
    2 s), or two that hold 0.9 GiB each outside the kernel's process tree (each under its own
    address-space limit), under a SHORT_S limit and 1.5 GiB: results.json comes within the limit
    plus a minute, and the daemons are gone. The trickling request is dropped at the judge's
    deadline for a whole request, so the solution is graded (a timeout only where the machine is
    too slow for the limit); the memory of every process of the submission's ids counts, so the
    hoard is out of memory and the kernel, killed with it, loses the cells after."""
    short = unpack(built, place / f"source-{attack.replace(' ', '-')}", timeout=SHORT_S)
    settings = json.loads((short / "gradescope.json").read_text())
    (short / "gradescope.json").write_text(json.dumps({**settings, "memory_gb": 1.5}))
    code = TRICKLE.format(name=DAEMONS[0]) if attack == "a trickling daemon" else HOARD.format(gib=0.9, name=DAEMONS[1])
    nb = with_cell(solution(), "solution_compute_naive_policy_gradient_loss", lambda s: code + "\n" + s)
    data, out, seconds = run_autograder(place, short, name=attack.replace(" ", "_"),
                                        files={"07.ipynb": notebook_bytes(nb)}, container=id_python)
    status = by_name(data)["Status"]["output"]
    assert seconds < SHORT_S + 60, (seconds, out[-3000:])
    if attack == "a trickling daemon":
        assert status.startswith(("graded (", "timeout (")), status
    else:
        assert status.startswith("out of memory (") and data["score"] < 15, (status, data["score"])
    left = [p.name for p in Path("/proc").iterdir() if p.name.isdigit() and _comm(p) in DAEMONS]
    assert not left, left


def _comm(proc: Path) -> str:
    try:
        return (proc / "comm").read_text().strip()
    except OSError:
        return ""


# ---------------------------------------------------------------- uploads that are not graded
@pytest.mark.parametrize("case, files, says", [
    ("missing", {"README.txt": b"I forgot"}, "no notebook (.ipynb) in your upload"),
    ("two notebooks", {"a.ipynb": b"{}", "sub/b.ipynb": b"{}"}, "2 notebooks in your upload (a.ipynb, sub/b.ipynb): "
                                                                "upload exactly one"),
    ("a link", {"07.ipynb": ROOT / "solutions" / "07" / NOTEBOOK},
     "no notebook (.ipynb) in your upload (07.ipynb: a symbolic link, not followed)"),
])
def test_an_upload_that_is_not_one_notebook_gets_a_clear_result(place, source, case, files, says):
    data, out, seconds = run_autograder(place, source, name=case.replace(" ", "_"), files=files)
    tests = by_name(data)
    assert data["score"] == 0 and list(tests) == [*CELLS, "Status", "Submission"], out[-2000:]
    assert tests["Submission"]["status"] == "failed" and tests["Submission"]["visibility"] == "visible"
    assert tests["Submission"]["output"].startswith(says), tests["Submission"]["output"]
    assert all(tests[c]["score"] == 0 and tests[c]["max_score"] == MAX[c] for c in CELLS)


def test_a_deep_or_badly_named_upload_gets_a_clear_result_in_valid_json(place, source):
    """An upload 1,100 folders deep (its notebook at the bottom), and one whose second notebook and a
    link have names that are not UTF-8: each a result that says why nothing was graded, in JSON
    that is valid UTF-8 text (the names' bytes escaped, no lone surrogate)."""
    deep = {"/".join(["d"] * 1100) + "/07.ipynb": notebook_bytes(solution())}
    data, _, _ = run_autograder(place, source, name="deep", files=deep)
    submission = by_name(data)["Submission"]["output"]
    assert submission.startswith("no notebook (.ipynb) in your upload") and "more than 64 folders deep" in submission
    named = {"07.ipynb": b"{}", "\udcff\udcfe.ipynb": b"{}", "link-\udcff": ROOT / "README.md"}
    data, _, _ = run_autograder(place, source, name="named", files=named)
    raw = (place / "named" / "results" / "results.json").read_bytes()
    assert json.loads(raw.decode("utf-8")) == data and "\\ud" not in raw.decode()
    submission = by_name(data)["Submission"]["output"]
    assert submission.startswith("2 notebooks in your upload (07.ipynb, \\xff\\xfe.ipynb)"), submission
    assert "link-\\xff" in submission


def test_a_grader_that_cannot_start_still_writes_a_result(place, source):
    data, out, _ = run_autograder(place, source, name="no_python", files={"07.ipynb": notebook_bytes(solution())},
                                  env={"AUTOGRADER_PYTHON": str(place / "no-such-python")})
    assert data["score"] == 0 and data["tests"] == [], data
    assert "the autograder itself failed, not your notebook" in data["output"]


def test_a_results_checker_that_can_fail():
    """The format checker on Gradescope's own example shape, and on what departs from it."""
    good = {"score": 4.0, "execution_time": 3, "output": "x", "visibility": "after_due_date",
            "stdout_visibility": "hidden",
            "tests": [{"name": "a", "score": 2, "max_score": 2, "status": "passed", "output": "", "tags": ["t"],
                       "visibility": "visible", "number": "1.1", "output_format": "md"},
                      {"name": "info", "status": "failed"}]}
    assert problems(good) == []
    assert problems(error_results("x")) == []
    bad = {"score": "4", "visibility": "soon", "tests": [{"status": "ok", "score": True, "colour": "red"}, 3], "x": 1}
    found = problems(bad)
    for expected in ("unknown key 'x'", "score is not a finite number", "visibility 'soon' is not one of",
                     "tests[0]: unknown key 'colour'", "tests[0].score is not a finite number",
                     "tests[0].status 'ok' is not passed or failed", "tests[1] is not an object"):
        assert any(expected in p for p in found), (expected, found)
    assert problems({"tests": [{"name": "no score"}]}) == ["no top-level score, and not every test has one"]
    assert problems({"score": float("nan")}) == ["score is not a finite number",
                                                 "a number is NaN or infinite (not JSON)"]


# ---------------------------------------------------------------- what a hostile notebook can reach
HOSTILE = '''
import os as _os
_ATTACKS = []
for _path in {paths!r}:
    try:
        with open(_path, "rb") as _f:
            _text = _f.read().decode("latin-1")
        if "is yours to write" not in _text:  # the stubbed library is no secret
            _ATTACKS.append("read " + _os.path.basename(_path))
    except OSError:
        pass
try:
    with open({results!r}, "w") as _f:
        _f.write('{{"score": 1000}}')
    _ATTACKS.append("wrote results.json")
except OSError:
    pass
_honest = compute_naive_policy_gradient_loss


def compute_naive_policy_gradient_loss(*args, **kwargs):
    if _ATTACKS:
        raise RuntimeError("ATTACK SUCCEEDED: " + ", ".join(_ATTACKS))
    return _honest(*args, **kwargs)
'''


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["bubblewrap", "unprivileged ids", "unprivileged ids without Landlock"])
def test_a_hostile_notebook_reaches_no_secret(request, place, source, mode):
    """The notebook reads the hidden cases, the references and the source notebook where the grader
    keeps them, and writes results.json (its first function raises, naming what it got, if any of
    it works): under bubblewrap none of it is there, and as unprivileged ids (in a container-like
    run, where bubblewrap cannot run, with Landlock or with file permissions alone) none of it is
    readable or writable; all earn full marks. That
    the probe's paths hold the secrets is checked here, as root."""
    course = source.resolve() / "course"
    paths = [*(course / "autograder" / "hidden" / f"{s}.pt" for s in SUITES), course / "course_lib" / "grpo.py",
             course / "solutions" / "07" / NOTEBOOK]
    assert all(p.is_file() for p in paths) and "def compute_grpo_clip_loss" in paths[-2].read_text()
    assert "is yours to write" not in paths[-2].read_text()  # the reference itself, not a stub
    results = str(place.resolve() / mode.replace(" ", "_") / "results" / "results.json")
    nb = with_cell(solution(), "solution_compute_naive_policy_gradient_loss",
                   lambda s: s + HOSTILE.format(paths=[str(p) for p in paths], results=results))
    if mode == "bubblewrap" and not bubblewrap_works():
        pytest.skip("bubblewrap cannot make its namespaces on this machine")
    container = request.getfixturevalue("id_python") if mode.startswith("unprivileged ids") else None
    data, out, _ = run_autograder(place, source, name=mode.replace(" ", "_"), files={"07.ipynb": notebook_bytes(nb)},
                                  container=container, landlock="without Landlock" not in mode)
    assert data["score"] == 15, (json.dumps(data, indent=1)[:4000], out[-3000:])
    assert "ATTACK" not in json.dumps(data)
    if mode.startswith("unprivileged ids"):
        assert "sandbox: bubblewrap cannot make its namespaces here" in by_name(data)["Submission"]["output"]
        assert "unprivileged ids of their own" in data["output"]
        assert ("Landlock limited what it could read" in data["output"]) == ("without Landlock" not in mode), data


# ---------------------------------------------------------------- the zip itself
def test_the_zip_holds_what_grading_needs_and_nothing_else(built, tmp_path):
    with zipfile.ZipFile(built) as z:
        names = z.namelist()
        modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
        settings = json.loads(z.read("gradescope.json"))
        lock = z.read("requirements.lock").decode()
        torch_lock = z.read("torch.lock").decode()
        setup = z.read("setup.sh").decode()
    print(f"the zip: {built.stat().st_size / 2**20:.1f} MiB, {len(names)} files")
    assert built.stat().st_size < 32 * 2**20
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    tops = {n.split("/")[0] for n in names}
    assert tops == {"setup.sh", "run_autograder", "requirements.lock", "torch.lock", "gradescope.json", "course"}, tops
    assert {n.split("/")[1] for n in names if n.startswith("course/")} == {
        "autograder", "course_lib", "data", "configs", "solutions"}
    assert {n for n in names if n.startswith("course/solutions/")} == {f"course/solutions/07/{NOTEBOOK}"}
    hidden = sorted(n for n in names if n.startswith("course/autograder/hidden/"))
    assert hidden == [f"course/autograder/hidden/{s}.pt" for s in SUITES]
    for forbidden in ("tests/", "lessons/", "notebooks/", ".git", "__pycache__", "kit.py", "kit_template",
                      "make_cases.py", "requirements_lock.py"):
        assert not any(forbidden in n for n in names), forbidden
    assert not any(n.endswith(".pt") and "hidden" in n and not n.startswith("course/autograder/hidden/") for n in names)
    assert settings["assignment"] == "07" and settings["notebook"] == NOTEBOOK
    assert settings["visibility"] == {"cells": "after_due_date", "status": "visible", "stdout": "hidden"}
    # what setup.sh installs: the repository's lock, hash-checked; torch's CPU wheel first, from PyTorch's index
    assert lock == requirements_lock.LOCK.read_text()
    torch = requirements_lock.read()["torch"]
    (tmp_path / "torch.lock").write_text(torch_lock)
    assert requirements_lock.read(tmp_path / "torch.lock") == {"torch": torch} and torch.version.endswith("+cpu")
    assert 'TORCH_INDEX="${AUTOGRADER_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"' in setup
    assert "--require-hashes" in setup and '-r "$SOURCE/torch.lock"' in setup and '-r "$SOURCE/requirements.lock"' in setup
    assert not re.search(r"@[A-Z_]+@", setup) and "useradd" not in setup  # no placeholder left; no user to make


def test_the_scripts_are_valid_bash(tmp_path):
    """`bash -n` on both scripts (shellcheck too, where it is installed). setup.sh as a whole runs
    on Ubuntu 22.04 in `tests/test_gradescope_image.py` (minutes: asked for by an environment variable)."""
    for name in ("setup.sh", "run_autograder"):
        script = ROOT / "autograder" / "gradescope_template" / name
        assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0, name
        if shutil.which("shellcheck"):
            proc = subprocess.run(["shellcheck", str(script)], capture_output=True, text=True)
            assert proc.returncode == 0, proc.stdout


SETUP = ROOT / "autograder" / "gradescope_template" / "setup.sh"


def setup_sh(root: Path, path: str) -> subprocess.CompletedProcess:
    """setup.sh without apt-get, its environment in `root`, with this PATH."""
    env = {"PATH": path, "HOME": str(root), "AUTOGRADER_ROOT": str(root), "AUTOGRADER_SETUP_APT": "0"}
    return subprocess.run([shutil.which("bash"), str(SETUP)], env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_setup_names_the_python_it_chose_and_the_line_that_failed(tmp_path):
    """With python3.11 there (this machine's) and no lock in ROOT/source, setup.sh prints the Python
    it chose, makes the environment and stops at the first pip line, naming its line and command.
    (35 s at load average 15 on 2 cores: making the environment installs its pip.)"""
    python = shutil.which("python3.11", path="/usr/bin:/bin")
    if python is None:
        pytest.skip("no python3.11 in /usr/bin")
    proc = setup_sh(tmp_path, "/usr/bin:/bin")
    assert proc.returncode != 0
    assert f"setup.sh: grading with {python}, Python 3.11." in proc.stdout, proc.stdout
    line = next(i for i, text in enumerate(SETUP.read_text().splitlines(), start=1) if "torch.lock" in text
                and text.startswith('"${PIP[@]}"'))
    assert (f'setup.sh: line {line} failed (exit 1): "${{PIP[@]}}" --no-deps --index-url "$TORCH_INDEX" '
            '-r "$SOURCE/torch.lock"') in proc.stderr, proc.stderr
    assert (tmp_path / "venv" / "bin" / "python").exists()


def test_setup_without_python311_says_so(tmp_path):
    proc = setup_sh(tmp_path, str(tmp_path / "no-such-folder"))
    assert proc.returncode == 1
    assert "setup.sh: no python3.11 on PATH: the lock (requirements.lock) is for CPython 3.11" in proc.stderr
    assert not (tmp_path / "venv").exists()


def test_the_build_says_what_to_set_on_gradescope():
    """Gradescope's default container (768 MB) holds neither measured submission: the advice says
    so with the figures, and sizes the memory to the zip's own limit plus the grader's share."""
    assert all(m["peak_gib"] > DEFAULT_CONTAINER_GIB for m in MEASURED.values()), MEASURED
    text = container_advice(memory_gb=4.0, timeout=300.0)
    assert "(its default container, 768 MB of memory and half a CPU, is too small)" in text, text
    assert GRADER_GIB == 0.3 and "memory: at least 5 GB" in text, text  # 4.3 GiB is 4.6 GB
    assert f"{MEASURED['07']['peak_gib']:.2f} GiB for 07" in text and f"{MEASURED['09']['peak_gib']:.2f} GiB for 09" in text
    assert "stops a submission's own processes at 4 GiB (--memory-gb)" in text
    assert "timeout: 10 minutes (Gradescope's default) or more, well above the zip's own 300 s" in text
    assert "memory: at least 2 GB" in container_advice(memory_gb=1.5, timeout=300.0)  # 1.8 GiB is 1.93 GB


def test_each_build_draws_new_secret_cases(tmp_path):
    """Two zips of notebook 02: the same suite and fingerprint, different hidden inputs."""
    import torch

    cases = []
    for i in (1, 2):
        with zipfile.ZipFile(build("02", tmp_path / str(i))) as z:
            data = torch.load(__import__("io").BytesIO(z.read("course/autograder/hidden/compute_entropy.pt")),
                              weights_only=False)
        cases.append(data)
    assert cases[0]["fingerprint"] == cases[1]["fingerprint"]
    drawn = [[c["inputs"]["logits"] for c in data["cases"] if "logits" in c["inputs"]] for data in cases]
    assert len(drawn[0]) == len(drawn[1]) > 5
    different = sum(not (a.shape == b.shape and torch.equal(a, b)) for a, b in zip(*drawn))
    assert different >= len(drawn[0]) // 2, different
