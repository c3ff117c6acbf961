"""Around a rewrite's commit: ``carry`` (deletes a concurrent writer committed, carried onto the new files)
and ``checkpoint`` (the checkpoint written after a commit when the newest one lags its interval).
"""
