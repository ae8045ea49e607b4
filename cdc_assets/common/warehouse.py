"""The warehouse's Iceberg catalog: how Spark and pyiceberg open it, and the jars Spark needs.

A warehouse is one `Warehouse` value: where the tables' files live (a local folder or
`s3://bucket/prefix`) and which catalog names them. The embedded default is Iceberg's JDBC
catalog on a SQLite file, `<warehouse>/catalog.db` for a local warehouse: no server, and
pyiceberg's SQL catalog opens the same file, so any engine with an Iceberg reader (pyiceberg →
Arrow → DuckDB, Trino, …) reads the tables. A REST, Glue or Hive catalog is chosen by
configuration (common/settings.py, docs/deploying.md "Catalogs and S3").

Spark and pyiceberg both know the catalog as `cdc` (the JDBC catalog stores that name with
every table, so it may never differ between processes).

S3 credentials are never part of a `Warehouse`, of Spark's conf or of the catalog properties:
Iceberg's S3FileIO (Spark) and pyiceberg's S3 FileIO both take them from the environment
(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, or an instance role).
"""

from __future__ import annotations

import re
import sqlite3
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

CATALOG = "cdc"
CATALOG_FILE = "catalog.db"
# Under CDC_ASSETS_HOME (Settings): the warehouse unless one is configured, and the local
# folder of an s3 warehouse (`Warehouse.work_dir`).
HOME_WAREHOUSE, WORK_FOLDER = "warehouse", "work"
# Under a source's local folder: the mirror of its S3 dump, which the landing reads.
INPUT_MIRROR = ("landing", "s3_mirror")
SNAPSHOTS_FOLDER = "snapshots"  # under a source's folder: one folder per snapshot table
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
# The Iceberg Spark runtime, its AWS bundle and the SQLite JDBC driver (jars/pom.xml).
JARS_DIR = Path(sys.prefix) / "jars"
S3_FILE_IO = "org.apache.iceberg.aws.s3.S3FileIO"

CATALOG_TYPES = ("jdbc", "rest", "glue", "hive")
# Set from the warehouse's own fields; an extra property may not say otherwise.
_RESERVED = frozenset({"type", "uri", "warehouse", "catalog-impl", "io-impl", "py-io-impl", "s3.endpoint",
                       "s3.region", "client.region", "s3.path-style-access", "s3.force-virtual-addressing"})
# Keys of S3 credentials in Iceberg's and pyiceberg's properties: refused (environment only).
_S3_CREDENTIALS = frozenset({"s3.access-key-id", "s3.secret-access-key", "s3.session-token",
                             "client.access-key-id", "client.secret-access-key", "client.session-token"})
# A property whose value may be a secret (a REST token, a JDBC password): used to open the
# catalog, never printed (`cdc-assets tables`).
SECRET_KEY = re.compile(r"secret|password|token|credential|access-key|private|session", re.IGNORECASE)


def spark_jars() -> list[str]:
    """The jars `make install` copied into the virtual environment (jars/pom.xml)."""
    jars = sorted(str(p) for p in JARS_DIR.glob("*.jar"))
    if not any("iceberg-spark-runtime" in j for j in jars):
        raise RuntimeError(f"no Iceberg Spark runtime in {JARS_DIR}: run `make install` (it fetches the jars "
                           "of jars/pom.xml with Maven)")
    return jars


