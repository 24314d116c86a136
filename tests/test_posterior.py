"""Run folders of an older version: refused with one line that says how to refit."""

from pathlib import Path

import pandas as pd
import pytest

import bayes_eval
from bayes_eval import InputError, load_posterior
from bayes_eval.cli.main import main
from bayes_eval.results.posterior import FILE_FORMAT, package_version

OLD_RUN = Path(__file__).parent / "data" / "run_v0.1.0"


def test_a_run_folder_of_version_0_1_is_refused_with_the_refit_command():
    with pytest.raises(InputError) as caught:
        load_posterior(OLD_RUN)
    message = str(caught.value)
    assert "\n" not in message
    assert "written by bayes_eval 0.1.0 in file format 1" in message
    assert (
        f"bayes_eval {package_version()} does not read (it reads format {FILE_FORMAT})" in message
    )
    assert message.endswith(
        "refit with: bayes-eval fit evidence.csv --model end_to_end --seed 7 --level 0.975 "
        "--out NEW_FOLDER"
    )


def test_the_refit_command_reproduces_the_old_exact_numbers(tmp_path, monkeypatch):
    """Exact fits are deterministic: the refit gives the old summary's numbers."""
    monkeypatch.chdir(tmp_path)
    Path("evidence.csv").write_text("task,method,successes,trials\ntask_a,end_to_end,2,10\n")
    old = pd.read_csv(OLD_RUN / "summary.csv")
    new = bayes_eval.fit("evidence.csv", "end_to_end", seed=7, level=0.975).summary()
    numbers = ["mean", "median", "sd", "lower", "upper", "log10_upper", "cp_upper"]
    pd.testing.assert_frame_equal(new[numbers], old[numbers])


@pytest.mark.parametrize("command", ["check", "calibrate", "plan", "report"])
def test_every_command_that_reads_a_run_folder_refuses_it(capsys, command, tmp_path):
    extra = {
        "check": [],
        "calibrate": ["--truth", str(OLD_RUN / "summary.csv")],
        "plan": ["--task", "task_a", "--threshold", "0.1"],
        "report": ["--threshold", "0.1", "--out", str(tmp_path / "r")],
    }[command]
    status = main([command, str(OLD_RUN), *extra])
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "written by bayes_eval 0.1.0" in err and "Traceback" not in err
