"""The table schema as the data files must hold it: Delta types → Arrow types, physical column names
under column mapping, Parquet field ids, partition columns left out.

Example:
    >>> import json
    >>> from deltaextras.core.actions import Metadata
    >>> s = TableSchema.from_metadata(Metadata(schema_string=json.dumps({"type": "struct", "fields": [
    ...     {"name": "node_id", "type": "long", "nullable": True, "metadata": {}},
    ...     {"name": "t", "type": "timestamp", "nullable": True, "metadata": {}},
    ...     {"name": "node_id_range", "type": "long", "nullable": True, "metadata": {}}]}),
    ...     partition_columns=["node_id_range"]))
    >>> s.file_schema.names, str(s.file_schema.field("t").type)
    (['node_id', 't'], 'timestamp[us, tz=UTC]')
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..errors import InvalidArgumentError, UnsupportedFeatureError
from .actions import Metadata

_PRIMITIVES = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(-?\d+)\)$")


@dataclass(frozen=True)
class Column:
    """A top-level column: logical name, physical name (in files), Delta type."""

    name: str
    physical: str
    delta_type: Any
    nullable: bool


class TableSchema:
    """Schema facts a rewrite needs, built from the ``metaData`` action."""

    def __init__(self, fields: list[dict[str, Any]], partition_columns: list[str], mapping_mode: str) -> None:
        self.mapping_mode = mapping_mode
        self.partition_columns = list(partition_columns)
        self.columns = [Column(f["name"], self._physical(f), f["type"], bool(f.get("nullable", True))) for f in fields]
        self._by_name = {c.name: c for c in self.columns}
        self.data_columns = [c for c in self.columns if c.name not in self.partition_columns]
        self.file_schema = pa.schema([self._arrow_field(f) for f in fields if f["name"] not in partition_columns])

    @classmethod
    def from_metadata(cls, metadata: Metadata) -> TableSchema:
        """Build from a ``metaData`` action (``schemaString``, ``partitionColumns``, ``configuration``)."""
        schema = json.loads(metadata.schema_string or "")
        mode = (metadata.configuration or {}).get("delta.columnMapping.mode", "none") or "none"
        return cls(schema["fields"], list(metadata.partition_columns or []), mode)

    # ------------------------------------------------------------------ lookups
    def column(self, name: str, what: str) -> Column:
        """A column by logical name, or a clear error naming the choices."""
        col = self._by_name.get(name)
        if col is None:
            raise InvalidArgumentError(
                f"{what} column {name!r} is not in the table (columns: {', '.join(self._by_name)})"
            )
        return col

    def physical(self, name: str) -> str:
        """Physical (file) name of a top-level column."""
        return self._by_name[name].physical

    def partition_physical(self, name: str) -> str:
        """The key a partition column has in ``partitionValues``."""
        return self._by_name[name].physical if name in self._by_name else name

    def partition_type(self, name: str) -> pa.DataType | None:
        """The Arrow type of a partition column by logical name (None: not a column of the schema)."""
        col = self._by_name.get(name)
        return None if col is None else self._arrow_type(col.delta_type)

    def partition_types(self) -> dict[str, pa.DataType]:
        """The Arrow type of each partition column, by the key ``partitionValues`` uses for it."""
        return {
            self.partition_physical(c): self._arrow_type(self._by_name[c].delta_type)
            for c in self.partition_columns
            if c in self._by_name
        }

    # ------------------------------------------------------------------ building
    def _physical(self, f: dict[str, Any]) -> str:
        if self.mapping_mode == "none":
            return f["name"]
        return (f.get("metadata") or {}).get("delta.columnMapping.physicalName", f["name"])

    def _arrow_field(self, f: dict[str, Any]) -> pa.Field:
        meta = None
        col_id = (f.get("metadata") or {}).get("delta.columnMapping.id")
        if self.mapping_mode != "none" and col_id is not None:
            meta = {b"PARQUET:field_id": str(col_id).encode()}
        return pa.field(self._physical(f), self._arrow_type(f["type"]), bool(f.get("nullable", True)), meta)

    def _arrow_type(self, t: Any) -> pa.DataType:
        if isinstance(t, str):
            if t in _PRIMITIVES:
                return _PRIMITIVES[t]
            m = _DECIMAL.match(t)
            if m:
                return pa.decimal128(int(m.group(1)), int(m.group(2)))
            raise UnsupportedFeatureError(f"column type {t!r} is not supported by the rewrite")
        kind = t.get("type")
        if kind == "struct":
            return pa.struct([self._arrow_field(f) for f in t["fields"]])
        if kind == "array":
            return pa.list_(pa.field("element", self._arrow_type(t["elementType"]), t.get("containsNull", True)))
        if kind == "map":
            return pa.map_(
                pa.field("key", self._arrow_type(t["keyType"]), False),
                pa.field("value", self._arrow_type(t["valueType"]), t.get("valueContainsNull", True)),
            )
        raise UnsupportedFeatureError(f"column type {kind!r} is not supported by the rewrite")


def conform(batch: pa.RecordBatch | pa.Table, target: pa.Schema, source: str) -> pa.Table:
    """Reshape data read from a file to the target file schema: by physical name, missing columns
    as nulls, types cast exactly (Spark's INT96 nanoseconds to microseconds, large to small strings).
    """
    table = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
    arrays = []
    for field in target:
        if field.name in table.column_names:
            col = table.column(field.name)
            if not col.type.equals(field.type):
                try:
                    col = col.cast(field.type, safe=True)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise InvalidArgumentError(
                        f"column {field.name!r} of {source} has type {col.type}, which does not convert "
                        f"exactly to the table's {field.type}: {str(exc).splitlines()[0]}"
                    ) from None
            arrays.append(col)
        else:
            arrays.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(arrays, schema=target)
