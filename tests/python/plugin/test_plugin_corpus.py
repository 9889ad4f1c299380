"""A round of bench/clean_corpus.py: clean tests across the standard
library (json, re, logging, warnings, dataclasses, asyncio, threads,
tempfile, subprocess, decimal, enum, a warm lru_cache, sockets, sqlite3,
unittest, pytest's fixtures), every one judged clean under --leaks.  The
bench runs a thousand verdicts and more; this runs one file of it."""

import pathlib
import subprocess
import sys

CORPUS = pathlib.Path(__file__).parents[3] / "bench" / "clean_corpus.py"


def test_a_round_of_the_clean_corpus_has_no_false_alarm():
    proc = subprocess.run(
        [sys.executable, str(CORPUS), "--verdicts", "30", "--files", "1"],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " 0 false alarms, 0 errors" in proc.stdout, proc.stdout
