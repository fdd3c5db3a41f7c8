"""Expand a table into runs (table configs, plans) and launch them; `fedbench train`'s one run
(one_run) and the speed measurements that estimates read (`fedbench bench --suite`: bench_suite)."""
