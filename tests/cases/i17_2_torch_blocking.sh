#!/bin/bash
# Issue 17 point 2: a blocking all_reduce through the PyTorch shim runs in the
# calling thread on coll's NULL stream (no progress or completion thread
# hand-off), with exact results, order kept behind work in flight, and errors
# as before.  The checks are in tests/torch/case_i17_2_blocking_inline.py.
# On torch 1.13 and, where tests/torch/sid_chroot.sh set up its chroot, torch 2.x.
exec sh "$2/tests/torch/run_case.sh" "$1" 120 case_i17_2_blocking_inline.py
