"""Table maintenance: ``vacuum`` (removing files no version needs, orphans), ``upgrade`` (enabling deletion
vectors) and ``inspect`` (row-group statistics and point-query read amplification).
"""
