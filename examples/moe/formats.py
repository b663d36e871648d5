"""The param all-gather's wire formats: bf16, and MXFP8 (float8_e4m3fn values with one power-of-two
E8M0 scale per 32-element block, OCP MX). `encode` turns an fp32 shard into bytes, `decode` turns
the bytes of one shard back into fp32; both are deterministic torch operations, so every rank
decodes the same bytes to the same values."""

from __future__ import annotations

import torch

BLOCK = 32
_E4M3_EMAX = 8  # largest power of two below float8_e4m3fn's maximum (448 = 1.75 * 2^8)
_E4M3_MAX = 448.0


def has_mxfp8() -> bool:
    return hasattr(torch, "float8_e4m3fn")


def staged_bytes(dtype: str, elements: int) -> int:
    """Bytes of one staged shard of `elements` (a multiple of 32) fp32 values."""
    if dtype == "bf16":
        return 2 * elements
    if dtype == "mxfp8":
        return elements + elements // BLOCK
    raise ValueError(f"unknown dtype {dtype!r} (bf16, mxfp8)")


def encode(dtype: str, shard: torch.Tensor, out: torch.Tensor) -> None:
    """Writes the staged form of `shard` (fp32, 1-D, a multiple of 32 long) into `out` (uint8)."""
    if dtype == "bf16":
        out.copy_(shard.to(torch.bfloat16).view(torch.uint8))
        return
    n = shard.numel()
    blocks = shard.view(-1, BLOCK)
    amax = blocks.abs().amax(dim=1)
    # shared exponent: floor(log2(amax)) - emax of the element format; 2^-127 for a zero block.
    exp = torch.where(amax > 0, torch.floor(torch.log2(amax)) - _E4M3_EMAX,
                      torch.full_like(amax, -127.0)).clamp(-127, 127)
    scaled = (blocks / torch.exp2(exp).unsqueeze(1)).clamp(-_E4M3_MAX, _E4M3_MAX)
    out[:n].copy_(scaled.reshape(-1).to(torch.float8_e4m3fn).view(torch.uint8))
    out[n:].copy_((exp + 127).to(torch.uint8))


def decode(dtype: str, data: torch.Tensor, elements: int) -> torch.Tensor:
    """The fp32 values of one staged shard's bytes (`data`, uint8)."""
    if dtype == "bf16":
        return data.view(torch.bfloat16).float()
    values = data[:elements].view(torch.float8_e4m3fn).float().view(-1, BLOCK)
    exp = data[elements:].float() - 127
    return (values * torch.exp2(exp).unsqueeze(1)).reshape(-1)
