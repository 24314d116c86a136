"""Trouble from the operating system and odd files: one clear line, a documented exit
status, no hang, no traceback, no warning."""

import io
import os
import subprocess
import sys

import pytest

import bayes_eval
from bayes_eval.cli.main import main
from bayes_eval.resources import example_evidence, shipped_dir

EXAMPLE = str(example_evidence())
POOLED = str(example_evidence().parent / "example_pooled.csv")


def run(capsys, *args):
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def one_error(status, out, err, message):
    assert status == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert message in err, err


def test_a_pipe_passed_as_the_table_is_refused_not_read(capsys, tmp_path):
    fifo = tmp_path / "table.csv"
    os.mkfifo(fifo)
    one_error(*run(capsys, "fit", str(fifo)), "is not a regular file (a pipe or device?)")
    spec = tmp_path / "spec.toml"
    os.mkfifo(spec)
    one_error(*run(capsys, "fit", EXAMPLE, "--model", str(spec)), "is not a regular file")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seed", str(2**64)], "--seed: 18446744073709551616 must be <= 9223372036854775807"),
        (["--seed", "1_0"], "--seed: '1_0' is not a whole number"),
        (["--model", "hierarchical", "--draws", "10000000000000"], "--draws: 10000000000000 must"),
        (
            ["--model", "hierarchical", "--chains", "1000"],
            "--chains: 1000 must lie between 1 and 64",
        ),
    ],
)
def test_absurd_numbers_are_refused_before_any_work(capsys, args, message):
    one_error(*run(capsys, "fit", POOLED, *args), message)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # 1e11 draws: it allocated 745 GiB in one go and ended in a MemoryError (exit 1)
        (["--milestones", "100000"], "makes 1.00e+11 binomial draws, more than 4e+09"),
        (["--replications", str(10**11)], "makes 3.00e+11 binomial draws"),  # hours
    ],
)
def test_simulations_too_large_to_finish_are_refused(capsys, args, message):
    one_error(*run(capsys, "simulate", "variance", *args), message)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tasks", str(10**8)], "--tasks: 100000000 must be <= 10000"),  # ran for ever
        (["--milestones", str(10**5)], "--milestones: 100000 must be <= 100"),
        (["--truth-trials", str(10**18)], "--truth-trials: 1000000000000000000 must be <="),
    ],
)
def test_path_studies_too_large_to_finish_are_refused(capsys, args, message):
    one_error(*run(capsys, "simulate", "paths", *args), message)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("draws = nan", "[sampler] draws: nan is not a whole number"),
        ("target_accept = nan", "[sampler] target_accept: nan must lie strictly between 0 and 1"),
        ("target_accept = inf", "[sampler] target_accept: inf must lie strictly between 0 and 1"),
        ("seed = 18446744073709551615", "[sampler] seed: 18446744073709551615 must lie between 0"),
    ],
)
def test_spec_values_that_are_not_finite_or_too_large(capsys, tmp_path, line, message):
    text = (shipped_dir("models") / "hierarchical.toml").read_text()
    spec = tmp_path / "s.toml"
    key = line.split(" = ")[0]
    kept = [row for row in text.splitlines() if not row.startswith(f"{key} =")]
    spec.write_text("\n".join(kept).replace("[sampler]", f"[sampler]\n{line}", 1) + "\n")
    one_error(*run(capsys, "fit", POOLED, "--model", str(spec)), message)


def test_a_spec_with_a_byte_order_mark_is_read(capsys, tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_bytes(b"\xef\xbb\xbf" + (shipped_dir("models") / "end_to_end.toml").read_bytes())
    status, out, _ = run(capsys, "fit", EXAMPLE, "--model", str(spec), "--format", "csv")
    assert status == 0 and out.startswith("agent,task,")


def test_rows_after_a_quoted_line_break_keep_their_numbers(capsys, tmp_path):
    table = tmp_path / "e.csv"
    table.write_text(
        'task,method,successes,trials\n"two\nlines",end_to_end,1,4\nt,end_to_end,5,4\n'
    )
    one_error(*run(capsys, "fit", str(table)), "row 3, column successes: successes (5) exceeds")


def test_a_closed_pipe_ends_quietly_as_standard_tools_do(tmp_path):
    """`bayes-eval fit ... | head -1`: no BrokenPipeError, no traceback, status 141."""
    command = [sys.executable, "-m", "bayes_eval", "fit", EXAMPLE, "--format", "csv"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()  # the reader is gone before the first line is written
    err = process.stderr.read()
    assert process.wait() == 141
    assert b"Traceback" not in err and b"error" not in err and b"BrokenPipe" not in err


def test_no_warning_reaches_the_terminal_without_debug(tmp_path):
    code = (
        "import warnings, sys; from bayes_eval.cli import main as cli; "
        "cli.COMMANDS['example'] = lambda args: warnings.warn('internal') or 0; "
        "sys.exit(cli.main(sys.argv[1:]))"
    )
    quiet = subprocess.run([sys.executable, "-c", code, "example"], capture_output=True)
    assert quiet.returncode == 0 and quiet.stderr == b""
    loud = subprocess.run([sys.executable, "-c", code, "--debug", "example"], capture_output=True)
    assert b"UserWarning: internal" in loud.stderr


def test_an_unwritable_parent_is_refused_before_the_fit(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    one_error(*run(capsys, "fit", EXAMPLE, "--out", str(blocker / "run")), "parent folder")


def steps_table(tmp_path, runs, steps):
    rows = [
        f"t,expert_completion,{s},{r},9,10" for r in range(1, runs + 1) for s in range(1, steps + 1)
    ]
    path = tmp_path / f"steps_{runs}x{steps}.csv"
    path.write_text("task,method,step,run,successes,trials\n" + "\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize(
    ("runs", "steps", "shown"),
    [(201, 1, "201 factors over 201 run(s)"), (1, 10_001, "10,001 factors over 1 run(s)")],
)
def test_exact_posteriors_too_large_to_summarise_are_refused_at_once(
    capsys, tmp_path, runs, steps, shown
):
    """Past the documented limits (200 runs, 10,000 factors a task) the exact summary is
    refused before any of it is done, naming the task and the alternatives (400 runs of 5
    steps took 83 s and 5.9 GB: benchmarks/long_products.py)."""
    path = steps_table(tmp_path, runs, steps)
    status, out, err = run(capsys, "fit", str(path), "--model", "ecr2024")
    one_error(status, out, err, f"{path}: task 't' (agent 'agent'): its exact posterior is a")
    assert shown in err and "at most 200 runs and 10,000 factors" in err
    assert "fit a pooled model (ecr_pooled" in err


def test_a_long_exact_summary_says_how_it_is_getting_on(monkeypatch, tmp_path):
    """A product of many factors on the grid announces itself, and a summary that runs
    for a while says how many posteriors are done (the limits lowered so that a small
    real summary crosses them)."""
    from bayes_eval.exact import products
    from bayes_eval.messages import showing_progress

    monkeypatch.setattr(products, "PROGRESS_FACTORS", 3)
    monkeypatch.setattr(products, "PROGRESS_SECONDS", 0.0)
    shown = io.StringIO()
    with showing_progress(shown):
        bayes_eval.fit(steps_table(tmp_path, 2, 4), "ecr2024").summary()
    lines = shown.getvalue().splitlines()
    assert "exact: a product of 8 factors over 2 run(s), on a grid (up to a minute)" in lines
    assert any(line.startswith("exact: 0 posteriors summarised on the grid (") for line in lines)
