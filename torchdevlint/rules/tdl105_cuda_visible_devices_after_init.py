"""TDL105 cuda-visible-devices-after-init: ``CUDA_VISIBLE_DEVICES`` set after CUDA started."""

from __future__ import annotations

from typing import Iterable

from ..model import Applicability, Fix, Violation
from .base import Context, Example, Rule


class CudaVisibleDevicesAfterInit(Rule):
    code = "TDL105"
    name = "cuda-visible-devices-after-init"
    summary = "`CUDA_VISIBLE_DEVICES` assigned after CUDA was initialised has no effect"
    triggers = ("CUDA_VISIBLE_DEVICES",)
    also_requires = ("cuda", "DataParallel", "accelerator")
    needs = (("str~CUDA_VISIBLE_DEVICES", "name:CUDA_VISIBLE_DEVICES"),)  # the gate on the code
    fixable = "never"
    fix_summary = 'display (names where CUDA started)'
    what = """
        A write of `CUDA_VISIBLE_DEVICES` (`os.environ[...] = ...`, `del os.environ[...]`,
        `os.environ.update(...)`, `os.environ.setdefault(...)`, `os.putenv(...)`) that
        runs after a call that initialises CUDA on the same path of the process:
        `torch.cuda.is_available()`, `device_count()`, `current_device()`,
        `set_device()`, `get_device_name()`/`properties()`, `synchronize()`, a stream,
        `nn.DataParallel(...)`, `.cuda()`, `.pin_memory()`, or a placement on a literal
        CUDA device (`device="cuda:1"`, `.to("cuda")`). Execution order is followed at
        module level (a script, `if __name__ == "__main__":` included) and inside each
        function, through the helpers of this file that run first (a CUDA query in a
        helper called before the write counts; so does a write in a helper called
        after one). Quiet when the write comes before any such call, whatever the import
        order (`import torch` alone does not initialise CUDA).
    """
    why = """
        CUDA reads `CUDA_VISIBLE_DEVICES` once, when it initialises. After that the
        assignment changes the environment of child processes only: this process keeps
        seeing every GPU, so the job meant for GPUs 2,3 silently runs on GPU 0 (and
        `is_available()` initialises the driver unless `PYTORCH_NVML_BASED_CUDA_CHECK=1`).
    """
    example = """
        import os
        n_gpus = torch.cuda.device_count()
        os.environ["CUDA_VISIBLE_DEVICES"] = args.gpus
    """
    use_instead = """
        import os
        os.environ["CUDA_VISIBLE_DEVICES"] = args.gpus   # before any CUDA call
        n_gpus = torch.cuda.device_count()
        # or set it at launch: CUDA_VISIBLE_DEVICES=2,3 python train.py
    """
    fix_safety = """
        Display only: moving the assignment before the first CUDA call can change what
        the code between them sees; the message names that call and its line.
    """
    VALID = (
        "import os, torch\nos.environ['CUDA_VISIBLE_DEVICES'] = '1'\nprint(torch.cuda.device_count())\n",
        "import torch, os\ndef main(gpus):\n    os.environ['CUDA_VISIBLE_DEVICES'] = gpus\n"
        "    return torch.zeros(1).cuda()\n",
        "import os\nimport torch\nd = torch.device('cuda')\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\n",
        "import os, torch\nn = os.environ['CUDA_VISIBLE_DEVICES']\ntorch.cuda.device_count()\n",
        "import os, torch\ndef report():\n    return torch.cuda.device_count()\n"
        "os.environ['CUDA_VISIBLE_DEVICES'] = '2'\nreport()\n",
        "import os, torch\nif args.cpu:\n    torch.cuda.is_available()\n"
        "elif args.gpus:\n    os.environ['CUDA_VISIBLE_DEVICES'] = args.gpus\n",
        "import os, sys, torch\ndef main(args):\n    if args.list:\n        print(torch.cuda.device_count())\n"
        "        sys.exit(0)\n    os.environ['CUDA_VISIBLE_DEVICES'] = args.gpus\n",
        "import os, torch\ndef main(args):\n    if args.list:\n        print(torch.cuda.device_count())\n"
        "        return\n    os.environ['CUDA_VISIBLE_DEVICES'] = args.gpus\n",
        "import os, torch\ntorch.cuda.manual_seed_all(0)\ntorch.backends.cudnn.benchmark = True\n"
        "os.environ['CUDA_VISIBLE_DEVICES'] = '0'\n",
    )
    INVALID = (
        Example("import os, torch\nprint(torch.cuda.is_available())\nos.environ['CUDA_VISIBLE_DEVICES'] = '1'\n"),
        Example(
            "import os, torch\ndef count():\n    return torch.cuda.device_count()\n"
            "def main(args):\n    n = count()\n    os.environ.update({'CUDA_VISIBLE_DEVICES': args.gpus})\n"
        ),
        Example(
            "from os import environ\nimport torch\nmodel = torch.nn.Linear(2, 2).cuda()\n"
            "if __name__ == '__main__':\n    environ.setdefault('CUDA_VISIBLE_DEVICES', '0')\n"
        ),
        Example(
            "import os, torch\nif torch.cuda.is_available():\n    os.environ['CUDA_VISIBLE_DEVICES'] = '3'\n"
        ),
        Example(
            "import os, torch\ndef sweep(groups):\n    for g in groups:\n"
            "        os.environ['CUDA_VISIBLE_DEVICES'] = g\n        run(torch.zeros(1).cuda())\n"
        ),
        Example(
            "import os, torch\nKEY = 'CUDA_VISIBLE_DEVICES'\nscaler = torch.cuda.amp.GradScaler()\n"
            "os.environ[KEY] = '0'\n"
        ),
    )

    def check(self, ctx: Context) -> Iterable[Violation]:
        for late in ctx.analysis.process.late_env_writes:
            line = ctx.start(late.init.node)[0]
            earlier = ", which runs earlier" if line > ctx.start(late.write.node)[0] else ""
            yield ctx.violation(
                late.write.node,
                f"`CUDA_VISIBLE_DEVICES` is set after CUDA was initialised by {late.init.what} "
                f"(line {line}{earlier}): CUDA read the variable then, so this process keeps seeing every GPU",
                Fix(Applicability.DISPLAY,
                    f"Set `CUDA_VISIBLE_DEVICES` before the first CUDA call (line {line}), e.g. "
                    "right after the imports, or at launch: `CUDA_VISIBLE_DEVICES=1 python script.py`"),
            )
