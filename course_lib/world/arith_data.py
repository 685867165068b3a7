"""A seeded generator of GSM8K-style arithmetic word problems: the course's embedded data set.

Every problem is a `{"question": str, "answer": str}` record shaped exactly like GSM8K: the
answer is one line per reasoning step with calculator notes `<<a+b=c>>c` and a last line
`#### N`. Problems take one to three steps (add, subtract, multiply by a small factor) over
small non-negative integers, and come in three scenario families with several phrasings each:

- `possession`: someone has things, buys / loses / gives away / multiplies them;
- `shopping`: items at a price, an extra purchase, change from a bill;
- `comparison`: a second person has more / fewer / k times as many, then the total.

So that the same loader, prompt and reward serve it and real GSM8K alike, the splits live in
`data/arith/{train,test}.jsonl` and are read with `course_lib.gsm8k.load_gsm8k` (or
`load_problems("arith", split)`).

Everything is driven by one `random.Random(seed)`: `generate_splits` gives identical output
on every call and every machine, and no question appears in both splits.
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

NAMES_HE = ["Tom", "Sam", "Ben", "Leo", "Max", "Omar", "Ravi", "Hugo", "Ivan", "Jack",
            "Kofi", "Luis", "Noah", "Paul", "Yuki", "Adam", "Carl", "Dan", "Eli", "Finn"]
NAMES_SHE = ["Amy", "Mia", "Zoe", "Lily", "Nora", "Emma", "Rosa", "Sara", "Hana", "Ines",
             "Jane", "Kate", "Lena", "Maya", "Nina", "Olga", "Pia", "Ruth", "Tara", "Vera"]
OBJECTS = ["apples", "marbles", "stickers", "books", "pencils", "cookies", "stamps", "shells",
           "coins", "cards", "eggs", "flowers", "toys", "crayons", "candies", "balloons",
           "buttons", "rocks", "beads", "oranges"]
CONTAINERS = ["boxes", "bags", "packs", "jars", "baskets", "crates"]
ITEMS = [("pens", "pen"), ("notebooks", "notebook"), ("cakes", "cake"), ("tickets", "ticket"),
         ("shirts", "shirt"), ("plants", "plant"), ("cups", "cup"), ("kites", "kite")]
EXTRAS = ["a hat", "a bag", "a book", "a lamp", "a ball", "a scarf", "a clock", "a game"]
MULT_WORDS = {2: "doubles", 3: "triples"}

# Surface templates. Every placeholder is filled from the same dict of fields; a test checks
# that each template formats with the fields its family provides.
TEMPLATES: dict[str, list[str]] = {
    "start_plain": [
        "{name} has {a} {obj}.",
        "{name} owns {a} {obj}.",
        "There are {a} {obj} in {name}'s room.",
        "{name} collected {a} {obj}.",
    ],
    "start_groups": [
        "{name} has {n} {cont} with {k} {obj} in each.",
        "{name} buys {n} {cont} of {obj}. Each one holds {k} {obj}.",
        "There are {n} {cont} in {name}'s room, and every one has {k} {obj}.",
    ],
    "add": [
        "{Pron} buys {b} more {obj}.",
        "A friend gives {obj_pron} {b} more {obj}.",
        "{Pron} finds {b} more {obj}.",
        "Then {pron} gets {b} {obj} as a gift.",
    ],
    "sub": [
        "{Pron} gives {b} {obj} to {other}.",
        "{Pron} loses {b} of the {obj}.",
        "{Pron} uses {b} {obj}.",
        "Then {other} takes {b} {obj}.",
    ],
    "mul": [
        "Then the number of {obj} {pron} has {mult_word}.",
        "Later {pron} has {k} times as many {obj} as before.",
        "{Pron} ends up with {k} times that many {obj}.",
    ],
    "ask_possession": [
        "How many {obj} does {name} have now?",
        "How many {obj} does {name} have in the end?",
        "How many {obj} are there now?",
    ],
    "shop_items": [
        "{name} buys {n} {items} for ${p} each.",
        "{name} buys {n} {items}. Each {item} costs ${p}.",
        "A {item} costs ${p}. {name} buys {n} of them.",
    ],
    "shop_extra": [
        "{Pron} also buys {extra} for ${q}.",
        "Then {pron} pays ${q} for {extra}.",
    ],
    "shop_bill": [
        "{Pron} pays with a ${bill} bill.",
        "{Pron} gives the seller ${bill}.",
    ],
    "ask_spend": [
        "How much money does {name} spend?",
        "How many dollars does {name} spend in total?",
    ],
    "ask_change": [
        "How much change does {name} get?",
        "How many dollars does {pron} get back?",
    ],
    "cmp_start": [
        "{name} has {a} {obj}.",
        "{name} picked {a} {obj}.",
    ],
    "cmp_more": [
        "{other} has {b} more {obj} than {name}.",
        "{other} has {b} {obj} more than {name} does.",
    ],
    "cmp_fewer": [
        "{other} has {b} fewer {obj} than {name}.",
        "{other} has {b} {obj} less than {name} does.",
    ],
    "cmp_times": [
        "{other} has {k} times as many {obj} as {name}.",
    ],
    "ask_other": [
        "How many {obj} does {other} have?",
    ],
    "ask_together": [
        "How many {obj} do they have together?",
        "How many {obj} do {name} and {other} have in total?",
    ],
    "ask_left_together": [
        "They give {c} of them to {third}. How many {obj} do they have left?",
    ],
}

MAX_VALUE = 300  # no intermediate or final result exceeds this


def _note(x: int, op: str, y: int) -> tuple[int, str]:
    """`x op y = <<x op y = r>>r` in GSM8K's calculator-note style, and the result r."""
    r = {"+": x + y, "-": x - y, "*": x * y}[op]
    return r, f"{x} {op} {y} = <<{x}{op}{y}={r}>>{r}"


