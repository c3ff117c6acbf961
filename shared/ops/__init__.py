"""Operations on a table (plan, rewrite, rorder, delete, vacuum, upgrade, inspect, ranges), built on core."""
