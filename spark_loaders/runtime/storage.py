"""Where the loader keeps its tables and checkpoints: a local folder or S3-compatible storage.

`HUB_LOADER_WAREHOUSE_DIR` and `HUB_LOADER_CHECKPOINT_DIR` take either a local path (the
default, kept as a `Path` so everything local behaves as before) or an `s3a://bucket/path` URI,
kept as a `RemoteLocation`. Spark reaches a remote location through Hadoop's S3A connector
(`hadoop-aws`, fetched by `make jars`), configured by `s3a_conf`. The few files the driver
itself reads and writes beside a remote checkpoint go through Hadoop's FileSystem API, so they
sit where the checkpoint sits and vanish with it (see `exists`, `read_text`, `write_text`).

Why S3A and not `s3://`: Hadoop has no `s3://` file system; the URI scheme names the connector,
and S3A is the maintained one. See docs/adr/0028-tables-on-object-storage.md.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the settings import this module, and need no Spark to load
    from pyspark.sql import SparkSession

REMOTE_SCHEME = "s3a"
# Hadoop's fixed-key provider: the access and secret key come from the settings, and nothing is
# looked up in the environment, instance metadata or a profile on the machine.
CREDENTIALS_PROVIDER = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"


@dataclass(frozen=True, slots=True)
class RemoteLocation:
    """An `s3a://bucket/path` URI with the two path operations the loader needs."""

    uri: str

    def __truediv__(self, part: str) -> "RemoteLocation":
        return RemoteLocation(f"{self.uri.rstrip('/')}/{part}")

    def __str__(self) -> str:
        return self.uri

    @property
    def name(self) -> str:
        """The last path segment, as `Path.name`."""
        return self.uri.rstrip("/").rsplit("/", 1)[-1]

    @property
    def parent(self) -> "RemoteLocation":
        """The location one segment up, as `Path.parent` (never above the bucket)."""
        head, _, _ = self.uri.rstrip("/").rpartition("/")
        return self if head.endswith(":/") else RemoteLocation(head)


# A table or checkpoint location: a local folder, or a folder in an S3-compatible bucket.
Location = Path | RemoteLocation


def parse_location(value: object) -> object:
    """A settings value as a `RemoteLocation` when it is a URI; anything else is left as is.

    Only `s3a://` is taken: `s3://` and `s3n://` are not Hadoop file systems today and would
    fail late, inside Spark, with a class-not-found error.
    """
    if not isinstance(value, str) or "://" not in value:
        return value
    scheme, _, rest = value.partition("://")
    if scheme.lower() != REMOTE_SCHEME:
        raise ValueError(
            f"the URI scheme {scheme}:// is not supported; use a local path or "
            f"{REMOTE_SCHEME}://bucket/path (Hadoop's S3A connector)"
        )
    if not rest.split("/", 1)[0]:
        raise ValueError(f"{value} names no bucket; use {REMOTE_SCHEME}://bucket/path")
    return RemoteLocation(f"{REMOTE_SCHEME}://{rest.rstrip('/')}")


def is_remote(location: Location) -> bool:
    return isinstance(location, RemoteLocation)


def s3a_conf(
    *,
    endpoint: str | None,
    access_key: str | None,
    secret_key: str | None,
    path_style_access: bool,
    region: str | None,
) -> dict[str, str]:
    """The `spark.hadoop.fs.s3a.*` settings for these S3 settings; empty when none is set.

    An `http://` endpoint (a local server) turns TLS off, which S3A would otherwise insist on.
    The secret key's setting name matches Spark's redaction pattern
    (`spark_loaders.services.session`), so it shows as redacted in the UI, the event log and
    `SET` output.
    """
    conf: dict[str, str] = {}
    prefix = "spark.hadoop.fs.s3a."
    if endpoint:
        conf[prefix + "endpoint"] = endpoint
        conf[prefix + "connection.ssl.enabled"] = str(endpoint.startswith("https://")).lower()
    if path_style_access:
        conf[prefix + "path.style.access"] = "true"
    if region:
        conf[prefix + "endpoint.region"] = region
    if access_key and secret_key:
        conf[prefix + "aws.credentials.provider"] = CREDENTIALS_PROVIDER
        conf[prefix + "access.key"] = access_key
        conf[prefix + "secret.key"] = secret_key
    return conf


def exists(spark: "SparkSession", location: Location) -> bool:
    """Whether a file or folder is at `location`."""
    if isinstance(location, Path):
        return location.exists()
    fs, path = _hadoop(spark, location)
    return bool(fs.exists(path))


def read_text(spark: "SparkSession", location: Location) -> str:
    """The UTF-8 text of the file at `location`."""
    if isinstance(location, Path):
        return location.read_text()
    fs, path = _hadoop(spark, location)
    stream = fs.open(path)
    try:
        jvm: Any = spark.sparkContext._jvm
        return str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
    finally:
        stream.close()


def write_text(spark: "SparkSession", location: Location, text: str) -> None:
    """Write `text` to `location`, replacing what was there (parent folders are made)."""
    if isinstance(location, Path):
        location.parent.mkdir(parents=True, exist_ok=True)
        location.write_text(text)
        return
    fs, path = _hadoop(spark, location)
    stream = fs.create(path, True)
    try:
        stream.write(bytearray(text.encode()))
    finally:
        stream.close()


def _hadoop(spark: "SparkSession", location: RemoteLocation) -> tuple[Any, Any]:
    """Hadoop's FileSystem for `location`, configured as the session's (S3A settings included)."""
    jvm: Any = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(location.uri)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


class HadoopFiles:
    """`hub_core.ledger.LogFiles` on a remote location, through Hadoop's FileSystem configured
    as the session's (S3A settings included): the loader reads its tables' Delta logs for the
    API's lineage index with it (`GET /ledger`, ADR 0048)."""

    def __init__(self, spark: "SparkSession") -> None:
        self._spark = spark

    def names(self, folder: str) -> list[str]:
        fs, path = _hadoop(self._spark, RemoteLocation(folder))
        if not fs.exists(path):
            return []
        return sorted(str(status.getPath().getName()) for status in fs.listStatus(path))

    def exists(self, location: str) -> bool:
        return exists(self._spark, RemoteLocation(location))

    def read(self, location: str) -> str | None:
        try:
            return read_text(self._spark, RemoteLocation(location))
        except Exception as exc:  # Py4J's error, naming the Java exception
            if "java.io.FileNotFoundException" in str(exc):
                return None  # removed by log cleanup since the listing
            raise