@dataclass(frozen=True)
class Warehouse:
    """Where the tables live and the catalog that names them: everything Spark and pyiceberg
    need to open the warehouse (credentials excepted: environment only)."""

    location: str  # an absolute local folder or s3://bucket/prefix (no trailing slash)
    catalog_type: str = "jdbc"
    # jdbc: a JDBC URI (default: SQLite `<location>/catalog.db`, local warehouses only);
    # rest: the server's http(s) URL; hive: thrift://metastore:9083; glue: none.
    catalog_uri: str | None = None
    catalog_properties: tuple[tuple[str, str], ...] = ()  # extra catalog properties, sorted
    s3_endpoint: str | None = None  # an S3-compatible store (MinIO, moto); None: AWS
    s3_region: str | None = None
    s3_path_style: bool | None = None  # None: path-style exactly when there is an endpoint
    # A local folder for what only this machine needs (an S3 source's input mirror): the
    # location itself for a local warehouse; an s3 one needs its own (Settings: <home>/work).
    work_dir: str | None = None

    def __post_init__(self) -> None:
        location = _normalized_location(self.location)
        object.__setattr__(self, "location", location)
        object.__setattr__(self, "catalog_properties",
                           tuple(sorted((str(k), str(v)) for k, v in dict(self.catalog_properties).items())))
        if self.catalog_type not in CATALOG_TYPES:
            raise ValueError(f"catalog type {self.catalog_type!r} is not one of {', '.join(CATALOG_TYPES)}")
        if self.catalog_type == "jdbc" and self.catalog_uri is None:
            if self.is_s3:
                raise ValueError(f"the s3 warehouse {location} needs a JDBC catalog URI: the SQLite catalog file "
                                 "cannot live in a bucket (Settings default it to <CDC_ASSETS_HOME>/catalog.db)")
            object.__setattr__(self, "catalog_uri", sqlite_catalog_uri(location))
        _check_catalog(self.catalog_type, self.catalog_uri)
        for key, _ in self.catalog_properties:
            if key in _S3_CREDENTIALS:
                raise ValueError(f"catalog property {key!r}: S3 credentials come only from the environment "
                                 "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN or a role)")
            # A REST server may name its warehouse otherwise (Polaris, Lakekeeper: the catalog's
            # name); the tables' locations stay `location`'s.
            if key in _RESERVED and not (key == "warehouse" and self.catalog_type == "rest"):
                raise ValueError(f"catalog property {key!r} is set from the warehouse's settings (location, "
                                 "catalog type and URI, S3 endpoint and region), not as an extra property")

    @property
    def is_s3(self) -> bool:
        return self.location.startswith("s3://")

    @property
    def local_work(self) -> Path:
        if self.work_dir is not None:
            return Path(self.work_dir)
        if self.is_s3:
            raise ValueError(f"the s3 warehouse {self.location} has no local work folder: pass "
                             "Settings.iceberg_warehouse, which has one (<CDC_ASSETS_HOME>/work)")
        return Path(self.location)

    @property
    def properties(self) -> dict[str, str]:
        return dict(self.catalog_properties)

    @property
    def path_style(self) -> bool:
        return self.s3_endpoint is not None if self.s3_path_style is None else self.s3_path_style

    def join(self, *parts: str) -> str:
        """A location under the warehouse, joined as text so `s3://` stays a URI."""
        return "/".join([self.location, *(str(p).strip("/") for p in parts)])

    def table_location(self, source: str, name: str) -> str:
        """The folder of the table `<source>.<name>`: `<warehouse>/<source>/<name>`."""
        return self.join(source, name)

    def snapshot_location(self, source: str, folder: str) -> str:
        """The folder of one snapshot table: `<warehouse>/<source>/snapshots/<folder>` (each
        table has a folder of its own, `store.snapshot_table`)."""
        return self.join(source, SNAPSHOTS_FOLDER, folder)

    def local_folder(self, source: str, *parts: str) -> Path:
        """A folder of this machine for one source (`local_work`/<source>/...)."""
        return self.local_work.joinpath(source, *parts)

    def input_mirror(self, source: str) -> Path:
        """The local folder an S3 source's objects are mirrored to (the landing reads local
        files): `<warehouse>/<source>/landing/s3_mirror` for a local warehouse, beside the
        source's tables; under the local work folder for an `s3://` one (`local_work`)."""
        return self.local_folder(source, *INPUT_MIRROR)

    def __fspath__(self) -> str:
        """A local warehouse still goes where a `Path` did (`Path(warehouse)`); an s3 one cannot."""
        if self.is_s3:
            raise TypeError(f"{self.location} is an S3 location, not a local path")
        return self.location

    def __str__(self) -> str:
        return self.location


def sqlite_catalog_uri(folder: Path | str) -> str:
    """The embedded JDBC catalog in `folder`: the SQLite file `<folder>/catalog.db`."""
    return f"jdbc:sqlite:{Path(folder) / CATALOG_FILE}"


def table_identifier(source: str, name: str) -> str:
    """`<source>.<name>`: a table of the source's namespace as pyiceberg, the manifests and
    every catalog name it (the catalog's name left out)."""
    return f"{source}.{name}"


def identifier_parts(identifier: str) -> tuple[str, str]:
    """`table_identifier` inverted: (source, name); a name may hold dots, a source never does."""
    source, name = identifier.split(".", 1)
    return source, name


def qualified_name(identifier: str) -> str:
    """`cdc.<source>.<name>`: the table as Spark SQL (and the assets' metadata) name it."""
    return f"{CATALOG}.{identifier}"


