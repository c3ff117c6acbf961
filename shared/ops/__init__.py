"""Operations on a table, built on core, one package per operation:

* ``rorder`` — plan a table into units and rewrite each so every value has its own row group;
* ``delete`` — DELETE with deletion vectors or copy-on-write;
* ``maintenance`` — vacuum, enabling deletion vectors, inspecting the layout;
* ``ranges`` — the range-partition helpers for writers;
* ``common`` — what several operations share (loading a table, change data, statistics bounds, table features).

An operation's package imports its own modules, ``common``, core, expr and errors, never another operation.
"""
