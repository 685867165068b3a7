"""The known mistakes of `extract_gsm8k_answer` (notebook 01): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake


MISTAKES = {
    # "1,080" is not "1080" (and without the look-ahead `.+?` starts at the first marker)
    "keeps_commas": Mistake(
        'keeps the thousands commas ("1,080" is not "1080") and reads from the first #### marker',
        r"""
        import re
        def extract_gsm8k_answer(answer_text):
            m = re.search(r"####\s*(.+?)\s*$", answer_text, re.DOTALL)
            if m is None:
                raise ValueError("no answer")
            return m.group(1).strip()
    """,
        ["thousands_commas", "two_markers_the_last_counts"]),
    "no_strip": Mistake(
        "does not strip the spaces and newlines around the answer",
        """
        def extract_gsm8k_answer(answer_text):
            if "####" not in answer_text:
                raise ValueError("no answer")
            return answer_text.split("####")[-1].replace(",", "")
    """,
        ["spacing", "arith_answers"]),
    # the last number of a record is its answer here, but a text without '#### N' still gives one
    "last_number_of_the_text": Mistake(
        "returns the last number of the text, so a text without '#### N' still gives an answer instead of ValueError",
        r"""
        import re
        def extract_gsm8k_answer(answer_text):
            numbers = re.findall(r"-?[\d,]*\.?\d+", answer_text)
            if not numbers:
                raise ValueError("no answer")
            return numbers[-1].replace(",", "")
    """,
        ["no_final_answer"]),
    "empty_string_instead_of_value_error": Mistake(
        "returns an empty string for a text without '#### N' instead of raising ValueError",
        r"""
        import re
        def extract_gsm8k_answer(answer_text):
            m = re.search(r"####(?!.*####)\s*(.+?)\s*$", answer_text, re.DOTALL)
            return "" if m is None else m.group(1).strip().replace(",", "")
    """,
        ["no_final_answer"]),
    # `.+?` from the first marker on swallows the rest of the text, second marker included
    "first_marker": Mistake(
        "reads from the first #### marker to the end, second marker included, instead of after the last one",
        r"""
        import re
        def extract_gsm8k_answer(answer_text):
            m = re.search(r"####\s*(.+?)\s*$", answer_text, re.DOTALL)
            if m is None:
                raise ValueError("no answer")
            return m.group(1).strip().replace(",", "")
    """,
        ["two_markers_the_last_counts"]),
    "digits_only": Mistake(
        "keeps digits and commas only, so a minus sign or a decimal point is lost",
        r"""
        import re
        def extract_gsm8k_answer(answer_text):
            m = re.search(r"####\s*([\d,]+)", answer_text)
            if m is None:
                raise ValueError("no answer")
            return m.group(1).replace(",", "")
    """,
        ["negative_and_decimal"]),
    # a number is not the string: "12.25" becomes "12", "12.0" becomes "12"
    "converted_to_int": Mistake(
        'converts the answer to an int: "12.25" becomes "12"',
        """
        def extract_gsm8k_answer(answer_text):
            head, sep, tail = answer_text.rpartition("####")
            if not sep:
                raise ValueError("no answer")
            return str(int(float(tail.strip().replace(",", ""))))
    """,
        ["negative_and_decimal"]),
    # split(maxsplit=1) at the first marker: the answer of a corrected record is the old one
    "split_at_the_first_marker": Mistake(
        "splits at the first #### marker, so a record with two markers gives the first answer, not the last",
        """
        def extract_gsm8k_answer(answer_text):
            if "####" not in answer_text:
                raise ValueError("no answer")
            return answer_text.split("####", 1)[1].split("\\n")[0].strip().replace(",", "")
    """,
        ["two_markers_the_last_counts"]),
}
