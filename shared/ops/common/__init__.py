"""Pieces several operations share: ``table`` (loading a table's snapshot), ``changes`` (change data files),
``bounds`` (statistics and partition values as comparable bounds), ``features`` (table features a writer
checks), ``scratch`` (local scratch directories, and the removal of those a killed process left).
"""
