"""Predicates: parse, bind to a schema, evaluate on Arrow data, prune with statistics."""
