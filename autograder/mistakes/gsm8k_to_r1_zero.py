"""The known mistakes of `gsm8k_to_r1_zero` (notebook 01): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake


R1_BASE = r"""
    import re
    from course_lib.gsm8k import format_r1_zero_prompt, r1_zero_prompt_template
    def extract_gsm8k_answer(answer_text):
        m = re.search(r"####(?!.*####)\s*(.+?)\s*$", answer_text, re.DOTALL)
        if m is None:
            raise ValueError("no answer")
        return m.group(1).strip().replace(",", "")
    def gsm8k_to_r1_zero(example, template=None):
        text = example["answer"]
        cut = text.rfind("####")
        if cut < 0:
            raise ValueError("no answer")
        truth = extract_gsm8k_answer(text)
        reasoning = text[:cut].strip()
        QUESTION = example["question"]
        OUTPUT = f" {reasoning} </think> <answer> {truth} </answer>"
        return {"prompt": format_r1_zero_prompt(QUESTION, TEMPLATE), "output": OUTPUT, "ground_truth": TRUTH}
"""


def r1(question='example["question"]', output='f" {reasoning} </think> <answer> {truth} </answer>"', template="template",
       truth="truth", reasoning="text[:cut].strip()", check=True):
    """The reference's way with one part replaced (a mistake is one such replacement)."""
    src = R1_BASE.replace('QUESTION = example["question"]', f"QUESTION = {question}")
    src = src.replace('OUTPUT = f" {reasoning} </think> <answer> {truth} </answer>"', f"OUTPUT = {output}")
    src = src.replace("TEMPLATE)", f"{template})").replace("TRUTH}", f"{truth}}}")
    src = src.replace("reasoning = text[:cut].strip()", f"reasoning = {reasoning}")
    if not check:
        src = src.replace("""        if cut < 0:
            raise ValueError("no answer")
""", "").replace("""        if m is None:
            raise ValueError("no answer")
        return""", """        if m is None:
            return ""
        return""")
    return src


MISTAKES = {
    "question_stripped": Mistake(
        "strips the question before putting it in the prompt, where it goes in as it is",
        r1(question='example["question"].strip()'),
        ["whitespace_around_reasoning"]),
    "no_space_before_the_reasoning": Mistake(
        "leaves out the space before the reasoning in the output",
        r1(output='f"{reasoning} </think> <answer> {truth} </answer>"'),
        ["arith_record_0"]),
    "hash_line_left_in_the_reasoning": Mistake(
        "keeps the '#### N' line in the reasoning",
        r1(reasoning="text.strip()"),
        ["arith_record_0"]),
    "template_ignored": Mistake(
        "formats the prompt with the default template instead of the template it is given",
        r1(template="None"),
        ["custom_template"]),
    "commas_in_the_ground_truth": Mistake(
        "keeps the thousands commas in the ground truth",
        r1(truth="text[cut + 4:].strip()"),
        ["thousands_commas"]),
    "reasoning_not_stripped": Mistake(
        "does not strip the whitespace around the reasoning",
        r1(reasoning="text[:cut]"),
        ["whitespace_around_reasoning"]),
    "no_value_error": Mistake(
        "returns an empty answer for a record without '#### N' instead of raising ValueError",
        r1(check=False),
        ["no_final_answer"]),
    "cut_at_the_first_marker": Mistake(
        "cuts the reasoning at the first #### marker instead of the last",
        r1(reasoning='text[:text.find("####")].strip()'),
        ["two_markers"]),
    # the tags glued together read differently from the example inside the prompt
    "no_spaces_around_the_tags": Mistake(
        "glues the tags to the reasoning and the answer, unlike the format the prompt shows",
        r1(output='f" {reasoning}</think><answer>{truth}</answer>"'),
        ["arith_record_0"]),
    # notebook 01's visible check: "the calculator notes were dropped from the reasoning"
    "calculator_notes_dropped": Mistake(
        "removes the <<...>> calculator notes from the reasoning, which keeps them as the record has them",
        r1(reasoning='re.sub(r"<<[^>]*>>", "", text[:cut]).strip()'),
        ["arith_record_0", "thousands_commas"]),
}
