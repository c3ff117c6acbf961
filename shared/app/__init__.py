"""Adapters that only translate: the CLI, queue messages to work, the function app and Lambda edges, Spark."""
