"""The rorder operation: every distinct value of a column in its own Parquet row group.

* ``rorder`` — the entry points (``rorder``, ``rorder_single``, ``rorder_setup_multi``, ``plan_messages``);
* ``plan``, ``plan_stream``, ``units``, ``tally`` — the planner: one streaming pass over the log, per unit;
* ``tiers`` — the size-tiered file selection; ``options``, ``message`` — options and the work message;
* ``report``, ``pool`` — per-partition reports and the worker threads of a multi-partition run;
* ``rewrite/`` — one partition's rewrite; ``commit/`` — carrying concurrent deletes, the checkpoint after.
"""
