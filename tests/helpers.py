"""Helpers the tests share: the course tokenizer, small random Qwen2 models, problems, a CLI runner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

from autograder.mistakes import function_from as fn_from  # a notebook cell's function, as the judge pickles it

REPO = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- random tensors for property tests
def _property_strategies():
    from hypothesis import settings
    from hypothesis import strategies as st

    return (settings(max_examples=40, deadline=None), st.tuples(st.integers(1, 4), st.integers(1, 6), st.integers(1, 9)),
            st.integers(0, 2**31 - 1))


PROPERTY_SETTINGS, shapes, seeds = _property_strategies()  # hypothesis settings; (B, T, V) shapes; seeds


def randn(*shape, seed=0, dtype=torch.float32, scale=1.0):
    """Gaussian values drawn in float64 (so every dtype sees the same numbers), then cast."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def rand_mask(*shape, seed=0, p=0.6):
    g = torch.Generator().manual_seed(seed + 1)
    return torch.rand(*shape, generator=g) < p


def _response_runs():
    from hypothesis import strategies as st

    @st.composite
    def runs(draw, max_B=5, max_T=12):
        """(T, [(start, length)] per row): one contiguous response per row, of any length (0 included)."""
        B, T = draw(st.integers(1, max_B)), draw(st.integers(1, max_T))
        spans = []
        for _ in range(B):
            n = draw(st.integers(0, T))
            spans.append((draw(st.integers(0, T - n)), n))
        return T, spans

    return runs


response_runs = _response_runs()  # a hypothesis strategy of response masks as (T, spans)


def mask_of(T: int, spans) -> torch.Tensor:
    """(B, T) bool: row b is 1 on columns start .. start + length - 1 of its (start, length)."""
    m = torch.zeros(len(spans), T, dtype=torch.bool)
    for b, (start, n) in enumerate(spans):
        m[b, start:start + n] = True
    return m


def with_garbage(x: torch.Tensor, mask: torch.Tensor, seed: int) -> torch.Tensor:
    """x with values of magnitude 5 to 50 where the mask is 0."""
    garbage = randn(*x.shape, seed=seed + 7, dtype=torch.float64, scale=20.0)
    garbage = torch.where(garbage >= 0, garbage + 5.0, garbage - 5.0).to(x.dtype)
    return torch.where(mask, x, garbage)


def log_prob_pair(run, seed: int, dtype=torch.float64, scale: float = 0.3):
    """(train, rollout, mask) for a response run (T, spans): log-probs below 0 whose difference
    train - rollout is N(0, scale^2) on the response, and garbage (`with_garbage`) elsewhere."""
    T, spans = run
    mask = mask_of(T, spans)
    rollout = -randn(len(spans), T, seed=seed, dtype=torch.float64).abs() - 0.1
    train = rollout + randn(len(spans), T, seed=seed + 1, dtype=torch.float64, scale=scale)
    return with_garbage(train, mask, seed).to(dtype), with_garbage(rollout, mask, seed + 3).to(dtype), mask


def course_tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(REPO / "data" / "tokenizer", local_files_only=True)


def random_qwen2(tokenizer, seed: int = 0, hidden: int = 32, layers: int = 2):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=1,
                      max_position_embeddings=512, tie_word_embeddings=True,
                      pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    return Qwen2ForCausalLM(cfg).eval()


def largest_gap(a: torch.nn.Module, b: torch.nn.Module) -> float:
    """The largest |difference| between the parameters of two modules of one architecture."""
    return max((p - q).abs().max().item() for p, q in zip(a.parameters(), b.parameters()))


def save_random_model(path: Path, seed: int = 0) -> Path:
    tok = course_tokenizer()
    model = random_qwen2(tok, seed)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def problems(n: int, split: str = "train") -> list[dict]:
    from course_lib import load_problems

    return load_problems("arith", split)[:n]


def run_cli(args: list[str], cwd: Path, timeout: int = 300, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, **kw)


