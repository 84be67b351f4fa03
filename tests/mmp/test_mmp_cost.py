"""The peak-memory tracker behind the cost figure, and the compression arithmetic."""
import torch

from papers.mmp.experiments import PeakMemory


def test_peak_memory_counts_live_tensors():
    x = torch.ones(1000)
    with torch.no_grad(), PeakMemory() as mem:
        a = x * 2                     # 4000 bytes live
        b = a + 1                     # 8000 bytes live
        del a, b                      # freed
        c = x * 3                     # 4000 bytes live again
    assert mem.peak == 8000
    assert mem.live == 4000
    del c


def test_peak_memory_grows_quadratically_for_attention():
    def attn(n):
        q = torch.randn(n, 8)
        with torch.no_grad(), PeakMemory() as mem:
            torch.softmax(q @ q.T, dim=-1)
        return mem.peak

    assert attn(200) / attn(100) > 3.5
