"""Run folders hold exactly one run, appear whole or not at all, and survive interrupts."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import xarray as xr

from bayes_eval import load_posterior
from bayes_eval.cli.main import main
from bayes_eval.errors import InputError
from bayes_eval.inference import interrupts
from bayes_eval.inference.interrupts import Interrupted
from bayes_eval.outputs.runfolder import MANIFEST, write_run
from bayes_eval.resources import example_evidence

EXAMPLE = str(example_evidence())


def run(capsys, *args):
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def listing(folder):
    return sorted(p.name for p in folder.iterdir())


def hidden(parent):
    return [p.name for p in parent.iterdir() if p.name.startswith(".bayes-eval-")]


def test_a_folder_of_other_files_is_refused_untouched(capsys, tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    status, out, err = run(capsys, "fit", EXAMPLE, "--out", str(folder))
    assert status == 2 and out == ""
    assert err == (
        f"error: --out: {folder} holds files that bayes-eval did not write (notes.txt); give "
        "a new or empty folder, or an earlier bayes-eval run to replace\n"
    )
    assert listing(folder) == ["notes.txt"] and hidden(tmp_path) == []


def test_a_new_run_replaces_an_earlier_one_whole(capsys, tmp_path):
    folder = tmp_path / "run"
    assert run(capsys, "fit", EXAMPLE, "--out", str(folder), "--threshold", "0.05")[0] == 0
    assert "report.html" in listing(folder)
    table = tmp_path / "other.csv"
    table.write_text("task,method,successes,trials\nt,end_to_end,1,9\n")
    status, out, _ = run(capsys, "fit", str(table), "--model", "end_to_end", "--out", str(folder))
    assert status == 0
    expected = [MANIFEST, "forest.png", "posterior.nc", "ppc.csv", "ppc.png", "summary.csv"]
    assert listing(folder) == expected  # the first run's report is gone with it
    assert f"wrote to {folder}: {', '.join(sorted(expected))}" in out
    assert (folder / "summary.csv").read_text().splitlines()[1].startswith("agent,t,end_to_end,")
    assert json.loads((folder / MANIFEST).read_text())["commands"] == ["fit"]
    assert hidden(tmp_path) == []


def test_report_and_calibrate_add_to_the_run_they_read(capsys, tmp_path):
    folder = tmp_path / "run"
    assert run(capsys, "fit", EXAMPLE, "--out", str(folder))[0] == 0
    fitted = set(listing(folder))
    assert run(capsys, "report", str(folder), "--threshold", "0.05", "--out", str(folder))[0] == 0
    assert fitted < set(listing(folder)) and "report.html" in listing(folder)
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["commands"] == ["fit", "report"]
    assert manifest["files"] == [name for name in listing(folder) if name != MANIFEST]


@pytest.mark.parametrize("source", ["folder", "posterior.nc"])
def test_a_report_keeps_the_run_it_reads_even_one_without_a_manifest(capsys, tmp_path, source):
    """A run written before run folders had a manifest is still a run; a report given the
    run's posterior file adds to that run as one given its folder does."""
    folder = tmp_path / "run"
    assert run(capsys, "fit", EXAMPLE, "--out", str(folder))[0] == 0
    (folder / MANIFEST).unlink()
    fitted = set(listing(folder))
    read = folder if source == "folder" else folder / source
    assert run(capsys, "report", str(read), "--threshold", "0.05", "--out", str(folder))[0] == 0
    assert fitted | {"report.html", MANIFEST} <= set(listing(folder))
    assert json.loads((folder / MANIFEST).read_text())["commands"] == ["report"]


def test_a_failed_write_leaves_the_earlier_run(tmp_path):
    folder = tmp_path / "run"
    write_run(folder, lambda staging: (staging / "a.csv").write_text("old"), command="fit")

    def failing(staging):
        (staging / "a.csv").write_text("new")
        raise OSError("disk full")

    with pytest.raises(InputError, match=r"out: cannot write the run to .*run \(disk full\)$"):
        write_run(folder, failing, command="fit")
    assert (folder / "a.csv").read_text() == "old" and hidden(tmp_path) == []


def test_folders_have_ordinary_permissions(tmp_path):
    folder = tmp_path / "run"
    write_run(folder, lambda staging: None, command="fit")
    umask = os.umask(0)
    os.umask(umask)
    assert folder.stat().st_mode & 0o777 == 0o777 & ~umask


def _command(*args):
    return [sys.executable, "-m", "bayes_eval", *args]