def _normalized_location(location) -> str:
    text = str(location)
    if text.startswith("s3://"):
        parsed = urlparse(text)
        if not parsed.netloc:
            raise ValueError(f"warehouse {text!r}: expected s3://bucket/prefix")
        return text.rstrip("/")
    if "://" in text:
        raise ValueError(f"warehouse {text!r}: a local folder or s3://bucket/prefix (no other scheme; "
                         "s3a:// is Hadoop's name, Iceberg's S3FileIO takes s3://)")
    return str(Path(text).absolute())


def _check_catalog(kind: str, uri: str | None) -> None:
    if kind == "jdbc" and not uri.startswith("jdbc:"):
        raise ValueError(f"JDBC catalog URI {uri!r} must start with jdbc: (e.g. jdbc:sqlite:/data/catalog.db)")
    if kind == "rest" and not (uri or "").startswith(("http://", "https://")):
        raise ValueError(f"a REST catalog needs its server's URL as the catalog URI (http(s)://…), got {uri!r}")
    if kind == "hive" and not (uri or "").startswith("thrift://"):
        raise ValueError(f"a Hive catalog needs the metastore's thrift://host:port as the catalog URI, got {uri!r}")
    if kind == "glue" and uri is not None:
        raise ValueError(f"a Glue catalog has no URI (region from the S3 region / AWS_REGION), got {uri!r}")


def as_warehouse(warehouse: Warehouse | Path | str) -> Warehouse:
    """A `Warehouse` as is; a local folder (`Path` or text) as the embedded default: the JDBC
    catalog on `<folder>/catalog.db`. An `s3://` text has no default catalog: pass the
    `Warehouse` of the settings (`Settings.iceberg_warehouse`)."""
    if isinstance(warehouse, Warehouse):
        return warehouse
    if str(warehouse).startswith("s3://"):
        raise ValueError(f"{warehouse}: an s3:// warehouse needs its catalog and S3 settings; pass "
                         "Settings.iceberg_warehouse (a Warehouse), not the location alone")
    return Warehouse(str(warehouse))


def catalog_uri(warehouse: Warehouse | Path | str) -> str | None:
    return as_warehouse(warehouse).catalog_uri


def _is_sqlite(warehouse: Warehouse) -> bool:
    return warehouse.catalog_type == "jdbc" and warehouse.catalog_uri.startswith("jdbc:sqlite:")


def sqlite_file(warehouse: Warehouse | Path | str) -> Path | None:
    """The SQLite file of an embedded JDBC catalog (None for any other catalog)."""
    w = as_warehouse(warehouse)
    return Path(w.catalog_uri.removeprefix("jdbc:sqlite:").removeprefix("file:")) if _is_sqlite(w) else None


def spark_catalog_conf(name: str, warehouse: Warehouse | Path | str) -> dict[str, str]:
    """Session settings (all `spark.sql.`, so a Spark Connect client may set them) of the
    catalog `name` on `warehouse`."""
    w = as_warehouse(warehouse)
    prefix = f"spark.sql.catalog.{name}"
    conf = {prefix: "org.apache.iceberg.spark.SparkCatalog", f"{prefix}.type": w.catalog_type}
    if w.catalog_uri is not None:
        conf[f"{prefix}.uri"] = w.catalog_uri
    if w.catalog_type == "jdbc":
        # V1: the catalog tables pyiceberg's SQL catalog reads too (views are not used)
        conf[f"{prefix}.jdbc.schema-version"] = "V1"
    if _is_sqlite(w):
        # SQLite takes one writer at a time: the tables of a window commit from a few threads
        conf[f"{prefix}.jdbc.busy_timeout"] = str(SQLITE_BUSY_SECONDS * 1000)
    # Tags and `main` are also moved by pyiceberg (iceberg_refs.publish): a table Spark
    # had cached would not see them.
    conf[f"{prefix}.cache-enabled"] = "false"
    conf[f"{prefix}.warehouse"] = w.location
    if w.is_s3:
        # Iceberg's own S3 client (iceberg-aws-bundle), not Hadoop's s3a: credentials from the
        # AWS SDK's default chain (environment, profile, role), never from here.
        conf[f"{prefix}.io-impl"] = S3_FILE_IO
        if w.s3_endpoint:
            conf[f"{prefix}.s3.endpoint"] = w.s3_endpoint
        conf[f"{prefix}.s3.path-style-access"] = str(w.path_style).lower()
    if w.s3_region and (w.is_s3 or w.catalog_type == "glue"):
        conf[f"{prefix}.client.region"] = w.s3_region
    for key, value in w.catalog_properties:
        conf[f"{prefix}.{key}"] = value
    return conf


