"""Notes and progress travel through ``logging`` (``bayes_eval.messages``): a note is a
warning on the ``bayes_eval`` logger unless a ``collected()`` block gathers it; progress
shows only where a handler takes it."""

import io
import logging

import pandas as pd

import bayes_eval
from bayes_eval.inference import sweep
from bayes_eval.messages import (
    LOGGER,
    collected,
    duration_text,
    note,
    progress,
    progress_shown,
    showing_progress,
)

# one task with end-to-end rows, one with milestone rows only: end_to_end leaves it out
TABLE = pd.DataFrame(
    [
        dict(agent="a", task="t1", method="end_to_end", successes=1, trials=5),
        dict(agent="a", task="t2", method="milestone", step=1, successes=2, trials=5),
        dict(agent="b", task="t1", method="end_to_end", successes=0, trials=5),
    ]
)
LEFT_OUT = "left out 1 milestone row(s) (rows 3): model end_to_end (end_to_end) does not use them"


def test_a_note_is_a_warning_on_the_package_logger(caplog):
    with caplog.at_level(logging.WARNING, logger="bayes_eval"):
        bayes_eval.fit(TABLE, "end_to_end")
    assert (LEFT_OUT, "bayes_eval", logging.WARNING) in [
        (r.getMessage(), r.name, r.levelno) for r in caplog.records
    ]


def test_collected_blocks_gather_their_own_notes_and_pass_none_on(caplog):
    with caplog.at_level(logging.WARNING, logger="bayes_eval"):
        with collected() as outer:
            note("first")
            with collected() as inner:
                note("second")
            note("third")
        assert caplog.records == []  # gathered, not passed on
        note("after")
    assert (outer, inner) == (["first", "third"], ["second"])
    assert [r.getMessage() for r in caplog.records] == ["after"]
    assert LOGGER.propagate and not LOGGER.handlers  # as it was


def test_a_note_of_fit_per_agent_names_its_agent():
    with collected() as notes:
        bayes_eval.fit_per_agent(TABLE, "end_to_end")
    # rows 2 and 3 are agent a's; agent b's rows are all used
    assert notes == [
        f"agent 'a': {LEFT_OUT}",
        "agent 'a': left out 1 task(s) the model cannot use (no end_to_end rows, which "
        "model end_to_end needs): task 't2' (agent 'a')",
    ]


def test_progress_shows_only_where_a_handler_takes_it(capsys):
    stream = io.StringIO()
    progress("unseen")  # no handler: nothing, not even Python's last resort
    assert not progress_shown()
    with showing_progress(stream):
        progress("compiling")
    assert stream.getvalue() == "compiling\n"
    assert capsys.readouterr().err == ""
    progress("after")
    assert stream.getvalue() == "compiling\n"


def test_durations_read_in_seconds_minutes_and_hours():
    assert [duration_text(s) for s in (0.4, 42, 89.4, 90, 210, 5399, 5400, 7560)] == [
        "0 s",
        "42 s",
        "89 s",
        "1.5 min",
        "3.5 min",
        "90.0 min",
        "1.5 h",
        "2.1 h",
    ]


def test_a_sweep_says_what_is_done_and_the_time_left_at_the_rate_so_far(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(sweep.time, "perf_counter", lambda: clock[0])

    def replicate(index, seconds):
        clock[0] += seconds[index]  # replicate i takes seconds[i] on the fake clock
        return index * 10

    finished = []
    stream = io.StringIO()
    with showing_progress(stream):
        results = sweep.run_sweep(
            replicate,
            3,
            [10, 20, 150],
            on_result=lambda i, r: finished.append((i, r)),
            describe=lambda i: f"design {'abc'[i]}",
        )
    assert results == [0, 10, 20]
    assert finished == [(0, 0), (1, 10), (2, 20)]
    # 10 s for one of three: 20 s left; 30 s for two: 15 s left; 180 s in all
    assert stream.getvalue().splitlines() == [
        "design a done (1 of 3, 10 s; about 20 s left)",
        "design b done (2 of 3, 30 s; about 15 s left)",
        "design c done (3 of 3, 3.0 min)",
    ]
