"""`bayes-eval fit`: output formats, determinism, and bad input (exit 2, one line, no files)."""

import importlib
import io
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import bayes_eval
from bayes_eval import load_posterior
from bayes_eval.cli.main import main
from bayes_eval.constants import SUMMARY_COLUMNS
from bayes_eval.inference.retry import fit_attempts
from bayes_eval.resources import example_evidence
from bayes_eval.results.summary import format_number

EXAMPLE = str(example_evidence())


def run(capsys, *args):
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self):
        return True


@pytest.mark.parametrize("quiet", [False, True])
def test_progress_on_a_terminal_unless_quiet(monkeypatch, capsys, quiet):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    args = ["fit", POOLED, "--model", "end_to_end_pooled", "--draws", "300", "--tune", "300"]
    assert main(args + (["--quiet"] if quiet else [])) == 0
    progress = terminal.getvalue()
    if quiet:
        assert "sampling" not in progress and "compiling" not in progress
    else:
        assert "sampling: nutpie (cpu), 4 chains x (300 tune + 300 draws)" in progress
        assert "sampling: done in " in progress


def test_json_and_csv_have_the_contract_columns(capsys):
    status, out, _ = run(capsys, "fit", EXAMPLE, "--format", "json", "--threshold", "0.01")
    assert status == 0
    records = json.loads(out)
    assert [list(r) for r in records][0] == list(SUMMARY_COLUMNS)
    status, out, _ = run(capsys, "fit", EXAMPLE, "--format", "csv")
    assert out.splitlines()[0] == ",".join(SUMMARY_COLUMNS)


def test_same_seed_same_numbers_and_round_trip(capsys, tmp_path):
    first, second = tmp_path / "one", tmp_path / "two"
    assert run(capsys, "fit", EXAMPLE, "--out", str(first), "--seed", "5")[0] == 0
    assert run(capsys, "fit", EXAMPLE, "--out", str(second), "--seed", "5")[0] == 0
    assert (first / "summary.csv").read_text() == (second / "summary.csv").read_text()
    one, two = load_posterior(first / "posterior.nc"), load_posterior(second / "posterior.nc")
    assert one.tree["posterior"]["p_task"].equals(two.tree["posterior"]["p_task"])
    # the flags are nullable (empty where they do not apply: an exact bound borrows nothing)
    flags = {"diagnostics_ok": "boolean", "extrapolated": "boolean"}
    written = pd.read_csv(first / "summary.csv", dtype=flags)
    pd.testing.assert_frame_equal(one.summary(), written, check_dtype=False)


def test_names_that_look_missing_round_trip(capsys, tmp_path):
    """Names are opaque strings: 'nan', 'NA', 'None', 'null' and 'N/A' survive the table,
    the run folder, the summary file, JSON and the report."""
    names = ["nan", "NA", "None", "null", "N/A"]
    table = tmp_path / "e.csv"
    rows = [
        f"{agent},{task},end_to_end,{i % 3},4"
        for i, (agent, task) in enumerate((a, t) for a in names[:2] for t in names)
    ]
    table.write_text("agent,task,method,successes,trials\n" + "\n".join(rows) + "\n")
    run_dir, report_dir = tmp_path / "run", tmp_path / "report"
    status, out, _ = run(
        capsys,
        "fit",
        str(table),
        "--model",
        "end_to_end",
        "--format",
        "json",
        "--out",
        str(run_dir),
    )
    assert status == 0
    pairs = [(a, t) for a in names[:2] for t in names]
    assert sorted((r["agent"], r["task"]) for r in json.loads(out)) == sorted(pairs)
    loaded = load_posterior(run_dir).summary()
    assert sorted(zip(loaded["agent"], loaded["task"], strict=True)) == sorted(pairs)
    written = pd.read_csv(run_dir / "summary.csv", dtype=str, keep_default_na=False)
    assert sorted(zip(written["agent"], written["task"], strict=True)) == sorted(pairs)
    status, _, _ = run(
        capsys, "report", str(run_dir), "--threshold", "0.5", "--out", str(report_dir)
    )
    assert status == 0
    text = (report_dir / "report.md").read_text()
    assert all(f"| {name} |" in text for name in names)


HOSTILE = ("agent\x1b]0;title\x07", "task\x1b[31mred\x07\r\u202e")


