#!/bin/bash
# BR-01 part 3: a zero-element all_gather through the shim (4 ranks) returns
# four (1, 0, 2) tensors at once, and the group still works afterwards.
# Recipe and checks: tests/torch/case_br01_zero_allgather.py; on torch 1.13 and,
# where tests/torch/sid_chroot.sh set up its chroot, torch 2.x.
exec sh "$2/tests/torch/run_case.sh" "$1" 280 case_br01_zero_allgather.py
