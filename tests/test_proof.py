"""Proof by running torch (the verification harness).

For every rewrite fixture (a program with a ``.fixed`` golden), in a subprocess each:
(a) the golden fixed text matches, (b) a second fix changes nothing, (c) the fixed text
compiles and re-checks clean -- those three are test_fixtures.py; here: (d) the
original fails on real CPU torch, (e) the fixed program runs on real CPU torch, and
(f) under the CUDA simulator with 1, 2 and 4 GPUs the original and the fixed program
put every parameter, buffer and output on the same logical device with bit-equal
values. Deliberately wrong rewrites in fixtures/negative must be rejected.
"""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from helpers import FIXTURES, fixture_programs
from torchdevlint.sim.proof import GPU_COUNTS, prove

REWRITES = [p for p in fixture_programs() if p.with_name(p.name + ".fixed").exists()]
# what `fix` alone gives, where it differs from `--unsafe-fixes`: behaviour unchanged
SAFE_REWRITES = [p for p in fixture_programs() if p.with_name(p.name + ".safe").exists()]
NEGATIVES = sorted((FIXTURES / "negative").glob("*.py"))

# Where a fixture departs from "the original fails on CPU, the rewrite runs there",
# and why.
EXPECTATIONS = {
    # the rewrite keeps torch.cuda.Stream/synchronize/memory_allocated: CUDA-only APIs
    "tdl102/executor_streams.py": {"fixed_runs_on_cpu": False},
    # TDL104 has no fix: the thread's pin_memory() still needs an accelerator
    "tdl104/loader_thread.py": {"fixed_runs_on_cpu": False},
    # the module moves to the "cuda:1" DataParallel needs (TDL007, not selected here,
    # gives the fallback): a placement bug fixed, the original fails under the simulator
    "tdl201/literal_other_gpus.py": {"fixed_runs_on_cpu": False, "fixes_placement": True},
    # the module moves to the "cuda:0" it names (TDL007, not selected here, gives the fallback)
    "tdl201/literal_first_gpu.py": {"fixed_runs_on_cpu": False},
    # NCCL process groups: the CPU build has no NCCL (nor a rendezvous here); the
    # simulator runs them as one-process groups
    "tdl106/torchrun_script.py": {"fixed_runs_on_cpu": False},
    "tdl106/tutorial_setup.py": {"fixed_runs_on_cpu": False},
    "tdl106/elastic_launcher.py": {"fixed_runs_on_cpu": False},
    # NCCL only when the worker trains on CUDA (nerfstudio's launcher): gloo runs on the CPU
    # before, and the rewrite's device_id is None there (a CUDA device_id would stop it)
    "tdl106/cpu_or_nccl_workers.py": {"original_fails_on_cpu": False},
    # the library function already guards on `magnitude.is_cuda`: it ran on CPU before too
    "tdl002/istft_window.py": {"original_fails_on_cpu": False},
    # the move is under a test of the weight's device (it ran on CPU before too); with the
    # model on the last of several GPUs the original mixes devices and the rewrite runs
    "tdl002/multicrop_device_type.py": {"original_fails_on_cpu": False, "fixes_placement": True},
    # the weight on the last of several GPUs: the original's scale on the current device
    # mixes with it, the rewrite's follows it (on one GPU both agree)
    "tdl002/quantizer_qparams.py": {"fixes_placement": True},
    # the rank's device is a CUDA device by design (no CPU fallback for per-rank GPU code)
    "tdl003/spawn_worker.py": {"fixed_runs_on_cpu": False},
    "tdl003/torchrun_literal_device.py": {"fixed_runs_on_cpu": False},
    "tdl003/build_then_bind.py": {"fixed_runs_on_cpu": False},
    # the legacy type converts only where the chunk's device is a GPU (neural-style's
    # ModelParallel): it ran on CPU before too; with two GPUs the original feeds the
    # second chunk from cuda:0, the rewrite from the chunk's own device
    "tdl005/model_parallel_chunks.py": {"original_fails_on_cpu": False, "fixes_placement": True},
    # the aliases and `.cuda()` calls follow a `cuda = torch.cuda.is_available()` flag:
    # the script ran on CPU before too; the simulator shows the same placement after
    "tdl005/cgan_alias_idiom.py": {"original_fails_on_cpu": False},
    # every `.cuda()` is under `if device == "cuda":` (mmaction's test inputs): it ran on CPU
    # before too, and the safe rewrite places everything where it did
    "tdl001/demo_inputs_device_param.py": {"original_fails_on_cpu": False},
    # the types follow `if torch.cuda.is_available():` (the statement form of the alias
    # idiom): the script ran on CPU before too; the simulator shows the same placement after
    "tdl005/dtype_branch_alias.py": {"original_fails_on_cpu": False},
    # the dropped moves follow the model's device (CPU there): the script ran on CPU before
    # too; with the model on a GPU the original feeds it CPU tensors and the rewrite does not
    "tdl009/shape_probe.py": {"original_fails_on_cpu": False, "fixes_placement": True},
    # the moves are under `if args.cuda:` (False on the CPU): the script ran there before too;
    # with a GPU the original's loss weights stay on the CPU beside outputs on the GPU
    "tdl009/class_weights.py": {"original_fails_on_cpu": False, "fixes_placement": True},
    # the default type is CUDA only under `if torch.cuda.is_available():` (DeepXDE's backend)
    "tdl005/pde_backend_default_type.py": {"original_fails_on_cpu": False},
}


def _id(p):
    return str(p.relative_to(FIXTURES))