def test_names_reach_the_terminal_escaped_and_csv_and_json_exact(capsys, tmp_path):
    """A name holding ESC, BEL, a carriage return and a direction mark is shown escaped in
    the terminal table, its provenance and the notes (it may not recolour, retitle or ring
    the user's terminal); CSV and JSON keep its exact characters."""
    agent, task = HOSTILE
    table = tmp_path / "e.csv"
    rows = [f'"{agent}","{task}",end_to_end,,2,4', f'"{agent}",plain,end_to_end,,1,4']
    rows.append(f'"{agent}","{task}",milestone,1,3,4')  # left out by end_to_end: a note
    table.write_text("agent,task,method,step,successes,trials\n" + "\n".join(rows) + "\n")
    status, out, err = run(capsys, "fit", str(table), "--model", "end_to_end")
    assert status == 0
    shown = out + err
    assert not any(c in shown for c in "\x1b\x07\r\u202e")
    # pandas reads a carriage return inside quotes as a line break
    assert "task\\x1b[31mred\\x07\\n\\u202e (agent\\x1b]0;title\\x07): end_to_end" in out
    assert "agent\\x1b]0;title\\x07" in out
    assert "note: " in err
    status, out, _ = run(capsys, "fit", str(table), "--model", "end_to_end", "--format", "csv")
    written = pd.read_csv(io.StringIO(out), dtype=str, keep_default_na=False)
    read = task.replace("\r", "\n")
    assert set(written["task"]) == {read, "plain"} and set(written["agent"]) == {agent}
    status, out, _ = run(capsys, "fit", str(table), "--model", "end_to_end", "--format", "json")
    assert {(r["agent"], r["task"]) for r in json.loads(out)} == {(agent, read), (agent, "plain")}


def test_no_pymc_import_on_the_exact_path(tmp_path):
    code = (
        "import sys; from bayes_eval.cli.main import main; "
        f"main(['fit', {EXAMPLE!r}, '--format', 'csv', '--out', {str(tmp_path / 'o')!r}]); "
        "assert 'pymc' not in sys.modules and 'pytensor' not in sys.modules, 'imported PyMC'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


BAD_ARGS = [
    (["fit", EXAMPLE, "--level", "1.5"], "--level: 1.5 must lie strictly between 0.5 and 1"),
    (["fit", EXAMPLE, "--level", "0"], "--level: 0 must lie strictly between 0.5 and 1"),
    (["fit", EXAMPLE, "--level", "0.025"], "--level: 0.025 must lie strictly between 0.5 and 1"),
    (["fit", EXAMPLE, "--level", "0.5"], "--level: 0.5 must lie strictly between 0.5 and 1"),
    (["fit", EXAMPLE, "--level", "1e-300"], "--level: 1e-300 must lie strictly between 0.5"),
    (["fit", EXAMPLE, "--level", "nan"], "--level: nan must lie strictly between 0.5 and 1"),
    (["report", EXAMPLE, "--threshold", "0.1", "--level", "0.4"], "--level: 0.4 must lie"),
    (["fit", EXAMPLE, "--level", "high"], "--level: 'high' is not a number"),
    (["fit", EXAMPLE, "--threshold", "1"], "--threshold: 1 must lie strictly between 0 and 1"),
    (["fit", EXAMPLE, "--threshold", "-0.1"], "--threshold: -0.1 must lie strictly"),
    (["fit", EXAMPLE, "--seed", "x"], "--seed: 'x' is not a whole number"),
    (["fit", EXAMPLE, "--seed", "-3"], "--seed: -3 must be >= 0"),
    (["fit", EXAMPLE, "--model", "phuong2042"], "no such model (did you mean 'phuong2024'?)"),
    (["fit", EXAMPLE, "--format", "xml"], "invalid choice"),
    (["fit"], "the following arguments are required: evidence"),
    (["frobnicate"], "invalid choice"),
    (["fit", "missing.csv"], "missing.csv: no such file"),
]


@pytest.mark.parametrize(("args", "message"), BAD_ARGS)
def test_bad_arguments(capsys, tmp_path, args, message):
    out_dir = tmp_path / "out"
    status, out, err = run(capsys, *args, "--out", str(out_dir))
    assert status == 2
    assert out == ""
    assert err.startswith("error: ") and err.count("\n") == 1
    assert message in err
    assert "Traceback" not in err
    assert not out_dir.exists()


def test_tasks_left_out_are_named_and_a_table_of_none_is_refused(capsys, tmp_path):
    status, out, err = run(capsys, "fit", EXAMPLE, "--model", "end_to_end", "--format", "csv")
    assert status == 0 and "data_exfiltration" not in out
    assert (
        "note: left out 2 task(s) the model cannot use (no end_to_end rows, which model "
        "end_to_end needs): task 'data_exfiltration' (agent 'agent-a'), task "
        "'data_exfiltration' (agent 'agent-b')\n"
    ) in err
    table = tmp_path / "e.csv"
    table.write_text("task,method,successes,trials\na,end_to_end,1,4\nb,end_to_end,0,4\n")
    out_dir = tmp_path / "x"
    status, out, err = run(capsys, "fit", str(table), "--model", "mats2024", "--out", str(out_dir))
    assert status == 2 and out == "" and not out_dir.exists()
    assert err == (
        f"error: {table}: no task is usable: task 'a' (agent 'agent'), task 'b' (agent "
        "'agent') (no milestone rows, which model mats2024 needs)\n"
    )


def test_bad_table_writes_nothing(capsys, tmp_path):
    table = tmp_path / "e.csv"
    table.write_text("task,method,successes,trials\nt,end_to_end,5,4\n")
    status, out, err = run(capsys, "fit", str(table), "--out", str(tmp_path / "out"))
    assert status == 2 and out == ""
    assert err == f"error: {table}: row 2, column successes: successes (5) exceeds trials (4)\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "failing", ["checks.fitted.predictive_checks", "outputs.plots.forest_plot"]
)
def test_a_check_that_fails_after_the_fit_keeps_the_fit(monkeypatch, capsys, tmp_path, failing):
    """A check (or figure) that raises after the fit: the fit, its summary and the other
    checks are written, the failure is reported with its reason, and the numbers are
    those of a run where nothing failed."""
    module, name = failing.rsplit(".", 1)

    def broken(*args, **kwargs):
        raise OverflowError("Error in function ibeta_derivative")

    # imported here: a worker that has not imported the module yet has no such attribute
    monkeypatch.setattr(importlib.import_module(f"bayes_eval.{module}"), name, broken)
    status, out, _ = run(capsys, "fit", EXAMPLE, "--out", str(tmp_path / "run"))
    assert status == 0
    assert "FAILED (OverflowError: Error in function ibeta_derivative); the fit is kept" in out
    assert {"posterior.nc", "summary.csv", "ppc.csv"} <= {
        p.name for p in (tmp_path / "run").iterdir()
    }
    monkeypatch.undo()
    run(capsys, "fit", EXAMPLE, "--out", str(tmp_path / "clean"))
    kept = pd.read_csv(tmp_path / "run" / "summary.csv")
    pd.testing.assert_frame_equal(kept, pd.read_csv(tmp_path / "clean" / "summary.csv"))


