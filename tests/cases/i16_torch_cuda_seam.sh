#!/bin/bash
# Issue 16 (users): the PyTorch shim's CUDA path (python/torch_coll/_cuda.py)
# through its seams on CPU-only torch: every supported collective's values,
# one coll stream per CUDA stream, Work completing through an event that
# wait() makes the current stream wait for (never the host), the refusals,
# register_backend(devices=["cpu", "cuda"]) on torch 2.x.  The checks are in
# tests/torch/test_cuda_seam.py.  On torch 1.13 and, where
# tests/torch/sid_chroot.sh set up its chroot, torch 2.x.
exec sh "$2/tests/torch/run_case.sh" "$1" 120 test_cuda_seam.py
