"""Apache Spark with Delta Lake (the protocol's reference implementation) for the tests.

``pyspark`` (PyPI, pinned in pyproject's ``test`` extra) carries Spark's own jars and runs on the
machine's Java 17; the Delta Lake jars and S3A (``hadoop-aws`` with the AWS SDK v2 modules it loads)
come from Maven Central through ``mvn``: ``.ci/run`` runs ``mvn dependency:copy-dependencies`` on
``tests/spark/pom.xml`` into :func:`jar_cache_dir` and the session gets the files with ``spark.jars``.
Nothing is downloaded at test time (no Ivy).

:func:`start_session` starts one classic (JVM) ``SparkSession``: ``local[2]``, Delta's SQL extension
and catalog, two shuffle and snapshot partitions, no UI, UTC session time zone. When Spark or the
jars are missing, :func:`unavailable` says why; the fixture skips with that reason, or fails when
``DELTAEXTRAS_REQUIRE_SPARK=1`` (set by ``.ci/run``, so CI never silently loses the oracle).

Tables on moto S3 are read directly: :func:`s3a_uri` points S3A's settings for the table's bucket at
the endpoint and credentials of deltalake-style storage options (the session is shared by every test
of the run, so the settings are per bucket, in the session's Hadoop configuration) and gives the
``s3a://`` URI to load. Azurite stays out of reach: hadoop-azure's ``abfs`` needs the ADLS Gen2
(``dfs``) endpoint, which Azurite lacks, and ``wasb`` reaches the emulator only on its fixed ports.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

REPO_ROOT = Path(__file__).resolve().parents[2]
POM = REPO_ROOT / "tests" / "spark" / "pom.xml"
JARS_ENV = "DELTAEXTRAS_SPARK_JARS"
REQUIRE_ENV = "DELTAEXTRAS_REQUIRE_SPARK"
COMPLETE_MARKER = ".complete"


def jar_cache_dir() -> Path:
    """Where the Delta jars live: ``$DELTAEXTRAS_SPARK_JARS``, else a folder of the user's cache named
    after the pom's content (a changed pin gets a fresh folder). ``.ci/run`` prints the same path."""
    env = os.environ.get(JARS_ENV)
    if env:
        return Path(env)
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "deltaextras" / f"delta-jars-{digest}"


def jars() -> list[Path]:
    """The jar files of a completed cache (empty when the cache is missing or half written)."""
    folder = jar_cache_dir()
    if not (folder / COMPLETE_MARKER).exists():
        return []
    return sorted(folder.glob("*.jar"))


def required() -> bool:
    """Whether a missing Spark must fail the tests instead of skipping them."""
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0", "false")


def unavailable() -> str | None:
    """Why a classic Spark with Delta cannot start here, or None when it can."""
    try:
        import pyspark
        from pyspark.java_gateway import launch_gateway  # noqa: F401  (only the full pyspark has it)
    except ImportError as exc:
        return f"the full pyspark package is not installed ({exc}); pip install -e '.[test]'"
    spark_jars = Path(pyspark.__file__).resolve().parent / "jars"
    if not spark_jars.is_dir():
        return "pyspark has no jars/ folder: pyspark-client (Connect only) is installed instead of pyspark"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime (java on PATH or JAVA_HOME)"
    if not any(p.name.startswith("delta-spark_") for p in jars()):
        return (
            f"no Delta Lake jars in {jar_cache_dir()}: run "
            f"mvn -q -f tests/spark/pom.xml dependency:copy-dependencies -DoutputDirectory=<that folder> "
            f"and touch {COMPLETE_MARKER} there (.ci/run does)"
        )
    return None


def start_session(app_name: str = "deltaextras-tests") -> Any:
    """A classic ``SparkSession`` with Delta Lake (the caller stops it)."""
    # The builder goes remote when these are set (a Sail session of this process sets the second); they
    # are put back afterwards, since pyspark's functions follow them for the Connect sessions in use.
    saved = {
        name: os.environ.pop(name) for name in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED") if name in os.environ
    }
    # Python UDF workers (mapInArrow of rorder_spark) run this interpreter, where deltaextras is installed
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # loopback only: the driver binds nothing else
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.jars", ",".join(str(p) for p in jars()))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.databricks.delta.retentionDurationCheck.enabled", "false")
        .config("spark.sql.warehouse.dir", str(Path(os.environ.get("TMPDIR", "/tmp")) / "deltaextras-spark-warehouse"))
        .config("spark.driver.extraJavaOptions", "-Dderby.system.home=/tmp/deltaextras-derby")
    )
    try:
        session = builder.getOrCreate()
    finally:
        os.environ.update(saved)
    session.sparkContext.setLogLevel("ERROR")
    return session


def read_arrow(spark: Any, uri: str, columns: list[str] | None = None) -> pa.Table:
    """The live rows of a Delta table as Spark reads them (deletion vectors and column mapping applied)."""
    df = spark.read.format("delta").load(uri)
    if columns is not None:
        df = df.select(*columns)
    return df.toArrow()


def s3a_uri(spark: Any, uri: str, storage_options: Mapping[str, str]) -> str:
    """The ``s3a://`` URI under which ``spark`` reads the table at ``uri`` (``s3://bucket/path``) on the
    S3-compatible endpoint of ``storage_options`` (deltalake's keys: ``AWS_ENDPOINT_URL``,
    ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``; any case).

    S3A's settings for the bucket (``fs.s3a.bucket.<bucket>.*``) go into the session's Hadoop
    configuration: the endpoint with path-style requests (plain HTTP when the endpoint says so), those
    static credentials and the region. Reads take the classic input stream, which keeps no objects
    between reads (the default analytics stream caches them per file system, and the session's file
    systems live as long as the run). Spark caches one file system per bucket: when the bucket was
    pointed at another endpoint before, that file system is closed, so the next read opens one with
    these settings."""
    scheme, sep, rest = uri.partition("://")
    bucket, _, path = rest.partition("/")
    if not sep or scheme.lower() not in ("s3", "s3a") or not bucket:
        raise ValueError(f"not an s3:// table URI: {uri!r}")
    if not any(p.name.startswith("hadoop-aws-") for p in jars()):
        raise RuntimeError(f"no hadoop-aws jar in {jar_cache_dir()}: fetch tests/spark/pom.xml's jars again")
    options = {key.lower(): value for key, value in storage_options.items()}
    endpoint = options.get("aws_endpoint_url") or options.get("endpoint_url") or options.get("aws_endpoint")
    if not endpoint:
        raise ValueError("storage_options name no endpoint (AWS_ENDPOINT_URL)")
    settings = {
        "endpoint": endpoint,
        "endpoint.region": options.get("aws_region") or options.get("region") or "us-east-1",
        "path.style.access": "true",
        "connection.ssl.enabled": str(endpoint.lower().startswith("https://")).lower(),
        "aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "access.key": options.get("aws_access_key_id") or options.get("access_key_id") or "",
        "secret.key": options.get("aws_secret_access_key") or options.get("secret_access_key") or "",
        "input.stream.type": "classic",
    }
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    prefix = f"fs.s3a.bucket.{bucket}."
    before = hadoop.get(prefix + "endpoint")
    for key, value in settings.items():
        hadoop.set(prefix + key, value)
    target = f"s3a://{bucket}/{path}".rstrip("/")
    if before is not None and before != endpoint:
        jvm = spark.sparkContext._jvm
        jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI(f"s3a://{bucket}/"), hadoop).close()
    return target