def test_no_arguments_prints_the_help_and_version_the_version(capsys):
    import tomllib
    from pathlib import Path

    status, out, err = run(capsys)
    assert status == 0 and err == ""
    assert out.startswith("usage: bayes-eval") and "start here:" in out
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert capsys.readouterr().out == f"bayes-eval {pyproject['project']['version']}\n"


def test_debug_shows_the_traceback(capsys):
    status, _, err = run(capsys, "fit", "missing.csv", "--debug")
    assert status == 2 and "Traceback" in err


def test_bad_spec_file(capsys, tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('schema_version = 1\nname = "x"\nkind = "end_to_end"\nprior = {}\n')
    status, _, err = run(capsys, "fit", EXAMPLE, "--model", str(spec))
    assert status == 2
    assert "unknown key 'prior' (did you mean 'priors'?)" in err


def test_example_names_shipped_datasets(capsys):
    status, out, _ = run(capsys, "example", "mats2024_counts")
    assert status == 0 and out.strip().endswith("mats2024_counts.csv")
    status, out, err = run(capsys, "example", "nope")
    assert status == 2 and out == "" and "no dataset 'nope'; shipped: example_audit, " in err
    assert "example_evidence" in err and "mats2024_counts" in err


POOLED = str(example_evidence().parent / "example_pooled.csv")

MCMC_BAD_ARGS = [
    (["fit", EXAMPLE, "--draws", "100"], "--draws: MCMC settings apply to pooled models only"),
    (
        ["fit", POOLED, "--model", "hierarchical", "--draws", "0"],
        "--draws: 0 must lie between 1 and 1000000",
    ),
    (["fit", POOLED, "--model", "hierarchical", "--chains", "x"], "--chains: 'x' is not a whole"),
    (
        ["fit", POOLED, "--model", "hierarchical", "--target-accept", "1"],
        "--target-accept: 1 must lie strictly between 0 and 1",
    ),
    (["fit", POOLED, "--model", "hierarchical", "--engine", "stan"], "invalid choice: 'stan'"),
]


@pytest.mark.parametrize(("args", "message"), MCMC_BAD_ARGS)
def test_bad_mcmc_arguments(capsys, args, message):
    status, out, err = run(capsys, *args)
    assert status == 2 and out == "" and message in err and err.count("\n") == 1


def test_pooled_fit_and_check(capsys, tmp_path):
    out_dir = tmp_path / "run"
    small = ["--out", str(out_dir), "--draws", "40", "--tune", "40", "--chains", "2"]
    status, out, err = run(
        capsys,
        "fit",
        POOLED,
        "--model",
        "hierarchical",
        *small,
    )
    # 40 draws are far too few: the fit says so and check fails with status 1
    assert status == 0 and "sampling:" not in err  # no progress where stderr is no terminal
    assert "diagnostics FAILED" in out and "false" in out
    provenance = pd.read_csv(out_dir / "summary.csv")["provenance"].iloc[0]
    first = "nutpie (cpu) 2 chains x 40 draws (tune 40, target_accept 0.95), task means"
    assert first in provenance
    assert "kept attempt " in provenance  # refitted, and says which attempt it kept
    # the first fit, the refit with twice the draws, then the other form, then the best
    # form with 160 and 320 draws (8 times the 40 asked for: the refit budget): all fail
    assert fit_attempts(provenance) == 5
    assert "x 320 draws" in provenance and "x 640 draws" not in provenance
    assert "no longer refit: the refit budget is 8 times the spec's 40 draws" in provenance
    # each refit starts its chains afresh: the CLI's default seed, plus the attempt
    assert "8 non-centred, seed 20240902:" in provenance
    assert "x 80 draws (tune 40, target_accept 0.95), task means non-centred, seed 20240903:" in (
        provenance
    )
    status, out, _ = run(capsys, "check", str(out_dir))
    assert status == 1
    assert "r_hat" in out and "ess_tail" in out and "p_task[agent-a, task_00]" in out
    # task means by name; the free variables behind them (mu_task_logit, mu_task_z) are
    # not listed twice
    assert "mu_task[agent-a, task_00]" in out and "mu_task[0]" not in out
    assert "mu_task_logit" not in out and "mu_task_z" not in out
    assert "divergences:" in out and "E-BFMI per chain:" in out
    status, out, _ = run(capsys, "fit", EXAMPLE, "--out", str(tmp_path / "exact"))
    status, out, _ = run(capsys, "check", str(tmp_path / "exact"))
    assert status == 0 and "is exact (conjugate): no MCMC" in out


def test_reading_options_from_the_command_line(capsys, tmp_path):
    """A .tsv table with a notes column and two batches of one cell: refused with the
    flag named, then read with --sum-duplicates (a note names the ignored column), and
    with --keep-columns the summary carries the notes per task."""
    table = pd.read_csv(EXAMPLE, dtype=str, keep_default_na=False)
    first = table.iloc[[0]].assign(notes="batch 2")
    path = tmp_path / "e.tsv"
    pd.concat([table.assign(notes="batch 1"), first]).to_csv(path, sep="\t", index=False)
    status, out, err = run(capsys, "fit", str(path), "--model", "end_to_end", "--format", "csv")
    assert status == 2 and out == "" and "--sum-duplicates adds up batches" in err
    args = ["fit", str(path), "--model", "end_to_end", "--format", "csv", "--sum-duplicates"]
    status, out, err = run(capsys, *args)
    assert status == 0 and "note: " in err and "ignored column notes" in err
    assert "notes" not in pd.read_csv(io.StringIO(out)).columns
    status, out, err = run(capsys, *args, "--keep-columns", "--out", str(tmp_path / "run"))
    summary = pd.read_csv(io.StringIO(out))
    key = ["agent", "task"]
    cell = tuple(first[key].iloc[0])
    assert summary.set_index(key).loc[cell, "notes"] == "batch 1; batch 2"
    assert set(summary["notes"]) == {"batch 1", "batch 1; batch 2"}
    reloaded = load_posterior(tmp_path / "run").summary()
    assert reloaded.set_index(key).loc[cell, "notes"] == "batch 1; batch 2"


@pytest.mark.parametrize("columns", [60, 100, 200])
def test_terminal_tables_fit_the_terminal(capsys, monkeypatch, columns):
    """The fit's table is no wider than the terminal, or than the narrowest it folds to
    (at 60 columns), keeps every number whole (folding names instead) and right-aligns
    the numbers so their figures line up."""
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)  # as on a terminal
    status, out, _ = run(capsys, "fit", EXAMPLE, "--threshold", "0.05")
    assert status == 0
    table = out.split("\n\nprovenance:")[0].splitlines()[2:]
    rule = next(line for line in table if set(line) == {"─"})
    assert all(len(line) <= len(rule) for line in table)
    # at 60 columns the numbers cannot all fit: the table keeps them whole, wider
    assert (len(rule) <= columns) == (columns >= 100)
    summary = bayes_eval.fit(EXAMPLE).summary(threshold=0.05)
    for value in summary["upper"].dropna():
        assert format_number(value) in out
    if columns >= 100:  # one line per row: the upper bounds end in one column
        rows = [line for line in table if line.startswith("agent-")]
        ends = {
            line.index(format_number(u)) + len(format_number(u))
            for line, u in zip(rows, summary["upper"], strict=True)
            if pd.notna(u)
        }
        assert len(ends) == 1


