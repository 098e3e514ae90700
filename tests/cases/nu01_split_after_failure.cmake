# the old code waited COLL_TIMEOUT (120 s here) in two ranks' split
set_tests_properties(cases.nu01_split_after_failure PROPERTIES TIMEOUT 60)