def check_spark_can_open(warehouse: Warehouse | Path | str, jars: str) -> None:
    """A Hive catalog needs the Hive metastore client on Spark's class path, which this project
    does not ship (jars/pom.xml): a clear error now rather than a ClassNotFoundException in the
    first window. `jars`: the session's `spark.jars` and `spark.jars.packages`."""
    w = as_warehouse(warehouse)
    if w.catalog_type == "hive" and "hive-metastore" not in jars:
        raise ValueError("a Hive catalog needs the Hive metastore client jars (org.apache.hive:hive-metastore and "
                         "its dependencies), which cdc_assets does not ship: add them to spark.jars or "
                         "spark.jars.packages (CDC_ASSETS_SPARK_CONF), or use a jdbc, rest or glue catalog")


def use_catalog(spark, warehouse: Warehouse | Path | str) -> str:
    """The name under which `spark` reads and writes `warehouse`'s catalog: always `cdc`.

    Iceberg's JDBC catalog keys every table by the catalog's name, so the name must be the
    same in every process (pyiceberg opens `cdc` too). A process normally works on the one
    warehouse its settings name; one that meets another (the tests, the benchmarks) points
    `cdc` at it and drops the session's loaded catalogs, so the next statement opens it."""
    conf = spark_catalog_conf(CATALOG, warehouse)
    ensure_wal(warehouse)
    loaded = tuple(sorted(conf.items()))
    # The conf alone does not tell: `SparkSession.builder.getOrCreate()` (PySparkResource)
    # sets a new warehouse's conf on a session whose catalog is already loaded on the old one.
    if getattr(spark, _LOADED_CONF, None) != loaded:
        # Another catalog's settings would stay (the JDBC settings under a REST catalog, the
        # io-impl of an s3 warehouse under a local one). Table defaults and overrides are the
        # user's (CDC_ASSETS_SPARK_CONF, the benchmarks' file size), whatever the catalog.
        prefix = f"spark.sql.catalog.{CATALOG}."
        kept = (f"{prefix}table-default.", f"{prefix}table-override.")
        for key in [k for k in spark.conf.getAll if k.startswith(prefix) and not k.startswith(kept) and k not in conf]:
            spark.conf.unset(key)
        for key, value in conf.items():
            spark.conf.set(key, value)
        manager = _catalog_manager(spark)
        if manager is not None:
            manager.reset()
        setattr(spark, _LOADED_CONF, loaded)
    return CATALOG


_LOADED_CONF = "_cdc_assets_catalog_conf"  # on the session object: the catalog conf its `cdc` was loaded with


def _catalog_manager(spark):
    """The session's CatalogManager (classic sessions; a Spark Connect session is one
    warehouse's: its server-side catalogs load from the settings the client sent)."""
    jsession = getattr(spark, "_jsparkSession", None)
    return None if jsession is None else jsession.sessionState().catalogManager()


SQLITE_BUSY_SECONDS = 60  # how long a catalog commit waits for SQLite's one writer
_WAL_FILES: set[tuple[Path, int]] = set()  # (path, inode): catalog files this process put in WAL mode


def ensure_wal(warehouse: Warehouse | Path | str) -> None:
    """Puts an embedded SQLite catalog in WAL mode (once per file; SQLite keeps it in the file).

    In SQLite's default rollback journal a writer that waits to commit (PENDING) shuts out every
    new reader, so one connection left in a read (a cursor not run out, in either engine's pool)
    stopped every reader and writer of the catalog for the whole busy timeout (CI runs: "database
    is locked" on a `PRAGMA table_info`). In WAL mode readers never wait and never hold a writer
    back; writers still commit one at a time. The WAL sits beside the file
    (`catalog.db-wal`, `-shm`) until SQLite checkpoints it: copy the three together."""
    path = sqlite_file(warehouse)
    if path is None or (path.exists() and (path, path.stat().st_ino) in _WAL_FILES):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path, timeout=SQLITE_BUSY_SECONDS) as connection:
        mode = connection.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    connection.close()
    if mode != "wal":
        raise RuntimeError(f"{path}: SQLite kept journal mode {mode!r}, not WAL (a file system without "
                           "shared memory?); the catalog's readers would wait for its writers")
    _WAL_FILES.add((path, path.stat().st_ino))


