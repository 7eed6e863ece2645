"""One-shot migration of a legacy tree (#12): the report `fix` ends with, and rewrites
of real legacy shapes."""

from __future__ import annotations

import textwrap

from helpers import cli, fixed

GLOW = textwrap.dedent("""\
    import torch


    class WaveGlow(torch.nn.Module):
        def infer(self, spect, sigma=1.0):
            if spect.type() == 'torch.cuda.HalfTensor':
                audio = torch.cuda.HalfTensor(spect.size(0),
                                              self.n_remaining_channels,
                                              spect.size(2)).normal_()
            else:
                audio = torch.cuda.FloatTensor(spect.size(0),
                                               self.n_remaining_channels,
                                               spect.size(2)).normal_()
            return audio
    """)


def test_a_multi_line_constructor_in_a_block_is_rewritten():
    # (LibCST regenerates such a node without the block's indentation: the check that an
    # edit targets what its rule saw must not take that for a position bug)
    out = fixed(GLOW, unsafe=False)
    assert ("audio = torch.empty(spect.size(0), self.n_remaining_channels, spect.size(2), "
            'dtype=torch.float16, device="cuda").normal_()') in out
    assert "torch.cuda.FloatTensor" not in out.replace("'torch.cuda.HalfTensor'", "")
    assert fixed(out, unsafe=False) == out


def test_fix_ends_with_what_was_converted_and_what_is_left_and_why(tmp_path):
    (tmp_path / "lib.py").write_text(
        "import torch\n\n\ndef build(n):\n    return torch.zeros(n).cuda()\n\n\n"
        "def load(path):\n    ckpt = torch.load(path)\n    return ckpt['epoch']\n")
    (tmp_path / "train.py").write_text(
        "import torch\n\nx = torch.cuda.FloatTensor(2, 3)\ny = torch.zeros(1).cuda()\n"
        "torch.cuda.set_device(0)\n")
    r = cli("fix", "--no-cache", "--diff", "--unsafe-fixes", ".", cwd=tmp_path)
    assert "Would convert: TDL001 1, TDL005 1" in r.stderr.decode()
    # without --unsafe-fixes the script's device is exactly the one `.cuda()` used (no
    # CPU fallback, no CUDA query): both placements convert, behaviour unchanged
    r = cli("fix", "--no-cache", "--diff", ".", cwd=tmp_path)
    report = r.stderr.decode()
    assert "Would convert: TDL001 1, TDL005 1" in report
    assert '+device = torch.device("cuda")\n' in r.stdout.decode()
    assert "Left, by rule and reason:\n" in report
    assert ("  TDL001     1  display only: this looks like a library module (no script entry point): "
            "a device defined at import would query CUDA in every importer; pass a device in\n") in report
    assert "needs --unsafe-fixes" not in report
    assert ("  TDL006     1  display only: no device is bound here, and the result is used beyond "
            "`load_state_dict`\n") in report
    assert "  TDL101     1  " in report
    r = cli("fix", "--no-cache", "--unsafe-fixes", ".", cwd=tmp_path)
    report = r.stderr.decode()
    assert "Converted: TDL001 1, TDL005 1" in report
    assert "needs --unsafe-fixes" not in report
