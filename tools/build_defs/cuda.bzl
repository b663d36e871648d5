"""CUDA and NCCL for cc targets: built only with --config=cuda (nvcc and NCCL in /usr/local/cuda)."""

# target_compatible_with of a target that needs CUDA: skipped (not failed) without --config=cuda.
CUDA_ONLY = select({
    "//tools/build_defs:cuda": [],
    "//conditions:default": ["//tools/build_defs:requires_cuda_build"],
})

def if_cuda(with_cuda, without_cuda = []):
    """`with_cuda` in a build with --config=cuda, else `without_cuda`."""
    return select({
        "//tools/build_defs:cuda": with_cuda,
        "//conditions:default": without_cuda,
    })

# The CUDA toolkit and NCCL are not a Bazel repository, so their headers are reached through
# -idirafter (a system directory outside the execution root) and -MMD keeps those system headers
# out of the dependency file, which Bazel would otherwise reject as undeclared inclusions.
CUDA_COPTS = [
    "-idirafter",
    "/usr/local/cuda/include",
    "-MMD",
]

_CUDA_LIBRARY_PATH = [
    "-L/usr/local/cuda/lib64",
    "-Wl,-rpath,/usr/local/cuda/lib64",
]

# The CUDA runtime.
CUDART_LINKOPTS = _CUDA_LIBRARY_PATH + ["-lcudart"]

# NCCL and the CUDA runtime.
NCCL_LINKOPTS = _CUDA_LIBRARY_PATH + [
    "-lnccl",
    "-lcudart",
]