def pyiceberg_properties(warehouse: Warehouse | Path | str) -> dict[str, str]:
    """What `pyiceberg.catalog.load_catalog(CATALOG, **properties)` takes to open the catalog.
    No credential: pyiceberg's S3 FileIO (pyarrow) takes them from the environment."""
    w = as_warehouse(warehouse)
    location = w.location if w.is_s3 else Path(w.location).as_uri()
    if w.catalog_type == "jdbc":
        sqlite = sqlite_file(w)
        # pyiceberg's SQL catalog takes an SQLAlchemy URL: `jdbc:postgresql://h/db` → `postgresql://h/db`
        # SQLite: a writer waits `SQLITE_BUSY_SECONDS` for another's lock, as Spark's JDBC catalog does
        # (`jdbc.busy_timeout`): a window's tables commit from a few threads and both engines.
        # `check_same_thread=false`: a connection that SQLAlchemy finalizes in another thread (a
        # session collected there) is rolled back and closed, not left open with its lock, which
        # held every other writer of the catalog past the timeout (seen in CI runs).
        uri = (f"sqlite:///{sqlite.absolute()}?timeout={SQLITE_BUSY_SECONDS}&check_same_thread=false"
               if sqlite is not None else w.catalog_uri.removeprefix("jdbc:"))
        properties = {"type": "sql", "uri": uri, "warehouse": location}
    else:
        properties = {"type": w.catalog_type, "warehouse": location}
        if w.catalog_uri is not None:
            properties["uri"] = w.catalog_uri
    if w.is_s3:
        if w.s3_endpoint:
            properties["s3.endpoint"] = w.s3_endpoint
        properties["s3.force-virtual-addressing"] = str(not w.path_style).lower()
    if w.s3_region and w.is_s3:
        properties["s3.region"] = w.s3_region
    if w.s3_region and w.catalog_type == "glue":
        properties["client.region"] = w.s3_region
    return {**properties, **w.properties}


def printable_properties(warehouse: Warehouse | Path | str) -> dict[str, str]:
    """`pyiceberg_properties` without any property that may hold a secret (`SECRET_KEY`): what
    may be printed or logged. A reader supplies those itself (or has them in its environment)."""
    return {k: v for k, v in pyiceberg_properties(warehouse).items() if not SECRET_KEY.search(k)}


def load_pyiceberg_catalog(warehouse: Warehouse | Path | str):
    """The warehouse's catalog through pyiceberg. An embedded SQLite catalog is opened once per
    file and kept (`_OPEN_CATALOGS`): a window's commits, refs and reads open it a few dozen
    times, and each opening made an SQLAlchemy engine and checked the catalog's tables (about
    10 ms, and a table loaded through it 15 ms more). Other catalogs open anew each time."""
    from pyiceberg.catalog import load_catalog

    w = as_warehouse(warehouse)
    if not w.is_s3:  # a local warehouse's catalog file needs its folder (SQLite makes none)
        Path(w.location).mkdir(parents=True, exist_ok=True)
    ensure_wal(w)
    properties = pyiceberg_properties(w)
    path = sqlite_file(w)
    if path is None:
        return load_catalog(CATALOG, **properties)
    # The file's identity is in the key: a warehouse removed and made again at the same place
    # (tests, benchmarks) gets a catalog of its own, never one whose pooled connections still
    # hold the removed file open.
    stat = path.stat()
    key = (tuple(sorted(properties.items())), stat.st_dev, stat.st_ino)
    with _OPEN_CATALOGS_LOCK:
        catalog = _OPEN_CATALOGS.pop(key, None)
        if catalog is None:
            catalog = load_catalog(CATALOG, **properties)
        _OPEN_CATALOGS[key] = catalog  # the most recently used last
        while len(_OPEN_CATALOGS) > _KEPT_CATALOGS:
            # A caller may still hold it: its connections in use close when given back.
            _OPEN_CATALOGS.popitem(last=False)[1].engine.dispose()
    return catalog


_OPEN_CATALOGS: OrderedDict[tuple, object] = OrderedDict()
_OPEN_CATALOGS_LOCK = threading.Lock()
_KEPT_CATALOGS = 4  # a process works on one warehouse; the tests and benchmarks meet many in turn