def test_a_piped_table_is_the_table_rich_draws_unfolded(monkeypatch):
    """Piped, the table is drawn without rich (a minute at 50,000 rows otherwise), to the
    character the table rich draws on a terminal too wide to fold it: names, numbers
    right-aligned, a missing value, a name wider than its head, an empty table."""
    from bayes_eval.cli.terminal import terminal_table

    frame = pd.DataFrame(
        {
            "agent": ["agent-a", "a much longer agent name", "b"],
            "p": [0.125, float("nan"), 3.2e-07],
            "n": [1, 20, 300],
            "ok": [True, False, True],
        }
    )
    monkeypatch.setenv("COLUMNS", "1000")
    drawn = []
    for table in (frame, frame.head(0)):
        monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
        drawn.append(terminal_table(table))
        monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
        assert terminal_table(table) == drawn[-1]
    assert "a much longer agent name" in drawn[0] and "   3.2e-07   " in drawn[0]


def test_a_terminal_shows_a_digest_of_many_pairs_and_a_pipe_every_row(
    capsys, monkeypatch, tmp_path
):
    """Of more than 200 pairs a terminal shows one row per agent: its pairs, how many
    bounds lie below the threshold and its highest bound with the task, as pandas counts
    them; piped, every pair's row."""
    from bayes_eval.cli.terminal import SUMMARY_SHOWN

    rng = np.random.default_rng(5)
    agents, tasks = 3, 90
    table = pd.DataFrame(
        {
            "agent": np.repeat([f"agent-{a}" for a in range(agents)], tasks),
            "task": np.tile([f"task-{t:02d}" for t in range(tasks)], agents),
            "method": "end_to_end",
            "successes": 0,
            "trials": rng.integers(1, 200, agents * tasks),
        }
    )
    assert len(table) > SUMMARY_SHOWN
    table.to_csv(tmp_path / "t.csv", index=False)
    args = ["fit", str(tmp_path / "t.csv"), "--model", "end_to_end", "--threshold", "0.05"]
    status, piped, _ = run(capsys, *args)
    assert status == 0 and sum(line.startswith("agent-") for line in piped.splitlines()) == 270
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    status, shown, _ = run(capsys, *args)
    assert status == 0 and "270 pairs, a digest per agent" in shown
    summary = bayes_eval.fit(tmp_path / "t.csv", model="end_to_end").summary(threshold=0.05)
    lines = [line.split() for line in shown.splitlines() if line.startswith("agent-")]
    assert len(lines) == agents
    for agent, pairs, _median, below, highest, task in lines:
        rows = summary[summary["agent"] == agent]
        worst = rows.loc[rows["upper"].idxmax()]
        assert int(pairs) == len(rows) == tasks
        assert int(below) == (rows["upper"] < 0.05).sum() > 0
        assert highest == format_number(worst["upper"]) and task == worst["task"]


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        ("out: x exists and is not a folder", "--out: x exists and is not a folder"),
        ("workers and scheduler: give one", "--workers and --scheduler: give one"),
        ("workers/scheduler: not installed", "--workers/--scheduler: not installed"),
        ("predict model,x=1: start with a name", "--predict-agent model,x=1: start with a name"),
        ("input_format: 'x' is not one of", "--from: 'x' is not one of"),
        ("fit_per_agent: model crossed", "--by agent: model crossed"),
        ("data/tasks.csv: row 2, column task: empty", "data/tasks.csv: row 2, column task: empty"),
        ("engine numpyro needs JAX and numpyro: pip", "engine numpyro needs JAX and numpyro: pip"),
        ("level: 1.2 must lie", "level: 1.2 must lie"),
        ("forecast next year: not a date", "--forecast next year: not a date"),
        ("model phuong2024 is exact: no MCMC", "model phuong2024 is exact: no MCMC"),
    ],
)
def test_the_library_names_parameters_and_the_command_line_flags(message, shown):
    """A head that is a parameter, parameters joined by '/' or 'and', or a parameter and
    its value is read as flags; a path, prose or an unknown name is left alone."""
    from bayes_eval.cli.options import as_flags

    assert as_flags(message) == shown


