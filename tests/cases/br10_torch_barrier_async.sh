#!/bin/bash
# BR-10: the shim's barrier() waits for async work issued before it (a 64 MiB
# all_reduce) and for the last rank to arrive (2 s late).
# Recipe and checks: tests/torch/case_br10_barrier.py; on torch 1.13 and, where
# tests/torch/sid_chroot.sh set up its chroot, torch 2.x.
exec sh "$2/tests/torch/run_case.sh" "$1" 280 case_br10_barrier.py
