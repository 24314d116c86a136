"""Priors and data that give no proper posterior (alpha 0 and no success): the pair gets
no estimate, with a reason naming the count, the prior and what would make it proper, and
a note; the fallback chain rests the task on its other evidence and says so."""

import pandas as pd
import pytest
from scipy import stats

import bayes_eval
from bayes_eval.cli.main import main
from bayes_eval.messages import collected
from bayes_eval.specs import shipped_specs

REMEDY = "a prior with alpha > 0 gives one (Beta(1, 1); Jeffreys' Beta(0.5, 0.5))"


def zeroed(tmp_path, model: str, prior: str):
    """The shipped spec ``model`` with its ``prior`` set to Beta(0, 0)."""
    text = shipped_specs()[model].read_text()
    head, _, rest = text.partition(f"[priors.{prior}]")
    body, sep, tail = rest.partition("reason")
    lines = [
        f"{key} = 0.0" if key in ("alpha", "beta") else line
        for line in body.splitlines()
        for key in [line.split("=")[0].strip()]
    ]
    path = tmp_path / f"{model}_zero.toml"
    path.write_text(head + f"[priors.{prior}]" + "\n".join(lines) + "\n" + sep + tail)
    return path


def table(rows):
    columns = ["task", "method", "step", "run", "successes", "trials"]
    return pd.DataFrame(rows, columns=columns)


def test_an_end_to_end_count_of_no_success_under_beta_0_0(tmp_path, capsys):
    """0/20 under Beta(0, 0): no estimate and the reason, Clopper-Pearson still given;
    the other task's posterior is Beta(3, 17), as scipy has it; the command line succeeds
    with a note (it raised ``invalid Beta factors``)."""
    spec = zeroed(tmp_path, "end_to_end", "end_to_end")
    evidence = table(
        [["t0", "end_to_end", None, None, 0, 20], ["t3", "end_to_end", None, None, 3, 20]]
    )
    summary = bayes_eval.fit(evidence, spec).summary().set_index("task")
    assert pd.isna(summary.loc["t0", "upper"]) and pd.isna(summary.loc["t0", "mean"])
    assert summary.loc["t0", "provenance"].endswith(
        "no estimate: the end-to-end count has 0/20 successes: no proper posterior under "
        f"Beta(0, 0); {REMEDY}"
    )
    assert summary.loc["t0", "cp_upper"] == pytest.approx(stats.beta.ppf(0.975, 1, 20), rel=1e-9)
    assert summary.loc["t3", "upper"] == pytest.approx(stats.beta.ppf(0.975, 3, 17), rel=1e-9)
    path = tmp_path / "e.csv"
    evidence.to_csv(path, index=False)
    assert main(["fit", str(path), "--model", str(spec)]) == 0
    err = capsys.readouterr().err
    assert "note: 1 task(s) without an estimate: task 't0' (agent 'agent'): the end-to-end" in err


def test_the_chain_with_an_improper_end_to_end_prior_says_why(tmp_path):
    """phuong_chain reads a 0-success end-to-end count last, one pair at a time; under
    Beta(0, 0) it has no posterior, and the task gets the reason; a count with successes
    is still Beta(k, n - k)."""
    spec = zeroed(tmp_path, "phuong_chain", "end_to_end")
    rows = [["t0", "end_to_end", None, None, 0, 20], ["t3", "end_to_end", None, None, 3, 20]]
    summary = bayes_eval.fit(table(rows), spec).summary().set_index("task")
    assert pd.isna(summary.loc["t0", "upper"])
    assert summary.loc["t0", "provenance"].endswith(
        f"no estimate: the end-to-end count has 0/20 successes: no proper posterior under "
        f"Beta(0, 0); {REMEDY}"
    )
    assert summary.loc["t3", "upper"] == pytest.approx(stats.beta.ppf(0.975, 3, 17), rel=1e-9)


def test_a_milestone_of_no_success_under_haldane(tmp_path):
    """phuong2024, as published: the task gets no estimate, and the reason says what would
    give it one (an expert run, through phuong_chain), in the note too."""
    evidence = table([["t", "milestone", 1, None, 0, 20], ["t", "milestone", 2, None, 3, 20]])
    with collected() as notes:
        (provenance,) = bayes_eval.fit(evidence, "phuong2024").summary()["provenance"]
    assert "1 task(s) without an estimate: task 't' (agent 'agent'): milestone 1 has 0/20" in (
        " ".join(notes)
    )
    assert provenance.endswith(
        "no estimate: milestone 1 has 0/20 successes: no proper posterior under Beta(0, 0), "
        "and no expert best-of-N or golden-solution run for it (phuong_chain would use one)"
    )


def test_the_chain_rests_a_task_without_a_milestone_posterior_on_its_expert_steps():
    """A milestone of 0/20 and no expert run for it: phuong_chain passes the task to its
    expert-completion steps, the same estimate as those steps alone give, and says so."""
    steps = [["t", "expert_completion", 1, 1, 9, 10], ["t", "expert_completion", 2, 1, 8, 10]]
    milestones = [["t", "milestone", 1, None, 0, 20], ["t", "milestone", 2, None, 3, 20]]
    both = bayes_eval.fit(table(milestones + steps), "phuong_chain").summary()
    alone = bayes_eval.fit(table(steps), "phuong_chain").summary()
    columns = ["method", "mean", "median", "upper"]
    pd.testing.assert_frame_equal(both[columns], alone[columns])
    assert both["method"].item() == "expert_completion"
    assert "the milestone rung passed over: milestone 1 has 0/20 successes" in (
        both["provenance"].item()
    )


def test_an_expert_step_of_no_success_under_beta_0_0(tmp_path):
    spec = zeroed(tmp_path, "ecr2024", "step")
    steps = [["t", "expert_completion", 1, 1, 0, 10], ["t", "expert_completion", 2, 1, 8, 10]]
    (provenance,) = bayes_eval.fit(table(steps), spec).summary()["provenance"]
    assert provenance.endswith(
        "no estimate: run 1, step 1 has 0/10 successes: no proper posterior under "
        f"Beta(0, 0); {REMEDY}"
    )
