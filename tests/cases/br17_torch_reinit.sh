#!/bin/bash
# BR-17, shim variant: init_process_group/destroy_process_group 50 times with
# the same master port and with the same store, on 2 and on 4 ranks.
# Recipe and checks: tests/torch/case_br17_reinit.py; on torch 1.13 and, where
# tests/torch/sid_chroot.sh set up its chroot, torch 2.x.
exec sh "$2/tests/torch/run_case.sh" "$1" 280 case_br17_reinit.py