def _people(rng: random.Random) -> dict:
    if rng.random() < 0.5:
        name, pron, obj_pron = rng.choice(NAMES_HE), "he", "him"
    else:
        name, pron, obj_pron = rng.choice(NAMES_SHE), "she", "her"
    others = [n for n in NAMES_HE + NAMES_SHE if n != name]
    other, third = rng.sample(others, 2)
    return {"name": name, "pron": pron, "Pron": pron.capitalize(), "obj_pron": obj_pron,
            "other": other, "third": third}


def _fill(rng: random.Random, key: str, fields: dict) -> str:
    return rng.choice(TEMPLATES[key]).format(**fields)


def _possession(rng: random.Random, steps: int) -> tuple[list[str], list[str], int]:
    f = _people(rng)
    f["obj"], f["cont"] = rng.choice(OBJECTS), rng.choice(CONTAINERS)
    q, sol = [], []
    remaining = steps
    if rng.random() < 0.3:
        f["n"], f["k"] = rng.randint(2, 9), rng.randint(2, 12)
        q.append(_fill(rng, "start_groups", f))
        x, expr = _note(f["n"], "*", f["k"])
        sol.append(f"{f['name']} has {expr} {f['obj']}.")
        remaining -= 1
    else:
        x = f["a"] = rng.randint(2, 80)
        q.append(_fill(rng, "start_plain", f))
    for _ in range(remaining):
        ops = (["add"] if x < MAX_VALUE - 10 else []) + (["sub"] if x >= 2 else [])
        ops += ["mul"] if x <= 40 else []
        op = rng.choice(ops)
        if op == "add":
            f["b"] = rng.randint(1, min(60, MAX_VALUE - x))
            q.append(_fill(rng, "add", f))
            x, expr = _note(x, "+", f["b"])
        elif op == "sub":
            f["b"] = rng.randint(1, min(x - 1, 90))
            q.append(_fill(rng, "sub", f))
            x, expr = _note(x, "-", f["b"])
        else:
            k = rng.choice([k for k in (2, 3, 4, 5) if x * k <= MAX_VALUE])
            f["k"], f["mult_word"] = k, MULT_WORDS.get(k, "")
            keys = TEMPLATES["mul"] if k in MULT_WORDS else TEMPLATES["mul"][1:]
            q.append(rng.choice(keys).format(**f))
            x, expr = _note(x, "*", k)
        sol.append(f"{f['name']} now has {expr} {f['obj']}.")
    q.append(_fill(rng, "ask_possession", f))
    return q, sol, x


def _shopping(rng: random.Random, steps: int) -> tuple[list[str], list[str], int]:
    f = _people(rng)
    f["items"], f["item"] = rng.choice(ITEMS)
    f["n"], f["p"] = rng.randint(2, 9), rng.randint(2, 15)
    q = [_fill(rng, "shop_items", f)]
    cost, expr = _note(f["n"], "*", f["p"])
    sol = [f"The {f['items']} cost {expr} dollars."]
    if steps >= 2:
        f["extra"], f["q"] = rng.choice(EXTRAS), rng.randint(1, 40)
        q.append(_fill(rng, "shop_extra", f))
        cost, expr = _note(cost, "+", f["q"])
        sol.append(f"{f['Pron']} spends {expr} dollars in total.")
    if steps >= 3:
        f["bill"] = rng.choice([b for b in (20, 50, 100, 200) if b > cost] or [300])
        q.append(_fill(rng, "shop_bill", f))
        q.append(_fill(rng, "ask_change", f))
        value, expr = _note(f["bill"], "-", cost)
        sol.append(f"{f['Pron']} gets {expr} dollars back.")
    else:
        q.append(_fill(rng, "ask_spend", f))
        value = cost
    return q, sol, value


