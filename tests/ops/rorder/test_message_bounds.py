"""Every number of a work message is bounded before it is converted: out of range is one MessageError line."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake


# ---------------------------------------------------------------------- numbers out of range
@pytest.mark.parametrize(
    ("key", "value", "limit"),
    [
        ("partition_value", 10**4999, "at most 38 digits"),
        ("partition_value", -(10**4999), "at most 38 digits"),
        ("partition_value", float("inf"), "finite"),
        ("version", 10**4999, "from 0 to 9223372036854775807"),
        ("version", 2**63, "from 0 to 9223372036854775807"),
        ("target_file_size", 10**4999, "from 1 to 9223372036854775807"),
        ("memory_budget", 10**4999, "from 1 to 9223372036854775807"),
        ("max_materialize_size", 10**4999, "from 1 to 9223372036854775807"),
        ("files", [["a.parquet", 10**4999]], "from 0 to 9223372036854775807"),
    ],
    ids=lambda v: v if isinstance(v, str) else "x",  # pytest cannot spell a 5,000-digit id
)
def test_huge_numbers_are_one_line_message_errors(tmp_path: Path, key: str, value: object, limit: str) -> None:
    from deltaextras import MessageError, rorder_single
    from deltaextras.errors import MAX_MESSAGE

    message = {"path": str(tmp_path / "t"), "partition_value": 0, key: value}
    with pytest.raises(MessageError) as info:
        rorder_single(message)
    text = str(info.value)
    assert repr(key)[1:-1] in text and limit in text
    assert "\n" not in text and len(text) <= MAX_MESSAGE
    assert not info.value.retryable
    assert not (tmp_path / "t").exists()


def test_huge_partition_value_in_rorder_partitions_is_an_argument_error(tmp_path: Path) -> None:
    from deltaextras import InvalidArgumentError, rorder

    write_deltalake(str(tmp_path / "t"), pa.table({"k": [1], "k_range": [0]}), partition_by=["k_range"])
    with pytest.raises(InvalidArgumentError, match="at most 38 digits"):
        rorder(str(tmp_path / "t"), partitions=[10**5000])


def test_path_of_wrong_type_says_what_it_got() -> None:
    from deltaextras import MessageError
    from deltaextras.ops.rorder.message import RorderMessage

    with pytest.raises(MessageError, match=r"got a number \(3\)"):
        RorderMessage.from_dict({"path": 3})
