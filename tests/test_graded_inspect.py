"""An audit read from Inspect logs (``--audit-scorer``): a small eval run offline on
``mockllm`` with two scorers, a judge that errs by a fixed rule and a trusted re-score of
some samples; the bounds checked against the same rule counted by hand, scipy and the
independent integral of ``tests/test_grader.py``."""

import io

import pandas as pd
import pytest
from scipy import optimize, stats
from test_grader import LEVEL, reference_cdf

import bayes_eval
from bayes_eval.cli.main import main

pytest.importorskip("inspect_ai")

from inspect_ai import Task  # noqa: E402
from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.model import ModelOutput  # noqa: E402
from inspect_ai.scorer import CORRECT, INCORRECT, Score, accuracy, scorer  # noqa: E402
from inspect_ai.solver import solver  # noqa: E402

SAMPLES, EPOCHS = 6, 4
AUDITED = (0, 1, 2)  # the samples a human scored again, every epoch


def truth(sample: int, epoch: int) -> bool:
    return (sample + epoch) % 3 == 0


def judged(sample: int, epoch: int) -> bool:
    """The judge: right but for a missed success on sample 0 and a false alarm on sample 1."""
    if (sample, epoch) == (0, 3):
        return False  # truth(0, 3) is a success
    if (sample, epoch) == (1, 1):
        return True  # truth(1, 1) is a failure
    return truth(sample, epoch)


@solver
def fixed():
    async def solve(state, generate):
        state.output = ModelOutput.from_content(model=str(state.model), content="done")
        return state

    return solve


@scorer(metrics=[accuracy()])
def judge():
    async def score(state, target):
        return Score(value=CORRECT if judged(int(state.sample_id), state.epoch) else INCORRECT)

    return score


@scorer(metrics=[accuracy()])
def human():
    async def score(state, target):
        if int(state.sample_id) not in AUDITED:
            return None  # not re-scored
        return Score(value=CORRECT if truth(int(state.sample_id), state.epoch) else INCORRECT)

    return score


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("audited")
    task = Task(
        name="vault",
        dataset=[Sample(input=f"task {i}", id=i) for i in range(SAMPLES)],
        solver=fixed(),
        scorer=[judge(), human()],
        epochs=EPOCHS,
    )
    inspect_eval(task, model="mockllm/model", log_dir=str(folder), display="none")
    return folder


def by_hand():
    """The audit's counts and each sample's graded and true successes, from the rules."""
    epochs = range(1, EPOCHS + 1)
    runs = [(s, e) for s in AUDITED for e in epochs]
    detected = sum(truth(*r) and judged(*r) for r in runs)
    positives = sum(truth(*r) for r in runs)
    cleared = sum(not truth(*r) and not judged(*r) for r in runs)
    return detected, positives, cleared, len(runs) - positives


def test_the_trusted_scores_audit_the_judge_and_replace_its_verdicts(logs, capsys):
    """A re-scored sample's bound is the Beta of its true successes (every run audited);
    another's is the integral over ``p``, ``se`` and ``sp`` with the audit counted by hand;
    from Python and from the command line."""
    evidence = bayes_eval.read_inspect(logs, scorer="judge", audit_scorer="human")
    assert evidence.audit.graders == ["judge"] and len(evidence.audit.table) == 12
    fit = bayes_eval.fit(evidence, "end_to_end").summary().set_index("task")
    detected, positives, cleared, negatives = by_hand()
    sensitivity = (1 + detected, 1 + positives - detected)
    specificity = (1 + cleared, 1 + negatives - cleared)
    for sample in range(SAMPLES):
        upper = fit.loc[f"vault/{sample}", "upper"]
        epochs = range(1, EPOCHS + 1)
        if sample in AUDITED:
            k = sum(truth(sample, e) for e in epochs)
            assert upper == pytest.approx(stats.beta.ppf(LEVEL, 1 + k, 1 + EPOCHS - k), rel=1e-9)
            continue
        k = sum(judged(sample, e) for e in epochs)
        case = (k, EPOCHS, (1, 1), sensitivity, specificity)
        expected = optimize.brentq(lambda x, c=case: reference_cdf(x, *c) - LEVEL, 1e-6, 1 - 1e-9)
        assert upper == pytest.approx(expected, rel=1e-6)
    args = ["fit", logs, "--scorer", "judge", "--audit-scorer", "human", "--model", "end_to_end"]
    status = main([str(a) for a in [*args, "--format", "csv"]])
    out = capsys.readouterr().out
    assert status == 0
    cli = pd.read_csv(io.StringIO(out)).set_index("task")
    pd.testing.assert_series_equal(cli["upper"], fit["upper"], rtol=1e-12)


def test_an_audit_scorer_no_run_carries_is_refused(logs):
    with pytest.raises(bayes_eval.InputError, match="no run has a score from audit scorer"):
        bayes_eval.read_inspect(logs, scorer="judge", audit_scorer="nobody")
