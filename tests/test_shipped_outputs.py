"""Every shipped example writes the CSV files recorded in ``tests/data/shipped_outputs``
(by ``scripts/record_outputs.py``, at the commit its ``RECORDED.md`` names): a change of
the code that is not meant to change the numbers must not. On the stack and processor
that recorded them (``stack.json``) the files must be the same bytes; elsewhere, where
the last digits may move, the exact models' files hold the same text and the same numbers
within a relative 1e-9. MCMC compiled for another processor draws other chains (on AVX2
against an AVX-512 recording the pooled bounds moved by up to 5%), so the pooled models
are compared on the recording's stack only. The exact models run in the default suite;
the pooled ones (MCMC) in the slow suite."""

import importlib.util
import io
import json
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "tests" / "data" / "shipped_outputs"


def _recorder():
    path = ROOT / "scripts" / "record_outputs.py"
    spec = importlib.util.spec_from_file_location("record_outputs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECORDER = _recorder()
SLOW = pytest.mark.slow
CASES = [pytest.param(*case, id=".".join(case)) for case in RECORDER.EXACT]
CASES += [pytest.param(*case, id=".".join(case), marks=SLOW) for case in RECORDER.POOLED]


def test_every_case_has_its_recorded_files():
    """The folder holds the files of exactly the cases the recorder runs, a summary for
    each, and says which commit, stack and processor recorded them."""
    names = {path.name for path in RECORDED.glob("*.csv")}
    cases = {name.rsplit(".", 2)[0] for name in names}
    assert cases == {f"{dataset}.{model}" for dataset, model in RECORDER.CASES}
    assert all(f"{case}.summary.csv" in names for case in cases)
    assert "at commit" in (RECORDED / "RECORDED.md").read_text()
    assert json.loads((RECORDED / "stack.json").read_text()).keys() == RECORDER.stack().keys()


@pytest.mark.parametrize(("dataset", "model"), CASES)
def test_a_shipped_example_writes_the_recorded_files(dataset, model):
    written = RECORDER.outputs(dataset, model)
    recorded = {path.name: path.read_bytes() for path in RECORDED.glob(f"{dataset}.{model}.*.csv")}
    assert written.keys() == recorded.keys()
    if RECORDER.stack() == json.loads((RECORDED / "stack.json").read_text()):
        differ = [name for name, content in written.items() if content != recorded[name]]
        assert not differ, f"not the recorded bytes: {differ}"
        return
    if (dataset, model) in RECORDER.POOLED:
        pytest.skip("MCMC compiled for another processor draws other chains: bytes on the stack")
    for name, content in written.items():
        now, then = (pd.read_csv(io.BytesIO(data)) for data in (content, recorded[name]))
        pd.testing.assert_frame_equal(now, then, check_exact=False, rtol=1e-9, atol=0)