def slot_leftovers() -> list[str]:
    """Processes still in, and cgroups left of, the slots this process made (a submission's kernel,
    its judge's runners, its daemons: `autograder.limits.Slot`)."""
    from autograder.limits import slot_prefix

    prefix = slot_prefix()
    out = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and prefix in (entry / "cgroup").read_text():
                out.append(f"process {entry.name}: {(entry / 'cmdline').read_bytes()[:80]!r}")
        except OSError:
            pass
    for root in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup/pids")):
        out += [f"cgroup {p}" for p in root.rglob(f"{prefix}*")] if root.is_dir() else []
    return out


# ---------------------------------------------------------------- graded functions through the judge
_JUDGED: dict = {}


def judged(suite: str, versions: dict[str, str]) -> dict[str, dict]:
    """{label: the judge's full report} for each version (a notebook cell's source defining the
    graded function), run through the real judge on the hidden cases (made when missing or
    stale), in bulk: the versions in turn in one sandboxed runner process. Cached per process."""
    import cloudpickle

    from autograder.cases import ensure_cases
    from autograder.judge import judge
    from autograder.suite_api import load_suite

    key = (suite, tuple(sorted(versions.items())))
    if key not in _JUDGED:
        ensure_cases(suite)
        graded = load_suite(suite).GRADED
        reports = judge(suite, [cloudpickle.dumps(fn_from(src, graded)) for src in versions.values()])
        _JUDGED[key] = dict(zip(versions, reports))
    return _JUDGED[key]


def named(report: dict) -> list[str]:
    """The names of the known mistakes a report's recognition gave (alternatives included)."""
    from autograder.recognition import names

    return [n for m in report.get("mistakes", []) for n in names(m)]


def recognition_note(suite: str, label: str) -> str:
    """Why a mistake may not be named on the hidden draw: its signature there (the hidden case file's)."""
    from autograder.cases import load_cases

    entry = load_cases(suite).get("mistakes", {}).get(label)
    if entry is None:
        return "the hidden case file holds no signature of it"
    return f"its signature on this draw: {sorted(entry['signature']) or 'empty'}; near ties: {entry['near_tie']}"