def test_an_interrupt_at_any_moment_leaves_one_whole_run(tmp_path):
    """Fault injection: interrupt `fit` (replacing an earlier run) at random moments, with
    SIGINT and with SIGTERM. The folder then holds the whole earlier run or the whole new
    one, never a mix, and no staging folder is left behind."""
    folder = tmp_path / "run"
    old = ["fit", EXAMPLE, "--out", str(folder), "--seed", "1"]
    new = ["fit", EXAMPLE, "--out", str(folder), "--seed", "2", "--threshold", "0.05"]
    references = {}
    for name, args in (("new", new), ("old", old)):  # the old one stays in place
        subprocess.run(_command(*args), check=True, capture_output=True)
        references[name] = (listing(folder), (folder / "summary.csv").read_bytes())
    start = time.perf_counter()
    subprocess.run(_command(*new), capture_output=True)
    duration = time.perf_counter() - start
    subprocess.run(_command(*old), check=True, capture_output=True)
    delays = np.random.default_rng(2).uniform(0.3, 1.1 * duration, (2, 2))
    signals = np.repeat([signal.SIGINT, signal.SIGTERM], 2)
    for signum, delay in zip(signals, delays.ravel(), strict=True):
        process = subprocess.Popen(_command(*new), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(delay)
        process.send_signal(signum)
        _, err = process.communicate()
        assert process.returncode in (0, 128 + signum, -signum), err
        assert b"Traceback" not in err or process.returncode == -signum
        state = (listing(folder), (folder / "summary.csv").read_bytes())
        assert state in references.values()
        assert hidden(tmp_path) == []
        if state == references["new"]:  # put the earlier run back for the next try
            subprocess.run(_command(*old), check=True, capture_output=True)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_during_sampling_ends_the_process_within_two_seconds(tmp_path, signum):
    """nutpie's chains run outside Python; the signal reaches the command while they
    sample (not when they finish), cancels them, and the process ends with 128 + signal,
    leaving nothing. stderr is a terminal so that the command says when sampling starts."""
    folder = tmp_path / "run"
    pairs = str(example_evidence().parent / "example_pooled.csv")
    main_end, child_end = os.openpty()
    process = subprocess.Popen(
        _command("fit", pairs, "--model", "joint", "--out", str(folder)),
        stdout=subprocess.PIPE,
        stderr=child_end,
    )
    os.close(child_end)
    said, sampling = bytearray(), threading.Event()

    def read():  # drained to the end: a full terminal would stop the command writing
        with contextlib.suppress(OSError):
            while chunk := os.read(main_end, 4096):
                said.extend(chunk)
                if b"sampling: nutpie" in said:
                    sampling.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert sampling.wait(120), bytes(said)
    time.sleep(0.5)  # well inside the chains (joint samples for about 10 s)
    process.send_signal(signum)
    start = time.perf_counter()
    out, _ = process.communicate(timeout=60)
    stopped = time.perf_counter() - start
    reader.join(5)
    os.close(main_end)
    assert process.returncode == 128 + signum, bytes(said)[-300:]
    assert stopped < 2, f"{stopped:.1f} s"
    assert out == b"" and bytes(said).rstrip().endswith(
        f"interrupted ({signal.Signals(signum).name})".encode()
    )
    assert not folder.exists() and hidden(tmp_path) == []


def test_an_interrupt_inside_a_finaliser_still_stops_the_command():
    """Python swallows an exception raised in ``__del__`` ("Exception ignored"): the
    race behind an exit 0 with a traceback in the fault-injection test above."""

    class SignalledWhileFinalised:
        def __del__(self):
            signal.raise_signal(signal.SIGTERM)

    with pytest.raises(Interrupted) as caught, interrupts.raising():
        SignalledWhileFinalised()  # finalised at once: the signal lands inside __del__
        for _ in range(500):  # the signal, sent again, lands here
            time.sleep(0.01)
    assert caught.value.exit_status == 143


def test_an_interrupt_during_an_import_waits_until_the_module_is_whole(tmp_path, monkeypatch):
    """An exception raised inside a compiled extension's initialiser aborts the process
    (the fault-injection test above once died so, in jaxlib's). A signal that lands while
    a module is being imported is raised after the import, with the module whole."""
    (tmp_path / "signalled_on_import.py").write_text(
        "import signal, time\n"
        "signal.raise_signal(signal.SIGTERM)\n"
        "time.sleep(0.05)\n"  # the signal, sent again, would land here without the wait
        "whole = True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(Interrupted) as caught, interrupts.raising():
        import signalled_on_import  # noqa: F401

        for _ in range(500):
            time.sleep(0.01)
    assert sys.modules.pop("signalled_on_import").whole
    assert caught.value.exit_status == 143


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_an_interrupt_that_cuts_a_constructor_leaves_no_traceback(capfd, monkeypatch):
    """An object whose constructor the signal stopped half-way fails in its ``__del__``
    (h5netcdf's ``File`` once did, in the fault-injection test above): Python would print
    "Exception ignored" and a traceback after the command's line. The command says one
    line and exits 130; with ``--debug`` the traceback is shown."""
    from bayes_eval.cli import main as cli

    class HalfBuilt:
        def __init__(self):
            signal.raise_signal(signal.SIGINT)
            self.closed = False  # never reached

        def __del__(self):
            if not self.closed:  # AttributeError: the constructor never got here
                pass

    def command(args):
        HalfBuilt()

    monkeypatch.setitem(cli.COMMANDS, "check", command)
    monkeypatch.setattr(sys, "unraisablehook", sys.__unraisablehook__)  # Python's own, prints
    hook = sys.unraisablehook
    try:
        assert cli.main(["check", "RUN"]) == 130
        assert capfd.readouterr().err == "interrupted (SIGINT)\n"
    finally:
        sys.unraisablehook = hook
    assert cli.main(["check", "RUN", "--debug"]) == 130
    err = capfd.readouterr().err
    assert "Traceback" in err and "interrupted (SIGINT)\n" in err


READERS = [
    ["check", "{run}"],
    ["report", "{run}", "--threshold", "0.05", "--out", "{tmp}/report"],
    ["calibrate", "{run}", "--truth", "{tmp}/truth.csv"],
    ["plan", "{run}", "--threshold", "0.05", "--task", "credential_harvest"],
    ["plan", "{run}", "--budget", "4", "--attempts", "10"],
    ["compare", "{run}", "{run}"],
    ["compare-agents", "{run}", "agent-a", "agent-b"],
    ["horizon", "{run}"],
]


@pytest.fixture(scope="module")
def fitted_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fitted") / "run"
    assert main(["fit", EXAMPLE, "--out", str(folder)]) == 0
    return folder


EDITS = [(command, "changed") for command in READERS] + [(READERS[0], "removed")]


@pytest.mark.parametrize(
    ("command", "edit"), EDITS, ids=lambda x: x if isinstance(x, str) else x[0]
)
def test_a_run_folder_edited_after_writing_is_refused_by_every_reader(
    capsys, tmp_path, fitted_run, command, edit
):
    """The manifest records each file's SHA-256; a file changed by one byte is named in
    one line by every command that reads a run, and a file removed likewise (all of them
    read through ``load_posterior``: one command shows it)."""
    run_dir = tmp_path / "run"
    shutil.copytree(fitted_run, run_dir)
    (tmp_path / "truth.csv").write_text("agent,task,successes,trials\nagent-a,t,1,2\n")
    edited = run_dir / "summary.csv"
    if edit == "changed":
        edited.write_bytes(edited.read_bytes().replace(b"0.", b"1.", 1))
    else:
        edited.unlink()
    capsys.readouterr()
    args = [part.format(run=run_dir, tmp=tmp_path) for part in command]
    status = main(args)
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1, err
    why = "changed since bayes-eval wrote it" if edit == "changed" else "missing from the run"
    assert err.startswith(f"error: {edited}: {why}")
    assert not (tmp_path / "report").exists()


def test_an_exact_posterior_that_does_not_follow_from_its_evidence_is_refused(tmp_path, fitted_run):
    """Beta shapes edited inside posterior.nc, its evidence and evidence hash left as they
    were (a file outside its run folder, or one whose manifest was rewritten): an exact fit
    is fitted again from its evidence and the difference refused; NaN shapes too."""
    tree = xr.open_datatree(fitted_run / "posterior.nc", engine="h5netcdf").load()
    alpha = tree["conjugate"]["alpha"].values
    at = tuple(np.argwhere(np.isfinite(alpha))[0])
    for value in (alpha[at] + 1, np.nan):
        edited = tree.copy(deep=True)
        edited["conjugate"]["alpha"].values[at] = value
        path = tmp_path / "posterior.nc"
        edited.to_netcdf(path, engine="h5netcdf")
        with pytest.raises(
            InputError, match=r"posterior.nc: the stored posterior \(alpha\) is not"
        ):
            load_posterior(path)
    tree.to_netcdf(path, engine="h5netcdf")
    assert load_posterior(path).summary().equals(load_posterior(fitted_run).summary())
