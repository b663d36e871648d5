"""Bus bandwidth of torch.distributed.all_gather_into_tensor (NCCL) on the GPUs of this host, one
process per GPU, at the same sizes as allgather_bench: the baseline for psync's NCCL all-gather.

    python3 torch_allgather.py [--sizes_mib 1,4,16,64,256] [--iters 20]
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, world, sizes, iters, port):
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    rows = []
    for size in sizes:
        send = torch.full((size,), rank + 1, dtype=torch.uint8, device="cuda")
        recv = torch.empty(size * world, dtype=torch.uint8, device="cuda")
        for _ in range(3):
            dist.all_gather_into_tensor(recv, send)
        torch.cuda.synchronize()
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            dist.all_gather_into_tensor(recv, send)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        t = statistics.median(times)
        rows.append((size >> 20, t * 1e6, size * (world - 1) / t / 1e9))
    if rank == 0:
        print(f"{'MiB/rank':>12} {'median_us':>12} {'busbw_GB/s':>12}")
        for mib, us, bw in rows:
            print(f"{mib:>12} {us:>12.1f} {bw:>12.1f}")
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes_mib", default="1,4,16,64,256")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--port", type=int, default=29533)
    args = parser.parse_args()
    sizes = [int(s) << 20 for s in args.sizes_mib.split(",")]
    world = torch.cuda.device_count()
    mp.spawn(run, args=(world, sizes, args.iters, args.port), nprocs=world)


if __name__ == "__main__":
    main()
