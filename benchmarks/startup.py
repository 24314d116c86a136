"""How long the command line and the package take to start, as ratios in one run.

Run from the repository root (needs the package installed):

    python benchmarks/startup.py [--repeats 7]

Times, each the fastest of REPEATS runs in fresh interpreters, interleaved so that load
on the machine falls on all of them alike: ``bayes-eval --version``, ``bayes-eval
--help``, ``bayes-eval fit --help`` and ``python -c "import bayes_eval"`` against
``python -c "import numpy, pandas"``. Targets: ``--help`` and ``--version`` within 0.3 s;
``import bayes_eval`` within 1.3 times ``import numpy, pandas``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time

TARGET_SECONDS = 0.3
TARGET_IMPORT_RATIO = 1.3


def commands() -> dict[str, list[str]]:
    script = shutil.which("bayes-eval") or sys.exit("bayes-eval is not installed")
    return {
        "bayes-eval --version": [script, "--version"],
        "bayes-eval --help": [script, "--help"],
        "bayes-eval fit --help": [script, "fit", "--help"],
        "import bayes_eval": [sys.executable, "-c", "import bayes_eval"],
        "import numpy, pandas": [sys.executable, "-c", "import numpy, pandas"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    best = dict.fromkeys(commands(), float("inf"))
    for _ in range(args.repeats):
        for name, command in commands().items():
            start = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True)
            best[name] = min(best[name], time.perf_counter() - start)
    reference = best["import numpy, pandas"]
    print(f"fastest of {args.repeats} runs each, interleaved")
    for name, seconds in best.items():
        print(f"{name:24s} {seconds:6.3f} s   {seconds / reference:5.2f}x import numpy, pandas")
    for name in ("bayes-eval --version", "bayes-eval --help"):
        verdict = "holds" if best[name] <= TARGET_SECONDS else "FAILS"
        print(f"target: {name} within {TARGET_SECONDS} s: {verdict}")
    ratio = best["import bayes_eval"] / reference
    verdict = "holds" if ratio <= TARGET_IMPORT_RATIO else "FAILS"
    print(f"target: import bayes_eval within {TARGET_IMPORT_RATIO}x: {ratio:.2f}x, {verdict}")


if __name__ == "__main__":
    main()