def test_a_library_error_reaches_the_terminal_with_its_flag(capsys, tmp_path):
    """bayes_eval.fit names ``agents``; bayes-eval fit names ``--agents``."""
    agents = tmp_path / "agents.csv"
    agents.write_text("agent,release_date\nagent-a,2024-01-01\n")
    status, out, err = run(capsys, "fit", EXAMPLE, "--model", "end_to_end", "--agents", str(agents))
    assert status == 2 and out == ""
    assert err.startswith("error: --agents: covariates and predictions apply to crossed models")


def test_fit_help_lists_every_shipped_model(capsys):
    """``fit --help`` names each model the package ships (its specs), so that a user can
    pick one without reading the docs."""
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    shipped = bayes_eval.shipped_specs()
    assert len(shipped) >= 15
    listed = help_text.split("shipped spec name (")[1].split(")")[0]
    assert listed.split(", ") == sorted(shipped)


def test_every_flag_of_every_command_says_what_it_does():
    """Each argument of each command has help text: a sentence fragment of at least two
    words that does not end mid-word (no bare "hypothesised")."""
    import argparse

    from bayes_eval.cli.main import _parser

    def unexplained(parser, name):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):  # commands, and simulate's
                for command, sub in action.choices.items():
                    yield from unexplained(sub, f"{name} {command}".strip())
            if isinstance(action, argparse._HelpAction) or len((action.help or "").split()) > 1:
                continue
            yield f"{name} {'/'.join(action.option_strings) or action.dest}: {action.help!r}"

    assert not list(unexplained(_parser(), ""))


