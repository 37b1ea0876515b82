"""The other-CPUs tier: the notebooks whose text could depend on the CPU, under strict nbval again,
with the same stored outputs, on two emulated CPUs unlike the one that stored them.

A learner's CPU, thread count and BLAS add floating-point numbers in another order, and training
amplifies those last bits. Only a notebook that trains a model while it runs can print something
that moves, so only those run here (``TRAINS_LIVE``); the others load shipped weights or compute
nothing that training amplifies, and the README's test command already checks them. Each
emulated CPU (``ATEN_CPU_CAPABILITY``: PyTorch's kernels without vector instructions, or AVX2
only; ``MKL_CBWR``: MKL's matching code path) runs with a learner's two torch threads.

A slow tier (``-m slow``; ``.ci/run`` runs it with the other slow tiers, in one pytest run, so the
workers stay busy): each (notebook, CPU) pair is one test, a pytest of its own in a fresh process,
because the CPU is chosen when torch is loaded.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The notebooks that train a model while they run and print or assert what it reached: 04 (a
# deep toy stack, post-norm against pre-norm), 07 (the decoder with and without the shift right)
# and 09 (the translator: its training is the lesson). 10, 11, 12, 14 and 15 load shipped
# weights; 13 trains in several processes, and asserts only that their gradients equal one
# process's (to 1e-6), which no CPU changes.
TRAINS_LIVE = ["04_add_norm_and_feed_forward.ipynb", "07_decoder.ipynb", "09_training.ipynb"]

EMULATED_CPUS = {
    "no-vector": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"},
}


def _params():
    return [pytest.param(name, cpu, marks=pytest.mark.xdist_group(f"cpus {name} {cpu}"))
            for name in TRAINS_LIVE for cpu in EMULATED_CPUS]


def test_the_tier_runs_notebooks_that_exist():
    names = {path.name for path in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    assert TRAINS_LIVE and set(TRAINS_LIVE) <= names, set(TRAINS_LIVE) - names


@pytest.mark.slow
@pytest.mark.parametrize("name, cpu", _params())
def test_notebook_gives_its_stored_text_on_another_cpu(name, cpu):
    env = {**os.environ, **EMULATED_CPUS[cpu], "OMP_NUM_THREADS": "2"}
    env.pop("PYTEST_XDIST_WORKER", None)
    command = [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "-q",
               f"notebooks/{name}"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, (
        f"{name} on the emulated CPU {cpu} ({EMULATED_CPUS[cpu]}, 2 threads) printed other text "
        f"than its stored outputs:\n{done.stdout[-6000:]}\n{done.stderr[-2000:]}")
    assert " passed" in done.stdout and "failed" not in done.stdout