def _comparison(rng: random.Random, steps: int) -> tuple[list[str], list[str], int]:
    f = _people(rng)
    f["obj"] = rng.choice(OBJECTS)
    a = f["a"] = rng.randint(3, 70)
    q = [_fill(rng, "cmp_start", f)]
    kind = rng.choice(["more", "fewer", "times"] if a <= 40 else ["more", "fewer"])
    if kind == "more":
        f["b"] = rng.randint(1, 50)
        q.append(_fill(rng, "cmp_more", f))
        other, expr = _note(a, "+", f["b"])
    elif kind == "fewer":
        f["b"] = rng.randint(1, a - 1)
        q.append(_fill(rng, "cmp_fewer", f))
        other, expr = _note(a, "-", f["b"])
    else:
        f["k"] = rng.choice([k for k in (2, 3, 4) if a * k <= 2 * MAX_VALUE // 3])
        q.append(_fill(rng, "cmp_times", f))
        other, expr = _note(a, "*", f["k"])
    sol = [f"{f['other']} has {expr} {f['obj']}."]
    if steps == 1:
        q.append(_fill(rng, "ask_other", f))
        return q, sol, other
    total, expr = _note(a, "+", other)
    sol.append(f"Together they have {expr} {f['obj']}.")
    if steps == 2:
        q.append(_fill(rng, "ask_together", f))
        return q, sol, total
    f["c"] = rng.randint(1, min(total - 1, 90))
    q.append(_fill(rng, "ask_left_together", f))
    left, expr = _note(total, "-", f["c"])
    sol.append(f"They have {expr} {f['obj']} left.")
    return q, sol, left


FAMILIES = {"possession": _possession, "shopping": _shopping, "comparison": _comparison}
STEP_WEIGHTS = {1: 0.3, 2: 0.4, 3: 0.3}
FAMILY_WEIGHTS = {"possession": 0.5, "shopping": 0.25, "comparison": 0.25}


def generate_problem(rng: random.Random, steps: int | None = None, family: str | None = None) -> dict:
    """One problem `{"question", "answer"}`; `steps` in 1..3 and `family` drawn when None.

    The answer holds one line per step (a calculator note each) and ends with `#### N`.
    """
    if steps is None:
        steps = rng.choices(list(STEP_WEIGHTS), weights=list(STEP_WEIGHTS.values()))[0]
    if family is None:
        family = rng.choices(list(FAMILY_WEIGHTS), weights=list(FAMILY_WEIGHTS.values()))[0]
    if steps not in (1, 2, 3):
        raise ValueError(f"steps must be 1, 2 or 3, got {steps}")
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; choose from {sorted(FAMILIES)}")
    question, solution, value = FAMILIES[family](rng, steps)
    if len(solution) != steps or value < 0:  # a generator bug, never a data-dependent case
        raise AssertionError(f"{family} made {len(solution)} steps (wanted {steps}), value {value}")
    return {"question": " ".join(question), "answer": "\n".join(solution + [f"#### {value}"])}


def generate_unique(rng: random.Random, n: int, exclude: set[str] = frozenset()) -> list[dict]:
    """`n` problems with distinct questions, none of them in `exclude`."""
    seen, out = set(exclude), []
    tries = 0
    while len(out) < n:
        tries += 1
        if tries > 50 * n + 1000:
            raise RuntimeError(f"could only make {len(out)} distinct problems of {n} requested")
        p = generate_problem(rng)
        if p["question"] in seen:
            continue
        seen.add(p["question"])
        out.append(p)
    return out


def generate_splits(n_train: int = 10_000, n_test: int = 1_000, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """Deterministic train and test lists with no question in common."""
    rng = random.Random(seed)
    both = generate_unique(rng, n_train + n_test)
    return both[n_test:], both[:n_test]


_NOTE = re.compile(r"<<([^=<>]+)=([^<>]+)>>")


def check_calculator_notes(answer: str) -> list[str]:
    """Every `<<expr=value>>` whose expression does not evaluate to its value (empty: all right)."""
    bad = []
    for expr, value in _NOTE.findall(answer):
        if not re.fullmatch(r"[\d+\-*/ ().]+", expr):
            bad.append(f"{expr}={value} (not plain arithmetic)")
        elif eval(expr) != int(value):  # noqa: S307 (digits and + - * / only, checked above)
            bad.append(f"{expr}={value}")
    return bad


def write_jsonl(records: list[dict], path: str | os.PathLike) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def plain_qa_text(problem: dict) -> str:
    """A problem as base-model pretraining text: no r1_zero tags, `Question:` / `Answer:` form."""
    return f"Question: {problem['question']}\nAnswer: {problem['answer']}"


def arithmetic_fact(rng: random.Random) -> str:
    """A bare equation like `12 + 7 = 19` over the same ranges the problems use."""
    op = rng.choice("+-*")
    if op == "+":
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        return f"{a} + {b} = {a + b}"
    if op == "-":
        a = rng.randint(0, 150)
        b = rng.randint(0, a)
        return f"{a} - {b} = {a - b}"
    a, b = rng.randint(0, 40), rng.randint(2, 12)
    if rng.random() < 0.5:
        a, b = b, a
    return f"{a} * {b} = {a * b}"