@pytest.fixture(scope="module")
def verdicts():
    jobs = [(p, p.with_name(p.name + ".fixed"), EXPECTATIONS.get(_id(p), {})) for p in REWRITES]
    jobs += [(p, p.with_name(p.name + ".wrong"), {}) for p in NEGATIVES]
    jobs += [(p, p.with_name(p.name + ".safe"), {"same_on_cpu": True}) for p in SAFE_REWRITES]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = pool.map(lambda job: prove(str(job[0]), str(job[1]), **job[2]), jobs)
        return {_id(job[1]): verdict for job, verdict in zip(jobs, results)}


def test_there_is_something_to_prove():
    assert len(REWRITES) >= 10 and len(NEGATIVES) >= 3


@pytest.mark.parametrize("path", REWRITES, ids=_id)
def test_rewrite_is_proven(verdicts, path):
    verdict = verdicts[_id(path) + ".fixed"]
    assert verdict.ok, "\n".join(verdict.problems)
    # not vacuous: the simulator really placed something on a GPU
    ran = [side[f"sim{n}"] for side in (verdict.original, verdict.fixed) for n in GPU_COUNTS
           if "values" in side[f"sim{n}"]]
    assert any(v[0].startswith("cuda:") for r in ran for v in r["values"].values())


@pytest.mark.parametrize("path", [p for p in REWRITES if "tdl106" in p.parts], ids=_id)
def test_process_group_rewrite_binds_the_device(verdicts, path):
    """Beyond equal values: under the simulator the original's NCCL group has no device
    bound and the rewrite's has one, with every GPU count."""
    verdict = verdicts[_id(path) + ".fixed"]
    for n in GPU_COUNTS:
        assert verdict.original[f"sim{n}"]["setup"]["unbound_process_groups"] == 1
        assert verdict.fixed[f"sim{n}"]["setup"]["unbound_process_groups"] == 0


@pytest.mark.parametrize("path", SAFE_REWRITES, ids=_id)
def test_safe_rewrite_changes_no_behaviour(verdicts, path):
    """`fix` without --unsafe-fixes: on CPU torch the rewrite fails as the original did (or
    runs to the same values), and under 1, 2 and 4 simulated GPUs it places everything
    where the original did, bit-equal."""
    verdict = verdicts[_id(path) + ".safe"]
    assert verdict.ok, "\n".join(verdict.problems)
    ran = [verdict.original[f"sim{n}"] for n in GPU_COUNTS if "values" in verdict.original[f"sim{n}"]]
    assert any(v[0].startswith("cuda:") for r in ran for v in r["values"].values())


def test_a_safe_rewrite_that_changes_behaviour_is_caught(tmp_path):
    """The safe check is not vacuous: a CPU fallback passed off as safe is rejected (the
    original fails on CPU torch, the fallback runs)."""
    original = FIXTURES / "tdl001" / "train_loop.py"
    verdict = prove(str(original), str(original.with_name("train_loop.py.fixed")), same_on_cpu=True)
    assert not verdict.ok and any(p.startswith("on CPU torch") for p in verdict.problems)


def test_cpu_failures_compare_by_kind():
    """Two refusals of CUDA by CPU torch are one kind of failure (a legacy CUDA type's
    TypeError, `.to("cuda")`'s AssertionError); other errors compare by exception."""
    from torchdevlint.sim.proof import _failure

    legacy = {"error": "TypeError: type torch.cuda.FloatTensor not available. Torch not compiled with CUDA enabled."}
    moved = {"error": "AssertionError: Torch not compiled with CUDA enabled"}
    assert _failure(legacy) == _failure(moved) == "no CUDA"
    assert _failure({"error": "TypeError: bad argument"}) != _failure(moved)
    assert _failure({"values": {}}) is None


@pytest.mark.parametrize("path", NEGATIVES, ids=_id)
def test_wrong_rewrite_is_rejected(verdicts, path):
    verdict = verdicts[_id(path) + ".wrong"]
    assert not verdict.ok
    assert any("simulated GPU" in p for p in verdict.problems), verdict.problems


def test_each_run_is_a_process_of_its_own_forked_warm_or_fresh(tmp_path, monkeypatch):
    """Runs fork from a server that imported torch once: what one program changes in torch
    the next run does not see, a run past its time is stopped, a program that exits is a
    failed run with its output, and a run reports what a fresh interpreter reports."""
    from torchdevlint.sim.proof import run_in_subprocess

    changes = tmp_path / "changes.py"
    changes.write_text("import torch\n\n\ndef main():\n    torch.set_default_dtype(torch.float64)\n"
                       "    torch.tdl_marker = 1\n    return torch.zeros(1)\n")
    reads = tmp_path / "reads.py"
    reads.write_text("import torch\n\n\ndef main():\n    assert not hasattr(torch, 'tdl_marker')\n"
                     "    return torch.zeros(1)\n")
    assert run_in_subprocess(str(changes))["cpu"]["values"]["main()"][1] == "torch.float64"
    assert run_in_subprocess(str(reads))["cpu"]["values"]["main()"][1] == "torch.float32"
    slow = tmp_path / "slow.py"
    slow.write_text("import time\n\n\ndef main():\n    time.sleep(60)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        run_in_subprocess(str(slow), timeout=1)
    exits = tmp_path / "exits.py"
    exits.write_text("import sys\n\n\ndef main():\n    print('giving up')\n    sys.exit(3)\n")
    with pytest.raises(RuntimeError, match="giving up"):
        run_in_subprocess(str(exits))
    program = str(FIXTURES / "tdl003" / "spawn_worker.py")  # spawns processes of its own
    forked = run_in_subprocess(program)
    monkeypatch.delattr(os, "fork")  # where there is no fork: a fresh interpreter per run
    assert run_in_subprocess(program) == forked
