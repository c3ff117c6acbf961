"""The Delta protocol: storage, the transaction log and its actions, snapshots, commits, deletion
vectors, statistics. Knows nothing of operations."""
