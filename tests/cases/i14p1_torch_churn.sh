#!/bin/bash
# Issue 14 point 1: init_process_group/destroy_process_group cycles of the coll
# PyTorch backend leave no threads or fds behind (also with a new_group per
# cycle and with every Work and future kept), under ulimit -n 256.  The recipe
# and the checks are in tests/torch/case_i14_churn.py; this runs 300 cycles
# (COLL_TORCH_CHURN_CYCLES), cases.i14p1_torch_churn_2000 runs 2000.
# On torch 1.13 and, where tests/torch/sid_chroot.sh set up its chroot, torch 2.x.
n=${COLL_TORCH_CHURN_CYCLES:-300}
exec sh "$2/tests/torch/run_case.sh" "$1" $((60 + n / 4)) case_i14_churn.py "$n"  # 250 ms a cycle at most