def test_piped_tables_keep_every_name_whole_on_one_line(capsys, monkeypatch, tmp_path):
    """Where standard output is not a terminal (a pipe, a file; here captured), no table
    folds, even at 40 columns: fit, fit --attempts, compare-agents and plan print each
    agent and task name whole, a row to a line; plan's prior family is a table."""
    monkeypatch.setenv("COLUMNS", "40")
    agents = ["an-agent-whose-name-is-longer-than-a-narrow-terminal", "a-second-agent-as-long"]
    tasks = [f"task-{n}-with-a-long-descriptive-name-from-the-benchmark" for n in range(3)]
    frame = pd.DataFrame(
        [
            dict(agent=a, task=t, method="end_to_end", successes=n % 3, trials=5 + n)
            for n, (a, t) in enumerate((a, t) for a in agents for t in tasks)
        ]
    )
    frame.to_csv(tmp_path / "long.csv", index=False)
    status, out, _ = run(capsys, "fit", str(tmp_path / "long.csv"), "--out", str(tmp_path / "r"))
    assert status == 0
    lines = out.splitlines()
    for agent in agents:
        for task in tasks:
            assert any(agent in line and task in line for line in lines), (agent, task)
    status, out, _ = run(capsys, "fit", str(tmp_path / "long.csv"), "--attempts", "10,1e6")
    lines = out.splitlines()
    for agent in agents:
        for task in tasks:
            for k in ("10", "1,000,000"):
                assert any(agent in line and task in line and f" {k} " in line for line in lines)
    status, out, _ = run(capsys, "compare-agents", str(tmp_path / "r"), *agents)
    assert status == 0
    for task in tasks:
        assert sum(task in line for line in out.splitlines()) == 1
    status, out, _ = run(capsys, "plan", "--threshold", "0.01")
    assert status == 0
    family = out.split("under each prior of the family:\n")[1].splitlines()
    assert family[0].split() == ["prior", "trials"]
    assert family[2].split()[-1] == "367"  # the uniform prior: 0 of 367 runs, in closed form
