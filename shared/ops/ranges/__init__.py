"""Range partitioning for writers: ``ranges`` (range specs, the derived range column, its CHECK constraint,
creating range tables and appending to them).
"""
