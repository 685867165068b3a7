"""Canvas gradebook CSV files from grading rows (`autograder.lms`), through `write_grades` as `make grade` calls it.

The roster is written the way Canvas's gradebook export writes it (a byte-order mark, the
"Points Possible" row, the test student, names with commas, other assignments' columns); what is
written is read back with the csv module.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from autograder.grade import main as grade_main
from autograder.grade import write_grades
from autograder.lms import COMBINED, STUDENT_COLUMNS, RosterError, read_roster

ROSTER = (
    "\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,Notebook 01 (4701),Current Score\n"
    "    Points Possible,,,,,10.00,(read only)\n"
    '"Lovelace, Ada",1001,U-17,ada,Lab A,9.00,90\n'
    '"Turing, Alan",1002,U-23,alan.t,Lab B,,\n'
    '"Hopper, Grace",1003,hopper-sis,,Lab A,10.00,100\n'
    '"Student, Test",1099,,,Lab A,,\n'
)
CELLS = [{"notebook": "07_clip_loss", "cell": "a", "max_score": 5.0},
         {"notebook": "07_clip_loss", "cell": "b", "max_score": 10.0}]


def rows(*entries):
    return [{"student": s, "status": "ok", "score": score, "max_score": 15.0, "notes": list(notes),
             "cells": {"07_clip_loss:a": 0.0, "07_clip_loss:b": score}} for s, score, notes in entries]


def read(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_a_roster_maps_nbgrader_ids_to_canvas(tmp_path):
    """An id found as SIS Login ID, as SIS User ID and as Canvas's ID; one the roster lacks (its id
    as SIS Login ID); a grading error (blank: the import leaves that grade as it was)."""
    (tmp_path / "roster.csv").write_text(ROSTER, encoding="utf-8")
    graded = rows(("ada", 15.0, ()), ("hopper-sis", 7.5, ()), ("1002", 10.0, ()), ("zed", 0.0, ()),
                  ("1099", 0.0, ("grading error: OSError: disk full",)))
    write_grades(tmp_path, "07", rows=graded, cells=CELLS)
    table = read(tmp_path / "grades" / "07_canvas.csv")
    assert table[0] == [*STUDENT_COLUMNS, "07_clip_loss"]
    assert table[1] == ["    Points Possible", "", "", "", "", "15"]
    assert table[2:] == [["Lovelace, Ada", "1001", "U-17", "ada", "Lab A", "15"],
                         ["Hopper, Grace", "1003", "hopper-sis", "", "Lab A", "7.5"],
                         ["Turing, Alan", "1002", "U-23", "alan.t", "Lab B", "10"],
                         ["zed", "", "", "zed", "", "0"],
                         ["Student, Test", "1099", "", "", "Lab A", ""]]
    assert (tmp_path / "grades" / "07.csv").is_file() and (tmp_path / "grades" / "07.json").is_file()


def test_without_a_roster_the_id_is_the_sis_login_id_and_a_column_can_be_named(tmp_path):
    write_grades(tmp_path, "07", rows=rows(("ada", 3.0, ())), cells=CELLS, canvas_column="Clip loss (4711)")
    assert read(tmp_path / "grades" / "07_canvas.csv") == [
        [*STUDENT_COLUMNS, "Clip loss (4711)"], ["    Points Possible", "", "", "", "", "15"],
        ["ada", "", "", "ada", "", "3"]]


def test_the_combined_export_holds_every_assignment_graded_so_far(tmp_path):
    """Two assignments graded one after the other (one column named, one by default): one row per
    student, a blank where a student has no row in an assignment, each column's points."""
    (tmp_path / "roster.csv").write_text(ROSTER, encoding="utf-8")
    write_grades(tmp_path, "06", rows=rows(("ada", 4.0, ()), ("alan.t", 6.0, ())),
                 cells=[{"notebook": "06_group_advantages", "cell": "x", "max_score": 6.0}],
                 canvas_column="GRPO advantages")
    write_grades(tmp_path, "07", rows=rows(("ada", 15.0, ()), ("hopper-sis", 1.0, ())), cells=CELLS)
    table = read(tmp_path / "grades" / COMBINED)
    assert table[0] == [*STUDENT_COLUMNS, "GRPO advantages", "07_clip_loss"]
    assert table[1] == ["    Points Possible", "", "", "", "", "15", "15"]
    assert table[2:] == [["Lovelace, Ada", "1001", "U-17", "ada", "Lab A", "4", "15"],
                         ["Turing, Alan", "1002", "U-23", "alan.t", "Lab B", "6", ""],
                         ["Hopper, Grace", "1003", "hopper-sis", "", "Lab A", "", "1"]]


def test_a_semicolon_separated_export_is_read(tmp_path):
    path = tmp_path / "roster.csv"
    path.write_text(ROSTER.replace(",", ";").replace('"Lovelace; Ada"', '"Lovelace, Ada"'), encoding="utf-8")
    assert read_roster(path).student("ada").canvas_id == "1001"


@pytest.mark.parametrize("text, says", [
    ("Student,ID,SIS User ID,Section\nAda,1,u,A\n", "roster.csv, line 1: no SIS Login ID column(s)"),
    ("Name,Email\nAda,a@x\n", "roster.csv, line 1: no Student, ID, SIS User ID, SIS Login ID, Section column(s)"),
    (ROSTER + '"Knuth, Don",1004,U-9\n', "roster.csv, line 7: 3 fields where the header has 7"),
    (ROSTER + '"Ada again",1005,U-99,ada,Lab C,,\n', "roster.csv, lines 3 and 7: two students with SIS Login ID 'ada'"),
    ("", "roster.csv, line 1: no Student, ID"),
])
def test_a_bad_roster_is_a_clear_error_naming_the_file_and_line(tmp_path, text, says):
    (tmp_path / "roster.csv").write_text(text, encoding="utf-8")
    with pytest.raises(RosterError) as e:
        read_roster(tmp_path / "roster.csv")
    assert says in str(e.value) and str(tmp_path) in str(e.value), str(e.value)


def test_a_roster_that_is_not_utf8_names_its_line(tmp_path):
    (tmp_path / "roster.csv").write_bytes(ROSTER.encode() + '"Gödel, Kurt",1006,U-1,kg,Lab A,,\n'.encode("latin-1"))
    with pytest.raises(RosterError, match=r"roster.csv, line 7: not UTF-8 text"):
        read_roster(tmp_path / "roster.csv")


def test_the_grading_command_stops_on_a_bad_roster_before_grading(tmp_path, capsys):
    """`make grade` reads the roster first: a bad one costs no grading run, and nothing is written."""
    bad = tmp_path / "export.csv"
    bad.write_text("Name,Email\n", encoding="utf-8")
    (tmp_path / "submitted" / "ada" / "07").mkdir(parents=True)
    assert grade_main(["07", "--course", str(tmp_path), "--roster", str(bad)]) == 2
    assert f"error: {bad}, line 1: no Student" in capsys.readouterr().err
    assert not (tmp_path / "grades").exists()
