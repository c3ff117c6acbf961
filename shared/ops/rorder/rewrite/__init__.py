"""One partition's rewrite: ``rewrite`` (the partition rewriter), ``passes`` (the passes of a
multi-pass rewrite and the row groups each reads), ``ordering`` (sort permutation and gathering),
``packed_keys`` (the order as one sort of 63-bit keys), ``layout`` (writer settings and the layout
tag), ``lanes`` (two files at once), ``output`` (output files and their statistics), ``row_keys``
(de-duplication by key), ``threads`` (helper threads).
"""