def visible_check(lesson: str, grade_id: str):
    """The visible checks of the graded cell `grade_id` of lessons/`lesson`, built as the solution
    notebook is: (a namespace holding what the cells before it define, the check's code compiled),
    every hidden check left out. Run the check with `exec(code, {**namespace, NAME: fn})`; set
    NBGRADER_EXECUTION first to build the namespace as while grading (the lessons' small runs)."""
    import re

    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from build_solutions import build_notebook
    finally:
        sys.path.remove(str(REPO / "scripts"))
    path = REPO / "lessons" / lesson
    cells = [c for c in build_notebook(path).cells if c.cell_type == "code"]
    test = next(i for i, c in enumerate(cells) if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    sources = [re.sub(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", "", c.source, flags=re.S) for c in cells]
    namespace = {"__name__": "__main__"}
    exec(compile("\n\n".join(sources[:test]), str(path), "exec"), namespace)
    return namespace, compile(sources[test], str(path), "exec")


def blind_versions(suite: str) -> dict[str, str]:
    """{"blind:<label>": source} of the blind set's entries for `suite` (`tests/blind_mistakes.py`)."""
    from tests.blind_mistakes import BLIND

    return {f"blind:{e['label']}": e["source"] for e in BLIND if e["function"] == suite}


def judged_all(suite: str) -> dict[str, dict]:
    """The judge's report of every version of `corpus` and `blind_versions`, by label: one judge run
    per suite and process for the corpus and the blind set alike."""
    return judged(suite, {**corpus(suite), **blind_versions(suite)})


def corpus(suite: str) -> dict[str, str]:
    """{label: a notebook cell's source} of every version of a graded function its grader.py holds:
    "correct:<label>" for CORRECT, "mistake:<name>" for the catalogue's MISTAKES, "same:<label>" for
    SAME_MISTAKES (a mistake written another way)."""
    from autograder.mistakes import catalogue
    from autograder.suite_api import load_suite

    module = load_suite(suite)
    return {**{f"correct:{k}": v for k, v in module.CORRECT.items()},
            **{f"mistake:{k}": m.source for k, m in catalogue(suite).items()},
            **{f"same:{k}": src for k, (_, src) in getattr(module, "SAME_MISTAKES", {}).items()}}


def check_correct_version(suite: str, label: str) -> None:
    """Correct version `label` of the suite earns full marks through the real judge, and no known
    mistake is named (its largest share of a tolerance used is printed)."""
    from autograder.report import format_report

    report = judged_all(suite)[f"correct:{label}"]
    margins = [c.get("margin", 0.0) for c in report["cases"]]
    print(f"{suite}/{label}: largest share of a tolerance used {max(margins, default=0):.3g}")
    assert report["passed"], f"{suite}/{label} is correct but failed:\n{format_report(report, numbers=True)}"
    assert not named(report), f"{suite}/{label} is correct but was named {named(report)}"


def check_mistake(suite: str, label: str) -> None:
    """Known mistake `label` of the suite (or "same:<label>", a mistake of SAME_MISTAKES written
    another way) loses its points through the real judge, fails at least the cases its catalogue
    names, and the judge names it (unless the catalogue marks it not recognisable: no output of it
    tells it) and no mistake it does not make (an alternative that no case tells apart from it
    aside), which shows that recognition is about behaviour, not the code's text."""
    from autograder.mistakes import catalogue
    from autograder.recognition import names
    from autograder.report import format_report
    from autograder.suite_api import load_suite

    mistakes = catalogue(suite)
    same = getattr(load_suite(suite), "SAME_MISTAKES", {})
    unknown = sorted({name for name, _ in same.values()} - set(mistakes))
    assert not unknown, f"{suite}: SAME_MISTAKES of mistakes its catalogue lacks: {unknown}"
    other = label.startswith("same:")
    mistake = same[label[5:]][0] if other else label
    report = judged_all(suite)[label if other else f"mistake:{label}"]
    assert not report["passed"], f"{suite}/{label} is wrong but passed every hidden case"
    failed = {c["case"] for c in report["cases"] if not c["ok"]}
    missing = [c for c in mistakes[mistake].cases if c not in failed] if not report.get("problem") else []
    assert not missing, f"{suite}/{label} should fail {missing}:\n{format_report(report, numbers=True)}"
    if mistakes[mistake].recognisable:
        assert mistake in named(report), \
            f"{suite}/{label} is not named {mistake} ({recognition_note(suite, mistake)}):\n{format_report(report)}"
    wrong = [m["name"] for m in report.get("mistakes", []) if mistake not in names(m)]
    assert not wrong, f"{suite}/{label} is also named {wrong}, a mistake it does not make:\n{format_report(report)}"


_DRAWN: dict = {}


def named_draw(suite: str, seed: int) -> tuple[list[dict], dict, dict]:
    """(cases, {mistake: signature}, {mistake: its results}) of the suite's draw `seed`, made as
    grading makes them (rounding bounds and signatures), for the mistakes outputs can recognise.
    The practice draw is read from `seeded_cases` (made once for the kits and `make check`). Kept
    for the last suite asked in this process: its many-draws check and the blind set's draws share
    them (one xdist group per suite)."""
    from autograder.cases import make_suite_cases, seeded_cases
    from autograder.mistakes import catalogue
    from autograder.signatures import draw_signatures, mistake_results
    from autograder.suite_api import PRACTICE_SEED, load_suite

    if (suite, seed) not in _DRAWN:
        if any(key[0] != suite for key in _DRAWN):
            _DRAWN.clear()
        module = load_suite(suite)
        if seed == PRACTICE_SEED:
            shared = seeded_cases(suite, seed)
            cases, signatures = shared["cases"], shared["mistakes"]
            mistakes = catalogue(suite)
            results = {label: mistake_results(module, mistakes[label].source, cases) for label in signatures}
        else:
            cases = make_suite_cases(suite, seed, mistakes=False)["cases"]
            signatures, results = draw_signatures(suite, module, cases)
        _DRAWN[suite, seed] = cases, signatures, results
    return _DRAWN[suite, seed]


NAMED_DRAWS = 4  # the most draws on which check_many_draws also makes the mistakes' signatures and recognises them


def check_many_draws(suite: str, draws: int | None = None, named_draws: int | None = None) -> None:
    """On each of `draws` fresh draws of the suite's hidden cases (seeds 0 .. draws - 1; default: the
    grader.py's DRAWS, else 40), compared in this process, each correct version passes every case
    and each mistake of the catalogue fails every case it names: a grading run draws its cases with
    a fresh secret seed, so a tolerance must hold on every draw, not on the one a test saw, and a
    case meant to catch a mistake must catch it on every draw (a binary-reward case whose draw held
    no reward let two mistakes through in CI). On the first `named_draws` of them (default: the
    grader.py's NAMED_DRAWS, else one draw in ten, at least 1 and at most NAMED_DRAWS, so that the
    suites whose cases run models, tested on few draws, pay for their mistakes' float64 runs once),
    each mistake's signature is made as the case generator makes it, and recognition must name each
    mistake from its own outputs, and each of SAME_MISTAKES (the same mistake written another way)
    as its mistake; no other name may be given to a mistake's outputs but an alternative no case of
    the draw tells apart from it (printed). Mistakes run as in the judge
    (`autograder.signatures.references_hidden`: a reference the judge hides raises here too). Cases
    are compared first without their rounding bounds (tighter) and made again with them only where
    a version fails or a mistake fails a case it names (`autograder.cases.bounded_case`): the
    verdicts of grading's cases at the cost of the cases without bounds. The named draws are
    `named_draw`'s, which the blind set's check shares (the first is the practice draw)."""
    from autograder.cases import bounded_case, make_suite_cases
    from autograder.compare import compare
    from autograder.mistakes import catalogue
    from autograder.recognition import names as names_of
    from autograder.recognition import recognise
    from autograder.signatures import fails, mistake_results, passed_cases
    from autograder.suite_api import load_suite, run_case, suite_settings

    module = load_suite(suite)
    draws = getattr(module, "DRAWS", 40) if draws is None else draws
    if named_draws is None:
        named_draws = getattr(module, "NAMED_DRAWS", min(NAMED_DRAWS, max(1, draws // 10)))
    same_mistakes = getattr(module, "SAME_MISTAKES", {})

    def problems_of(fn, case) -> list:
        try:
            return compare(run_case(module, fn, case["inputs"]), case["expected"], {})
        except Exception as err:  # the judge records an error as a failed case
            return [repr(err)]

    settings = suite_settings(module)
    fns = {label: fn_from(src, module.GRADED) for label, src in module.CORRECT.items()}
    mistakes = catalogue(suite)
    failures, together = [], set()
    for seed in range(draws):
        if seed < named_draws:
            cases, signatures, results = named_draw(suite, seed)
        else:
            cases = make_suite_cases(suite, seed, mistakes=False, bounds=False)["cases"]
        bounded = {} if seed >= named_draws else {case["name"]: case for case in cases}

        def graded(case):  # the case as grading makes it
            if case["name"] not in bounded:
                bounded[case["name"]] = bounded_case(suite, case)
            return bounded[case["name"]]

        for case in cases:
            for label, fn in fns.items():
                problems = problems_of(fn, case) and problems_of(fn, graded(case))
                if problems:
                    failures.append(f"seed {seed}, {case['name']}, {label}: {problems}")
        by_name = {case["name"]: case for case in cases}
        if seed < named_draws:  # every mistake on every case, its signature, and recognition
            errors = [case["name"] for case in cases if case.get("error_case")]
            for label in results:
                groups = [names_of(m) for m in recognise(results[label], signatures, settings, error_cases=errors,
                                                         passed=passed_cases(module, results[label], cases))]
                if not any(label in g for g in groups):
                    failures.append(f"seed {seed}: mistake {label} is not named from its own outputs")
                failures += [f"seed {seed}: mistake {label} is also named {' or '.join(g)}" for g in groups
                             if label not in g]
                together |= {tuple(sorted((label, other))) for g in groups for other in g if other != label}
            for label, (name, src) in same_mistakes.items():
                got = mistake_results(module, src, cases)
                groups = [names_of(m) for m in recognise(got, signatures, settings, error_cases=errors,
                                                         passed=passed_cases(module, got, cases))]
                if not groups or any(name not in g for g in groups):
                    failures.append(f"seed {seed}: {label} is not named {name} alone (named: {groups})")
        else:
            results = {}
        for label, m in mistakes.items():
            got = results.get(label) or mistake_results(module, m.source, [by_name[n] for n in m.cases])
            failures += [f"seed {seed}: mistake {label} passes {name}" for name in m.cases
                         if not fails(got[name], by_name[name], settings)
                         or not fails(got[name], graded(by_name[name]), settings)]
    if together:
        print(f"{suite}: mistakes named together on some draw: {sorted(together)}")
    assert not failures, "\n".join(failures[:10])


# ---------------------------------------------------------------- batchers (notebook 14)
def _batch_requests():
    from hypothesis import strategies as st

    @st.composite
    def requests(draw, max_n=10):
        """(requests, eos rates, batch_size, salt) for a `course_lib.batching.SyntheticDecodeStep`:
        distinct prompts, max_tokens 1 to 20, eos rates 0 to 1 (eos id 7 of 64 tokens)."""
        n = draw(st.integers(0, max_n))
        prompts = draw(st.lists(st.lists(st.integers(0, 63), min_size=1, max_size=6), min_size=n, max_size=n,
                                unique_by=tuple))
        reqs = [{"prompt_ids": p, "max_tokens": draw(st.integers(1, 20))} for p in prompts]
        rates = [draw(st.sampled_from([0.0, 0.05, 0.2, 0.5, 1.0])) for _ in prompts]
        return reqs, rates, draw(st.integers(1, 5)), draw(st.integers(0, 2**31))

    return requests


batch_requests = _batch_requests()
BATCH_EOS = 7


def greedy_alone(requests, rates, salt) -> list[list[int]]:
    """Each request's tokens decoded by itself, one token at a time, on a fresh synthetic step."""
    from course_lib.batching import SyntheticDecodeStep

    outputs = []
    for r in requests:
        step = SyntheticDecodeStep(requests, slots=1, eos_id=BATCH_EOS, eos_rates=rates, salt=salt)
        out = [step.prefill(0, r["prompt_ids"])]
        while out[-1] != BATCH_EOS and len(out) < r["max_tokens"]:
            out += step.decode([0], [out[-1]])
        outputs.append(out)
    return outputs


def checked_batcher_run(fn, drawn, step_class=None):
    """(report, step) of batcher `fn` on a fresh synthetic step for `drawn` (from `batch_requests`),
    once the report's outputs are each request's greedy tokens alone and its counts and
    utilization are the step's own."""
    from course_lib.batching import SyntheticDecodeStep

    requests, rates, batch_size, salt = drawn
    step = (step_class or SyntheticDecodeStep)(requests, slots=batch_size, eos_id=BATCH_EOS, eos_rates=rates, salt=salt)
    got = fn(step, requests, batch_size, BATCH_EOS)
    assert got["outputs"] == greedy_alone(requests, rates, salt)
    assert got["prefills"] == step.prefills == len(requests)
    assert got["steps"] == step.decodes and got["slot_steps"] == step.fed == sum(len(o) - 1 for o in got["outputs"])
    assert got["utilization"] == (got["slot_steps"] / (got["steps"] * batch_size) if got["steps"] else 0.0)
    return got, step
