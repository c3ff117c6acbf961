"""Shared fixtures: real Azurite, moto and Sail services, storage backends and Delta fixture tables.

Services start lazily, once per test session (once per worker under pytest-xdist), and a service that
cannot start fails the tests that need it. Tests that use them are marked ``azurite``, ``moto`` or
``sail`` automatically, so ``-m "not sail"`` and the like deselect them.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# The test helpers (services, oracle, faultproxy, ...) live in tests/support/: importable by their module
# name from a test file in any folder under tests/.
SUPPORT = str(Path(__file__).resolve().parent / "support")
if SUPPORT not in sys.path:
    sys.path.insert(0, SUPPORT)

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402
from services import Azurite, Backend, MotoServer, SailServer, ServiceError, fixtures_dir  # noqa: E402

AZURE_CONTAINER = "deltaextras-tests"
S3_BUCKET = "deltaextras-tests"

# fixture name -> marker added to every test that uses it (directly or through another fixture)
_SERVICE_MARKERS = {
    "azurite": "azurite",
    "moto": "moto",
    "sail": "sail",
    "spark": "sail",
    "sail_cloud": "sail",
    "spark_cloud": "sail",
    "delta_spark": "delta_spark",
}


# Property tests draw the same cases on every machine and every run: the seed comes from each test's
# source (derandomize), and no example database replays cases a previous run on this machine found.
# Together with the pinned hypothesis release (pyproject.toml), the same command finds the same cases.
settings.register_profile("deltaextras", derandomize=True, database=None, print_blob=True)
settings.load_profile("deltaextras")


def pytest_configure(config: pytest.Config) -> None:
    """pyspark-client warns on every import that it prefers pandas < 3; the Connect client works."""
    ignore = "ignore:PySpark does not yet fully support pandas:FutureWarning"
    config.addinivalue_line("filterwarnings", ignore)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark tests by the services their fixtures start."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        for fixture_name, marker in _SERVICE_MARKERS.items():
            if fixture_name in names and item.get_closest_marker(marker) is None:
                item.add_marker(marker)
        if "delta_spark" in names:  # one JVM for all of them under `-n 2 --dist loadgroup`
            item.add_marker(pytest.mark.xdist_group("delta_spark"))


def _start(kind: str, starter: Callable[[], Any], request: pytest.FixtureRequest) -> Any:
    try:
        svc = starter()
    except ServiceError as exc:
        message = f"{kind} could not be started:\n{exc}"
    else:
        request.addfinalizer(svc.stop)
        return svc
    pytest.fail(message, pytrace=False)


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Azurite:
    """A running Azurite (blob, queue, table) on free ports."""
    workdir = tmp_path_factory.mktemp("azurite")
    return _start("Azurite", lambda: Azurite.start(workdir), request)


@pytest.fixture(scope="session")
def moto(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> MotoServer:
    """A running moto server (S3, SQS, DynamoDB) on a free port."""
    workdir = tmp_path_factory.mktemp("moto")
    return _start("moto server", lambda: MotoServer.start(workdir), request)


@pytest.fixture(scope="session")
def sail(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> SailServer:
    """A running Sail Spark Connect server on a free port (local paths only)."""
    workdir = tmp_path_factory.mktemp("sail")
    return _start("Sail", lambda: SailServer.start(workdir), request)


@pytest.fixture(scope="session")
def sail_cloud(
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
    azurite: Azurite,
    moto: MotoServer,
) -> SailServer:
    """A second Sail server whose environment sends ``az://``/``abfss://`` to Azurite, ``s3://`` to moto."""
    workdir = tmp_path_factory.mktemp("sail-cloud")
    env = {**azurite.env, **moto.env}
    return _start("Sail (cloud)", lambda: SailServer.start(workdir, env=env), request)


def _session(server: SailServer) -> Iterator[Any]:
    try:
        session = server.session()
    except Exception as exc:
        message = f"cannot connect a SparkSession to {server.remote}: {exc}\n{server.log_tail()}"
    else:
        yield session
        session.stop()
        return
    pytest.fail(message, pytrace=False)


@pytest.fixture(scope="session")
def spark(sail: SailServer) -> Iterator[Any]:
    """A ``pyspark.sql.SparkSession`` connected to the Sail server (local paths)."""
    yield from _session(sail)


@pytest.fixture(scope="session")
def spark_cloud(sail_cloud: SailServer) -> Iterator[Any]:
    """A ``pyspark.sql.SparkSession`` on the Sail server that reaches Azurite and moto S3."""
    yield from _session(sail_cloud)


@pytest.fixture(scope="session")
def delta_spark() -> Iterator[Any]:
    """One classic (JVM) ``SparkSession`` with Delta Lake for the whole run (see tests/support/delta_spark.py).

    Skips when pyspark, Java or the Delta jars are missing, unless ``DELTAEXTRAS_REQUIRE_SPARK=1``
    (``.ci/run`` sets it): then it fails."""
    import delta_spark as ds

    reason = ds.unavailable()
    if reason is not None:
        if ds.required():
            pytest.fail(f"Spark with Delta is required here but unavailable: {reason}", pytrace=False)
        pytest.skip(f"Spark with Delta unavailable: {reason}")
    session = ds.start_session()
    yield session
    session.stop()


@pytest.fixture(
    params=[
        pytest.param("local", id="local"),
        pytest.param("azurite", id="azurite", marks=pytest.mark.azurite),
        pytest.param("s3", id="s3", marks=pytest.mark.moto),
    ]
)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """Each test runs on a local directory, on Azurite blob storage and on moto S3."""
    name: str = request.param
    if name == "local":
        return Backend("local", str(tmp_path / "tables"))
    if name == "azurite":
        az: Azurite = request.getfixturevalue("azurite")
        az.create_container(AZURE_CONTAINER)
        return Backend("azurite", f"az://{AZURE_CONTAINER}", az.storage_options)
    s3: MotoServer = request.getfixturevalue("moto")
    s3.create_bucket(S3_BUCKET)
    return Backend("s3", f"s3://{S3_BUCKET}", s3.storage_options)


@pytest.fixture
def fixture_table(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Copy a delta-rs fixture table into a fresh temp dir and return the copy's path."""
    source_root = fixtures_dir()

    def copy(name: str) -> Path:
        source = source_root / name
        if not (source / "_delta_log").is_dir():
            available = sorted(p.name for p in source_root.iterdir()) if source_root.is_dir() else []
            pytest.fail(f"no fixture table {name!r} in {source_root}; available: {available}", pytrace=False)
        target = tmp_path_factory.mktemp("fixture") / name
        shutil.copytree(source, target)
        for path in [target, *target.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)  # originals may be read-only
        return target

    return copy
