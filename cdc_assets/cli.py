"""`cdc-assets`: replay a dump through Dagster, export snapshots, list the warehouse's Iceberg
tables, simulate an upstream, demo, write the driver JVM's class archive, and run a
long-lived local Spark Connect server."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

from dagster import BetaWarning, PreviewWarning

from cdc_assets.common import spark_connect_server
from cdc_assets.common.settings import SourceConfig, load_settings, quarantine_rate, warehouse_location
from cdc_assets.decode import DECODERS
from cdc_assets.landing.layouts import AUTO_LAYOUT, LAYOUTS, check_layout_options
from cdc_assets.landing.s3_input import is_s3_uri
from cdc_assets.landing.state import AUTO_COMPLETENESS, CompletenessMode


def _options(pairs: list[str], flag: str = "--option") -> dict[str, str]:
    out = {}
    for p in pairs:
        if "=" not in p:
            raise SystemExit(f"{flag} takes key=value, got {p!r}")
        k, v = p.split("=", 1)
        out[k] = v
    return out


def _layout_options(args: argparse.Namespace) -> dict[str, str]:
    return _options(args.layout_option, "--layout-option")


def _s3_client(settings):
    """A boto3 client outside a Dagster run (credentials from boto3's own chain, as in runs)."""
    import boto3

    return boto3.client("s3", endpoint_url=settings.s3_endpoint_url, region_name=settings.s3_region)


def _resolve_auto(args: argparse.Namespace, root: Path) -> tuple[str, str, dict[str, str]]:
    """(layout, protocol, options) with `auto` resolved by detection; what was detected is
    said on stderr (an ambiguous dump is a ValueError naming the candidates)."""
    from cdc_assets.landing.inspect_dump import resolve

    options = _options(args.option)
    if args.layout != AUTO_LAYOUT and args.protocol != "auto":
        return args.layout, args.protocol, options
    resolved = resolve(root, args.layout, args.protocol, options, _layout_options(args))
    print(f"cdc-assets: {resolved.describe()}", file=sys.stderr, flush=True)
    return resolved.layout, resolved.protocol, resolved.options


def cmd_replay(args: argparse.Namespace) -> int:
    from cdc_assets.landing.input_files import local_dump_root, sync_s3_source
    from cdc_assets.replay import default_instance, replay

    base = load_settings().with_overrides(warehouse=warehouse_location(args.warehouse))
    layout, protocol, options = args.layout, args.protocol, _options(args.option)
    layout_options = _layout_options(args)
    # `--layout auto` alone on a folder not there yet is left to the landing (which detects it then)
    if protocol == "auto" or (layout == AUTO_LAYOUT and (is_s3_uri(args.input) or Path(args.input).is_dir())):
        source = SourceConfig(name=args.source, protocol="canal-json", input_path=args.input)
        warehouse = base.iceberg_warehouse
        if is_s3_uri(args.input):  # detection reads the mirror the landing reads (and reuses)
            sync_s3_source(source, warehouse, _s3_client(base))
        layout, protocol, options = _resolve_auto(args, local_dump_root(source, warehouse))
    check_layout_options(layout, layout_options)  # before any landing: exit 2 naming the known ones
    source = SourceConfig(
        name=args.source, protocol=protocol,
        input_path=args.input if is_s3_uri(args.input) else str(Path(args.input).absolute()),
        layout=layout, options=options, layout_options=layout_options, time_zone=args.time_zone,
        completeness=args.completeness, allowed_lateness_seconds=args.allowed_lateness_seconds,
        max_quarantine_rate=quarantine_rate(
            os.environ.get("CDC_ASSETS_MAX_QUARANTINE_RATE", "0.01") if args.max_quarantine_rate is None
            else args.max_quarantine_rate),
    )
    settings = base.with_overrides(sources=(source,), window_minutes=args.window_minutes)
    summary = replay(settings, source.name, default_instance())
    print(json.dumps(summary.as_json(), sort_keys=True))
    return 0 if summary.ok else 1


def cmd_inspect(args: argparse.Namespace) -> int:
    import tempfile

    from cdc_assets.landing.inspect_dump import inspect_dump, render_text
    from cdc_assets.landing.input_files import wanted_object
    from cdc_assets.landing.s3_input import mirror_prefix

    def run(root: Path) -> dict:
        return inspect_dump(root, input_location=args.input, layout=args.layout, protocol=args.protocol,
                            options=_options(args.option), layout_options=_layout_options(args),
                            window_minutes=args.window_minutes,
                            time_zone=args.time_zone, completeness=args.completeness,
                            allowed_lateness_seconds=args.allowed_lateness_seconds, max_messages=args.max_messages)

    if is_s3_uri(args.input):
        with tempfile.TemporaryDirectory(prefix="cdc-assets-inspect-") as tmp:
            mirror_prefix(_s3_client(load_settings()), args.input, Path(tmp), wanted_object(args.layout))
            report = run(Path(tmp))
    else:
        report = run(Path(args.input))
    print(json.dumps(report, sort_keys=True) if args.json else render_text(report))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from cdc_assets.snapshot.export import export_snapshot

    def spark():  # only for an instant inside a window
        from cdc_assets.common.spark_session import spark_config, start_spark_session

        return start_spark_session(spark_config(load_settings()))

    warehouse = load_settings().with_overrides(warehouse=warehouse_location(args.warehouse)).iceberg_warehouse
    for t in export_snapshot(warehouse, args.source, Path(args.out), args.as_of, spark=spark):
        print(json.dumps({"table": f"{t.database}.{t.table}", "rows": t.rows, "path": str(t.path)}))
    return 0


def cmd_tables(args: argparse.Namespace) -> int:
    from cdc_assets.common.warehouse_listing import TablesError, render_text, tables_json


    try:
        settings = load_settings()
        if args.warehouse:  # the catalog and S3 settings still come from the environment / sources file
            settings = settings.with_overrides(warehouse=warehouse_location(args.warehouse))
        warehouse = settings.iceberg_warehouse
    except ValueError as exc:  # an invalid catalog setting
        print(f"cdc-assets: error: {exc}", file=sys.stderr)
        return 1
    try:
        document = tables_json(warehouse, args.source)
    except TablesError as exc:
        print(f"cdc-assets: error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(document) if args.json else render_text(document))
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from cdc_assets.simulator import generate

    dump = generate(Path(args.out), seed=args.seed, layout=args.layout, protocol=args.protocol)
    print(json.dumps({"dump": str(dump.dump_dir), "truth": str(dump.truth_path)}))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from cdc_assets.demo import run_demo

    return run_demo()


def cmd_jvm_archive(args: argparse.Namespace) -> int:
    from cdc_assets.common.jvm_archive_build import build

    try:
        print(json.dumps(build(Path(args.out) if args.out else None)))
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"cdc-assets: no JVM archive written, Spark starts without one: {exc}", file=sys.stderr)
        return 1
    return 0


def cmd_connect_server(args: argparse.Namespace) -> int:
    settings = load_settings()
    master, host, port = spark_connect_server.default_address(settings)
    spark_connect_server.run(settings, args.master or master, args.host or host, args.port or port)
    return 0  # not reached: the server replaced this process


_LAYOUT_OPTION_HELP = ("layout option, the writer's own names (e.g. kafka-connect-s3's "
                       "format.bytearray.separator='\\r\\n'; escapes \\n \\r \\t \\\\ \\uXXXX)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cdc-assets", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("replay", help="land a dump and materialize every complete window through Dagster")
    r.add_argument("--protocol", required=True, choices=["auto", *sorted(DECODERS)],
                   help="auto: detected from a sample of the messages, as `inspect` does (said on stderr)")
    r.add_argument("--input", required=True,
                   help="folder holding the dump files, or s3://bucket/prefix (endpoint: CDC_ASSETS_S3_ENDPOINT_URL)")
    r.add_argument("--warehouse", required=True,
                   help="a folder or s3://bucket/prefix for every layer's Iceberg tables (the catalog and S3 "
                        "settings come from the environment: docs/deploying.md)")
    r.add_argument("--layout", default=AUTO_LAYOUT, choices=[AUTO_LAYOUT, *LAYOUTS])
    r.add_argument("--source", default="replay", help="source name (asset key prefix)")
    r.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="protocol option, TiCDC names (e.g. enable-tidb-extension=true)")
    r.add_argument("--layout-option", action="append", default=[], metavar="KEY=VALUE",
                   help=_LAYOUT_OPTION_HELP)
    r.add_argument("--time-zone", default="UTC", help="the changefeed's time zone (TIMESTAMP columns)")
    r.add_argument("--window-minutes", type=int, default=60)
    r.add_argument("--completeness", default=AUTO_COMPLETENESS, choices=[AUTO_COMPLETENESS, *CompletenessMode],
                   help="how a window is known complete: watermarks (TiCDC), event time minus the "
                        "allowed lateness (sources without watermarks), or batch (the dump is complete)")
    r.add_argument("--allowed-lateness-seconds", type=int, default=0)
    r.add_argument("--max-quarantine-rate", type=float, default=None,
                   help="share of a window's messages that may be quarantined before the ERROR check "
                        "quarantine_rate_within_limit fails (default: CDC_ASSETS_MAX_QUARANTINE_RATE, else 0.01)")
    r.set_defaults(func=cmd_replay)

    i = sub.add_parser("inspect", help="detect a dump's layout and protocol, and show its partitions, "
                       "windows, tables and the replay command to run (no Spark)")
    i.add_argument("--input", required=True, help="dump folder, or s3://bucket/prefix (as replay)")
    i.add_argument("--json", action="store_true", help="print the report as one JSON object")
    i.add_argument("--protocol", default="auto", choices=["auto", *sorted(DECODERS)])
    i.add_argument("--layout", default=AUTO_LAYOUT, choices=[AUTO_LAYOUT, *LAYOUTS])
    i.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="protocol option (overrides a detected one)")
    i.add_argument("--layout-option", action="append", default=[], metavar="KEY=VALUE",
                   help=_LAYOUT_OPTION_HELP)
    i.add_argument("--time-zone", default="UTC")
    i.add_argument("--window-minutes", type=int, default=60)
    i.add_argument("--completeness", default=AUTO_COMPLETENESS, choices=[AUTO_COMPLETENESS, *CompletenessMode])
    i.add_argument("--allowed-lateness-seconds", type=int, default=0)
    i.add_argument("--max-messages", type=int, default=1_000_000,
                   help="read at most this many messages (the report says when it stopped there)")
    i.set_defaults(func=cmd_inspect)

    e = sub.add_parser("export", help="write each table's snapshot as OUT/<database>.<table>.parquet")
    e.add_argument("--warehouse", required=True)
    e.add_argument("--out", required=True)
    e.add_argument("--as-of", default="latest", help="'latest', a TiDB TSO (commits <= it) or an ISO-8601 UTC time "
                        "(commits before it); any instant, not only window ends")
    e.add_argument("--source", default="replay")
    e.set_defaults(func=cmd_export)

    t = sub.add_parser("tables", help="list the warehouse's Iceberg tables, their window-end tags and how "
                       "pyiceberg opens the catalog (no Spark)")
    t.add_argument("--warehouse", default=None, help="default: the configured warehouse "
                   "(CDC_ASSETS_WAREHOUSE, the sources file, ./.cdc_assets/warehouse)")
    t.add_argument("--source", default=None, help="only this source's tables (default: every source)")
    t.add_argument("--json", action="store_true", help='print {"catalog": {"name", "properties"}, "tables": [...]}')
    t.set_defaults(func=cmd_tables)

    s = sub.add_parser("simulate", help="write a simulated TiCDC topic dump and its true table states")
    s.add_argument("--out", required=True)
    s.add_argument("--seed", type=int, default=7)
    s.add_argument("--layout", default="kafka-parquet", choices=["kafka-parquet", "kcat-jsonl", "storage-sink", "kafka-connect-s3"])
    s.add_argument("--protocol", default="canal-json", help="encoder (cdc_assets/simulator/protocols.py)")
    s.set_defaults(func=cmd_simulate)

    d = sub.add_parser("demo", help="simulate the sample dump, replay it, print a summary")
    d.set_defaults(func=cmd_demo)

    j = sub.add_parser("jvm-archive", help="write the Spark driver JVM's class-data-sharing archive "
                       "(faster session starts; `make dev` and `make bench` run it once)")
    j.add_argument("--out", default=None, help="archive file (default: inside the virtual environment, "
                   "where every session looks for it; elsewhere: set CDC_ASSETS_JVM_ARCHIVE to it)")
    j.set_defaults(func=cmd_jvm_archive)

    c = sub.add_parser("connect-server", help="run a long-lived local Spark Connect server in the foreground; "
                       "Dagster runs with CDC_ASSETS_SPARK_MASTER=sc://HOST:PORT reuse its warm JVM")
    c.add_argument("--master", default=None, help="where the server runs Spark (default: CDC_ASSETS_SPARK_MASTER "
                   "unless that is a Connect URL, else local[2])")
    c.add_argument("--host", default=None, help="address to listen on (default: the host of CDC_ASSETS_SPARK_MASTER "
                   "when that is a Connect URL, else 127.0.0.1; the server does not authenticate clients)")
    c.add_argument("--port", type=int, default=None, help="default: the port of CDC_ASSETS_SPARK_MASTER when that "
                   "is a Connect URL, else 15002")
    c.set_defaults(func=cmd_connect_server)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    warnings.filterwarnings("ignore", category=BetaWarning)
    warnings.filterwarnings("ignore", category=PreviewWarning)
    try:
        return args.func(args)
    except (FileNotFoundError, ValueError, KeyError) as exc:
        print(f"cdc-assets: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
