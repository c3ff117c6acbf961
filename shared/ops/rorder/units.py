"""Units of work: the piece of a table one work message rewrites, and the scheme that cuts a table into them.

A plan is a list of units. Each unit has a *kind*; today every unit is a partition (a value of the table's
partition column, or the whole table when it has none). A :class:`UnitScheme` owns everything one kind
needs, so the planner (:mod:`deltaextras.ops.rorder.plan`) never looks at partition columns itself:

* ``tally(head, signature, budget)`` — one streaming pass over the log: per *raw key* (for a partition,
  the value as the log spells it) the :class:`~deltaextras.ops.rorder.tally.Tally` of its live files;
* ``unit(raw)`` — the unit a raw key belongs to (the one place where raw keys are keyed: two spellings
  of one value map to one unit here);
* ``wanted(value)`` — the unit a caller's ``partitions=[...]`` entry names;
* ``files(head, raws)`` — the live files of some raw keys, read in one more filtered pass;
* ``snapshot(head, key, files)`` — the table as one unit's worker sees it, from files already read.

:func:`scheme_for` picks the scheme of a table; another kind of unit is one more :class:`UnitKind`, one
more :class:`UnitKey` subclass (its message fields) and one more scheme, chosen there.

Example:
    >>> key = PartitionKey("node_id_range", "3")
    >>> key.kind.value, key.label, key.message_fields()["partition_value"]
    ('partition', 'node_id_range=3', '3')
    >>> PartitionKey(None, None).label
    '(table)'
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import pyarrow as pa

from ...core.partition_snapshot import LogHead, PartitionSnapshot, adds_in
from ...core.protocol import check_clustering, clustering_columns
from ...core.snapshot import LiveFile, TableSnapshot
from ...core.values import partition_key
from ...errors import InvalidArgumentError
from .message import partition_value_to_str
from .options import RorderOptions
from .tally import Tally, tally_partitions
from .value_ranges import ValueRange

RANGE_SUFFIX = "_range"


class UnitKind(enum.Enum):
    """What cuts a table into units."""

    PARTITION = "partition"  # one value of the partition column (or the whole unpartitioned table)
    RANGE = "range"  # a range of the row-group column's values (a clustered or unpartitioned table)


@dataclass(frozen=True)
class UnitKey:
    """Which files a unit covers, as its work message names them (the base of every kind's key)."""

    partition_name: str | None
    partition_value: str | None

    kind = UnitKind.PARTITION

    @property
    def has_partition(self) -> bool:
        return self.partition_name is not None

    @property
    def label(self) -> str:
        return f"{self.partition_name}={self.partition_value}" if self.partition_name else "(table)"

    def message_fields(self) -> dict[str, Any]:
        """The fields of :class:`~deltaextras.ops.rorder.message.RorderMessage` that name the unit."""
        return {
            "partition_name": self.partition_name,
            "partition_value": self.partition_value,
            "has_partition": self.has_partition,
        }

    def summary_fields(self) -> dict[str, Any]:
        """The fields of the unit in a plan's JSON summary (``deltaextras plan --json``)."""
        return {"partition_value": self.partition_value}

    def sort_key(self) -> tuple[Any, ...]:
        """Units are listed by this key: numbers in numeric order, then strings, the null partition last."""
        return _sort_key(self.partition_value)


@dataclass(frozen=True)
class PartitionKey(UnitKey):
    """A partition: ``partition_name=partition_value`` (both None: the whole unpartitioned table)."""


@dataclass(frozen=True)
class RangeKey(UnitKey):
    """A value range of an unpartitioned or clustered table (:class:`~deltaextras.ops.rorder.value_ranges.ValueRange`),
    ``order``-th of its plan; partition name and value are None.

    Example:
        >>> from deltaextras.ops.rorder.value_ranges import ValueRange
        >>> key = RangeKey(None, None, ValueRange("node_id", 0, 99), 0)
        >>> key.kind.value, key.label, key.summary_fields()["range"]["high"]
        ('range', 'node_id in [0, 99]', 99)
    """

    value_range: ValueRange | None = None
    order: int = 0

    kind = UnitKind.RANGE

    @property
    def label(self) -> str:
        assert self.value_range is not None
        return self.value_range.label

    def message_fields(self) -> dict[str, Any]:
        return {**super().message_fields(), "value_range": self.value_range}

    def summary_fields(self) -> dict[str, Any]:
        assert self.value_range is not None
        return {"partition_value": None, "range": self.value_range.to_json()}

    def sort_key(self) -> tuple[Any, ...]:
        return (0, self.order)


class UnitScheme(Protocol):
    """How one kind of unit is found in the log (see the module's description)."""

    kind: UnitKind
    column: str | None  # the column a message names the unit by (None: the whole table)
    by: str  # the row-group column

    def tally(self, head: LogHead, signature: str, budget: int | None) -> dict[Any, Tally]: ...

    def unit(self, raw: Any) -> UnitKey: ...

    def wanted(self, value: Any) -> UnitKey: ...

    def files(self, head: LogHead, raws: Iterable[Any]) -> dict[Any, list[LiveFile]]: ...

    def snapshot(self, head: LogHead, key: UnitKey, files: list[LiveFile]) -> TableSnapshot: ...


@dataclass(frozen=True)
class PartitionScheme:
    """Units by the value of one partition column (``column`` None: the whole table is one unit)."""

    column: str | None
    by: str
    kind: UnitKind = UnitKind.PARTITION
    typ: pa.DataType | None = field(default=None, repr=False, compare=False)  # the partition column's type
    # the value key of each spelling seen so far -> the spelling that names its unit (the first one seen)
    _labels: dict[Any, str | None] = field(default_factory=dict, repr=False, compare=False)

    def tally(self, head: LogHead, signature: str, budget: int | None) -> dict[str | None, Tally]:
        """Per partition value as the log spells it, the tally of its live files (one streaming pass)."""
        return tally_partitions(head, self.column, signature, budget=budget)

    def unit(self, raw: str | None) -> PartitionKey:
        """The unit of a partition value as the log spells it: THE place where partition values are keyed.

        Example:
            >>> PartitionScheme("k_range", "k").unit("7")
            PartitionKey(partition_name='k_range', partition_value='7')
        """
        if self.column is None:
            return PartitionKey(None, None)
        label = self._labels.setdefault(partition_key(raw, self.typ), raw)
        return PartitionKey(self.column, label)

    def wanted(self, value: Any) -> PartitionKey:
        """The unit a ``partitions=[...]`` entry names (a number or bool is spelled as Delta does).

        Example:
            >>> PartitionScheme("k_range", "k").wanted(3).partition_value
            '3'
        """
        return self.unit(partition_value_to_str(value))

    def files(self, head: LogHead, raws: Iterable[str | None]) -> dict[str | None, list[LiveFile]]:
        """The live files of the given partition values (as the log spells them), read in one filtered pass."""
        wanted = set(raws)
        logical = {head.physical(c): c for c in head.partition_columns}
        physical = head.physical(self.column) if self.column is not None else None
        groups: dict[str | None, list[LiveFile]] = {v: [] for v in wanted}
        for add in adds_in(head, self.column, wanted).values():
            pv = add.partition_values or {}
            raw = pv.get(physical) if physical else None
            groups[raw].append(LiveFile(add, {logical.get(k, k): v for k, v in pv.items()}, head.storage.uri))
        return groups

    def snapshot(self, head: LogHead, key: UnitKey, files: list[LiveFile]) -> PartitionSnapshot:
        """The partition as its worker sees it (``rorder_single``), from the files the plan read."""
        return PartitionSnapshot(head, self.column, key.partition_value, (f.add for f in files))


def scheme_for(head: LogHead | TableSnapshot, by: str | None, partition_name: str | None = None) -> UnitScheme:
    """The scheme that cuts this table into units: the one place a kind of unit is chosen.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> column = lambda c, what: NS(physical=c, delta_type="long")
        >>> head = NS(partition_columns=["k_range"], protocol=NS(has_feature=lambda f: False),
        ...           schema=NS(column=column, partition_type=lambda c: None))
        >>> scheme_for(head, None)
        PartitionScheme(column='k_range', by='k', kind=<UnitKind.PARTITION: 'partition'>)
    """
    unit, by_col = resolve_unit(head, by, partition_name)
    typ = head.schema.partition_type(unit) if unit is not None else None
    return PartitionScheme(unit, by_col, typ=typ)


def resolve_unit(
    snapshot: LogHead | TableSnapshot, by: str | None, partition_name: str | None = None
) -> tuple[str | None, str]:
    """The partition column that cuts the table into units, and the row-group column.

    Example: a table partitioned by ``node_id_range`` gives ``("node_id_range", "node_id")``.
    """
    parts = snapshot.partition_columns
    if partition_name is not None:
        if partition_name not in parts:
            raise InvalidArgumentError(
                f"partition_name {partition_name!r} is not a partition column of the table "
                f"(partition columns: {', '.join(parts) or 'none'})"
            )
        unit = partition_name
    elif not parts:
        unit = None
    else:
        ranged = [c for c in parts if c.endswith(RANGE_SUFFIX)]
        unit = ranged[0] if len(ranged) == 1 else parts[0]
    if by is None and unit is None:
        by = _clustering_by(snapshot)
    if by is None:
        if unit is None:
            if snapshot.protocol.has_feature("clustering"):
                raise InvalidArgumentError(
                    "the table is neither partitioned nor clustered (its clustering was removed: CLUSTER BY "
                    "NONE); pass by= to name the row-group column"
                )
            raise InvalidArgumentError("the table is not partitioned; pass by= to name the row-group column")
        if not unit.endswith(RANGE_SUFFIX):
            raise InvalidArgumentError(
                f"partition column {unit!r} does not end in {RANGE_SUFFIX!r}, so the row-group column cannot be "
                "derived; pass by= to name it"
            )
        by = unit[: -len(RANGE_SUFFIX)]
    column = snapshot.schema.column(by, "by")
    _check_orders(by, column.delta_type)
    check_clustering(snapshot.protocol, getattr(snapshot, "domains", {}), by, column.physical)
    return unit, by


def _check_orders(by: str, delta_type: Any) -> None:
    """Refuses a ``by`` column whose values do not order (an array, a struct, a map, a variant): a row group
    per value, value ranges and statistics need values that compare as Spark compares them.

    Example:
        >>> _check_orders("tags", {"type": "array", "elementType": "string", "containsNull": True})
        Traceback (most recent call last):
        ...
        deltaextras.errors.InvalidArgumentError: by column 'tags' is of type array, whose values do not order; ...
    """
    kind = delta_type.get("type", "nested") if isinstance(delta_type, dict) else str(delta_type)
    if isinstance(delta_type, dict) or kind == "variant":
        raise InvalidArgumentError(
            f"by column {by!r} is of type {kind}, whose values do not order; name a column of a primitive type "
            "(an integer, a date, a timestamp, a string, a decimal, ...)"
        )


def _clustering_by(snapshot: Any) -> str | None:
    """The row-group column of a clustered table: its first clustering column (None: not clustered, or
    clustered by a nested field first)."""
    columns = clustering_columns(snapshot.protocol, getattr(snapshot, "domains", {}))
    if not columns or len(columns[0]) != 1:
        return None
    return next((c.name for c in snapshot.schema.columns if c.physical == columns[0][0]), None)


def clustered_options(snapshot: LogHead | TableSnapshot, by: str, options: RorderOptions) -> RorderOptions:
    """``options`` on a table clustered by ``by`` and other columns: those order the rows inside each value
    before ``sort_by``, in clustering order, each in the direction ``sort_by`` gives it (ascending when it
    names it not); the rest of ``sort_by`` follows. Unchanged on other tables; applying it twice changes
    nothing.

    Example: clustered by ``(node_id, quality)`` with ``sort_by="utc_time"``, rows inside a node are ordered
    by ``quality``, then ``utc_time``.
    """
    clustering = check_clustering(
        snapshot.protocol, getattr(snapshot, "domains", {}), by, snapshot.schema.column(by, "by").physical
    )
    if clustering is None or not clustering.others:
        return options
    logical = {c.physical: c.name for c in snapshot.schema.columns}
    given = dict(options.sort_by)
    first = tuple((name, given.get(name, "ascending")) for name in (logical[p] for p in clustering.others))
    named = {name for name, _ in first}
    order = first + tuple(item for item in options.sort_by if item[0] not in named)
    return options if order == options.sort_by else replace(options, sort_by=order)


def _sort_key(v: str | None) -> tuple[int, Any]:
    """Numbers first in numeric order, then strings, None last.

    Example:
        >>> sorted(["10", "b", None, "9"], key=_sort_key)
        ['9', '10', 'b', None]
    """
    if v is None:
        return (2, "")
    try:
        return (0, float(v))
    except ValueError:
        return (1, v)
