"""Build an assignment's Gradescope image from zero in a fresh Ubuntu 22.04 root, then grade in it.

    sudo .venv/bin/python scripts/gradescope_image_check.py [--assignment 07] [--zip PATH]
        [--wheels DIR] [--workdir DIR] [--keep] [--json OUT]

Root, debootstrap, unshare, chroot, overlayfs and unzip are needed; about 3 GB of disk and an hour
on 2 cores at load average 20 to 27 (setup.sh 38 minutes of it). What Gradescope does to build an
image from a zip, done here step by step:

1. **The base image.** debootstrap makes a minimal Ubuntu 22.04 (jammy) root from Ubuntu's
   archive; its apt sources become those of the ubuntu:22.04 image (main, restricted, universe,
   multiverse; jammy, -updates, -backports, -security), and Gradescope's own layer is added:
   curl, unzip and dos2unix. (Gradescope's base image may hold more; setup.sh needs none of it.)
   Without Ubuntu's archive keyring on this machine, debootstrap runs with --no-check-gpg; apt
   inside the root then checks every later download with the keyring the root got.
2. **The zip.** It is unpacked into /autograder/source, run_autograder copied to
   /autograder/run_autograder, both scripts passed through dos2unix, as Gradescope does.
3. **setup.sh**, the zip's own, unchanged: `apt-get update && bash /autograder/source/setup.sh`,
   then apt's and /tmp's files removed. PyTorch's CPU index, which this machine may not reach, is
   replaced by a local simple index holding the same wheel (AUTOGRADER_TORCH_INDEX; the wheel's
   sha256 is checked against the lock here, and again by pip); where this machine reaches PyPI
   through a proxy with its own certificate authority (PIP_CERT here, or --ca-bundle), pip inside
   is given that bundle (PIP_CERT, which pip reads anyway): nothing else differs.
4. **Two submissions**, each on a fresh copy of the image (an overlay, as a container is):
   the solution notebook must earn every point, the release notebook none.

Every command inside the root runs chrooted, as root, with a clean environment, in private mount
and PID namespaces (/proc, /dev/pts, /dev/shm and a read-only /sys mounted there; no cgroup is
mounted, as in a container that delegates none); the namespaces end with it, and every process in
them. Printed (and written to --json): the time of each step, the root's size before and after
setup.sh and /autograder/venv's, the Python setup.sh chose, each submission's score and what its
results say of the sandbox. Exit status 0 when both grades are right.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

MIRROR = "http://archive.ubuntu.com/ubuntu"
SOURCES = """\
deb http://archive.ubuntu.com/ubuntu/ jammy main restricted universe multiverse
deb http://archive.ubuntu.com/ubuntu/ jammy-updates main restricted universe multiverse
deb http://archive.ubuntu.com/ubuntu/ jammy-backports main restricted universe multiverse
deb http://security.ubuntu.com/ubuntu/ jammy-security main restricted universe multiverse
"""
KEYRING = Path("/usr/share/keyrings/ubuntu-archive-keyring.gpg")
GRADESCOPE_LAYER = ("apt-get update && apt-get install -y curl unzip dos2unix && apt-get clean "
                    "&& rm -rf /var/lib/apt/lists/* /tmp/* /var/tmp/*")
UNPACK = ("mkdir -p /autograder/source && unzip -n -d /autograder/source /tmp/autograder.zip "
          "&& cp /autograder/source/run_autograder /autograder/run_autograder "
          "&& dos2unix /autograder/run_autograder /autograder/source/setup.sh && chmod +x /autograder/run_autograder")
SETUP = ("cd /autograder && apt-get update && bash /autograder/source/setup.sh && apt-get clean "
         "&& rm -rf /var/lib/apt/lists/* /tmp/* /var/tmp/*")
ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
       "DEBIAN_FRONTEND": "noninteractive"}
LOCAL = "/mnt/local"  # inside the root, during setup.sh: the torch index and the CA bundle


def in_root(root: Path, script: str, *, log: Path, binds: tuple[tuple[Path, str], ...] = (),
            env: dict | None = None, overlay: tuple[Path, Path] | None = None, timeout: float = 3600) -> float:
    """Run the bash `script` chrooted in `root` (see the module docstring); its output appended to
    `log`. `binds` are (host folder, path inside) mounted read-only; `overlay` (upper, work) runs it
    on a copy of `root` whose changes go to `upper`. Returns its seconds; a failure raises, naming
    the log."""
    target = root
    mounts = []
    if overlay:
        upper, work = overlay
        target = upper.parent / "merged"
        target.mkdir(exist_ok=True)
        mounts.append(f"mount -t overlay overlay -o lowerdir={root},upperdir={upper},workdir={work} {target}")
    mounts += [f"mount -t proc proc {target}/proc",
               f"mount -t devpts -o newinstance,ptmxmode=0666 devpts {target}/dev/pts",
               f"mount -t tmpfs tmpfs {target}/dev/shm",
               f"mount -t sysfs -o ro sysfs {target}/sys"]
    for host, inside in binds:
        mounts += [f"mkdir -p {target}{inside}", f"mount --bind {host} {target}{inside}",
                   f"mount -o remount,bind,ro {target}{inside}"]
    variables = " ".join(f"{k}={shlex.quote(v)}" for k, v in {**ENV, **(env or {})}.items())
    inner = " && ".join(mounts) + f" && exec env -i {variables} chroot {target} bash -c {shlex.quote(script)}"
    started = time.perf_counter()
    with open(log, "a") as out:
        out.write(f"\n### {script}\n")
        out.flush()
        proc = subprocess.run(["unshare", "--mount", "--pid", "--fork", "--propagation", "private", "bash", "-c", inner],
                              stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
    if proc.returncode != 0:
        raise SystemExit(f"failed (exit {proc.returncode}) in the root: {script}\nthe log: {log}\n"
                         + log.read_text(errors="replace")[-4000:])
    return time.perf_counter() - started


def size(path: Path) -> int:
    """Bytes on disk under `path` (du), on its own file system only."""
    return int(subprocess.run(["du", "-sx", "--block-size=1", str(path)], capture_output=True, text=True,
                              check=True).stdout.split()[0])


def torch_wheel(wheels: list[Path], lock_entry) -> Path:
    """The wheel in `wheels` whose sha256 is the lock's torch hash: the same file as PyTorch's index."""
    version = lock_entry.version
    for folder in wheels:
        for wheel in sorted(folder.glob(f"torch-{version}-cp311-cp311-*.whl")):
            digest = "sha256:" + hashlib.sha256(wheel.read_bytes()).hexdigest()
            if digest in lock_entry.hashes:
                return wheel
    raise SystemExit(f"no torch-{version}-cp311 wheel with the lock's sha256 in {', '.join(map(str, wheels)) or '(none)'}: "
                     f"pip download --no-deps torch=={version} --index-url https://download.pytorch.org/whl/cpu "
                     "--python-version 3.11 --only-binary=:all: -d DIR, then --wheels DIR")


def torch_index(wheel: Path, into: Path) -> Path:
    """A local simple index (PEP 503) holding `wheel` alone: into/torch/index.html and the file."""
    folder = into / "torch"
    folder.mkdir(parents=True)
    shutil.copy(wheel, folder / wheel.name)
    digest = hashlib.sha256((folder / wheel.name).read_bytes()).hexdigest()
    quoted = wheel.name.replace("+", "%2B")
    (folder / "index.html").write_text(f'<!DOCTYPE html>\n<html><body><a href="{quoted}#sha256={digest}">'
                                       f"{wheel.name}</a></body></html>\n")
    return into


def submit(root: Path, work: Path, *, name: str, notebook: Path, log: Path) -> dict:
    """Grade `notebook` as one Gradescope submission on a fresh overlay of the image; its results.json."""
    upper, scratch = work / name / "upper", work / name / "work"
    (upper / "autograder" / "submission").mkdir(parents=True)
    scratch.mkdir(parents=True)
    shutil.copy(notebook, upper / "autograder" / "submission" / notebook.name)
    seconds = in_root(root, "cd /autograder && /autograder/run_autograder", log=log, overlay=(upper, scratch))
    data = json.loads((upper / "autograder" / "results" / "results.json").read_text())
    submission = next((t for t in data.get("tests", []) if t["name"] == "Submission"), {})
    return {"seconds": round(seconds, 1), "score": data.get("score"),
            "max_score": sum(t.get("max_score", 0) for t in data.get("tests", [])),
            "submission_status": submission.get("status"), "submission_output": submission.get("output", ""),
            "unsandboxed": "unsandboxed" in json.dumps(data)}


def check(args) -> dict:
    from autograder import requirements_lock
    from autograder.gradescope import build

    if os.geteuid() != 0:
        raise SystemExit("needs root (debootstrap, chroot, mounts)")
    for tool in ("debootstrap", "unshare", "chroot", "unzip", "du"):
        if not shutil.which(tool):
            raise SystemExit(f"needs {tool} (apt-get install debootstrap)")
    lock = requirements_lock.read()
    folders = [Path(p) for p in (args.wheels or os.environ.get("PIP_FIND_LINKS", "")).split() if Path(p).is_dir()]
    wheel = torch_wheel(folders, lock["torch"])
    work = Path(args.workdir or tempfile.mkdtemp(prefix="course-image-", dir="/var/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    root, log = work / "root", work / "log.txt"
    report = {"assignment": args.assignment, "load_average_before": os.getloadavg(), "log": str(log)}
    try:
        zip_path = Path(args.zip) if args.zip else build(args.assignment, work / "zip")
        report["zip_mib"] = round(zip_path.stat().st_size / 2**20, 1)
        gpg = [f"--keyring={KEYRING}"] if KEYRING.is_file() else ["--no-check-gpg"]
        report["debootstrap_gpg"] = gpg[0]
        started = time.perf_counter()
        with open(log, "a") as out:
            subprocess.run(["debootstrap", "--variant=minbase", "--components=main,universe", *gpg, "jammy",
                            str(root), MIRROR], stdout=out, stderr=subprocess.STDOUT, check=True)
        report["debootstrap_seconds"] = round(time.perf_counter() - started, 1)
        (root / "etc" / "apt" / "sources.list").write_text(SOURCES)
        report["base_layer_seconds"] = round(in_root(root, GRADESCOPE_LAYER, log=log), 1)
        report["base_image_bytes"] = size(root)
        shutil.copy(zip_path, root / "tmp" / "autograder.zip")
        in_root(root, UNPACK, log=log)
        local = work / "local"
        torch_index(wheel, local / "torch-index")
        env = {"AUTOGRADER_TORCH_INDEX": f"file://{LOCAL}/torch-index"}
        if args.ca_bundle:
            shutil.copy(args.ca_bundle, local / "ca-bundle.crt")
            env["PIP_CERT"] = f"{LOCAL}/ca-bundle.crt"
        report["pip_cert"] = env.get("PIP_CERT")
        before = log.stat().st_size
        report["before_setup_bytes"] = size(root)
        report["setup_seconds"] = round(in_root(root, SETUP, log=log, binds=((local, LOCAL),), env=env), 1)
        setup_log = log.read_text(errors="replace")[before:]
        report["python"] = next((line for line in setup_log.splitlines() if line.startswith("setup.sh: grading with")),
                                None)
        report["image_bytes"] = size(root)
        report["venv_bytes"] = size(root / "autograder" / "venv")
        notebook = next((REPO / "solutions" / args.assignment).glob("*.ipynb"))
        release = next((REPO / "notebooks" / args.assignment).glob("*.ipynb"))
        report["solution"] = submit(root, work, name="solution", notebook=notebook, log=log)
        report["release"] = submit(root, work, name="release", notebook=release, log=log)
        report["load_average_after"] = os.getloadavg()
    finally:
        if not args.keep:
            shutil.rmtree(work / "root", ignore_errors=True)
            for name in ("solution", "release", "local", "zip"):
                shutil.rmtree(work / name, ignore_errors=True)
    solution, release = report["solution"], report["release"]
    report["ok"] = (solution["score"] == solution["max_score"] > 0 and release["score"] == 0
                    and report["python"] is not None)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", default="07")
    parser.add_argument("--zip", help="an autograder zip of the assignment (default: built now, as make gradescope does)")
    parser.add_argument("--wheels", help="folders (space-separated) holding torch's CPU wheel of the lock "
                        "(default: PIP_FIND_LINKS)")
    parser.add_argument("--ca-bundle", default=os.environ.get("PIP_CERT"),
                        help="the certificate bundle pip needs to reach PyPI from here (default: PIP_CERT)")
    parser.add_argument("--workdir", help="where the root and the log go (default: a new folder in /var/tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the root and the overlays")
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    report = check(args)
    for key in ("base_image_bytes", "before_setup_bytes", "image_bytes", "venv_bytes"):
        report[key.replace("_bytes", "_gib")] = round(report.pop(key) / 2**30, 2)
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
