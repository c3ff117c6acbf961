"""The delete operation: ``delete`` (the entry point and its commit), ``scan`` (pruning and scanning for
matching rows), ``vectors`` (writing the new deletion vectors), ``rewrite`` (copy-on-write and change data
files), ``report`` (the DeleteReport).
"""
