"""The window manifest's records read and write the documents the windows table stores, key for
key: a document read and written again is the same document, keys this version does not know
included."""

from __future__ import annotations

import copy
import json

import pytest

from cdc_assets.snapshot.manifests import DdlRecord, FailedTable, TableEntry, WindowManifest

# A data window's stored document, copied from a window write (test_ddl_iceberg's renames:
# db.a -> db.c with a row inserted, db.b -> other.b).
DATA_WINDOW = json.loads(r"""
{
 "ddl": {
  "applied": 2,
  "dropped_tables": {
   "db.a": {
    "by": "RENAME TABLE to db.c",
    "commit_ts": 463268531666944000,
    "rows": 2,
    "sql": "RENAME TABLE db.a TO db.c"
   },
   "db.b": {
    "by": "RENAME TABLE to other.b",
    "commit_ts": 463268531929088000,
    "rows": 1,
    "sql": "RENAME TABLE db.b TO other.b"
   }
  },
  "history_tables": [],
  "history_versions_ended": {},
  "renamed_tables": {
   "db.c": {
    "from": "db.a",
    "identifier": "src.snapshots__db__c",
    "previous_identifier": "src.snapshots__db__a"
   },
   "other.b": {
    "from": "db.b",
    "identifier": "src.snapshots__other__b",
    "previous_identifier": "src.snapshots__db__b"
   }
  },
  "unparsed": []
 },
 "failed_tables": {},
 "tables": {
  "db.c": {
   "conversion_failures": 0,
   "database": "db",
   "deleted_keys": 0,
   "identifier": "src.snapshots__db__c",
   "inserted_keys": 1,
   "moved_in": 2,
   "previous_rows": 0,
   "removed_by_ddl": 0,
   "rows": 3,
   "schema": {
    "columns": [
     "name",
     "id"
    ],
    "database": "db",
    "decimal_integer_digits": {},
    "decimal_scales": {},
    "mysql_types": {
     "id": "bigint",
     "name": "varchar(20)"
    },
    "primary_key": [
     "id"
    ],
    "table": "c"
   },
   "schema_changes": [
    {
     "columns": [
      "name",
      "id"
     ],
     "commit_ts": 463268531666944000,
     "ddl_type": "RENAME",
     "sql": "RENAME TABLE db.a TO db.c"
    }
   ],
   "snapshot_id": 520475552328393809,
   "spark_schema": "{\"fields\":[{\"metadata\":{},\"name\":\"id\",\"nullable\":true,\"type\":\"long\"},{\"metadata\":{},\"name\":\"name\",\"nullable\":true,\"type\":\"string\"},{\"metadata\":{},\"name\":\"_cdc_commit_ts\",\"nullable\":true,\"type\":\"long\"}],\"type\":\"struct\"}",
   "table": "c",
   "table_uuid": "69cfa0b4-ea3e-4080-bc16-bd0d2c39c1cc",
   "written_window_start_ms": 1767229200000
  },
  "other.b": {
   "conversion_failures": 0,
   "database": "other",
   "deleted_keys": 0,
   "identifier": "src.snapshots__other__b",
   "inserted_keys": 0,
   "moved_in": 1,
   "previous_rows": 0,
   "removed_by_ddl": 0,
   "rows": 1,
   "schema": {
    "columns": [
     "name",
     "id"
    ],
    "database": "other",
    "decimal_integer_digits": {},
    "decimal_scales": {},
    "mysql_types": {
     "id": "bigint",
     "name": "varchar(20)"
    },
    "primary_key": [
     "id"
    ],
    "table": "b"
   },
   "schema_changes": [
    {
     "columns": [
      "name",
      "id"
     ],
     "commit_ts": 463268531929088000,
     "ddl_type": "RENAME",
     "sql": "RENAME TABLE db.b TO other.b"
    }
   ],
   "snapshot_id": 888264811052152362,
   "spark_schema": "{\"fields\":[{\"metadata\":{},\"name\":\"id\",\"nullable\":true,\"type\":\"long\"},{\"metadata\":{},\"name\":\"name\",\"nullable\":true,\"type\":\"string\"},{\"metadata\":{},\"name\":\"_cdc_commit_ts\",\"nullable\":false,\"type\":\"long\"}],\"type\":\"struct\"}",
   "table": "b",
   "table_uuid": "d425af5c-51f5-4120-b004-53dc8be234d4",
   "written_window_start_ms": 1767229200000
  }
 },
 "tag": "end-20260101T0200Z",
 "window_end_ms": 1767232800000,
 "window_start_ms": 1767229200000
}
""")

# A quiet window of the same run, carried forward from its fourth window: a reference, no tables.
CARRIED_WINDOW = json.loads(r"""
{
 "carried_forward": true,
 "carried_from_window_start_ms": 1767236400000,
 "ddl": {
  "applied": 0,
  "dropped_tables": {},
  "history_tables": [],
  "history_versions_ended": {},
  "renamed_tables": {},
  "unparsed": []
 },
 "tag": "end-20260101T0500Z",
 "window_end_ms": 1767243600000,
 "window_start_ms": 1767240000000
}
""")


def test_a_stored_data_window_round_trips():
    manifest = WindowManifest.from_json(copy.deepcopy(DATA_WINDOW))
    assert manifest.to_json() == DATA_WINDOW
    assert not manifest.carried_forward and manifest.carried_from_window_start_ms is None
    assert all(isinstance(e, TableEntry) for e in manifest.tables.values())
    assert isinstance(manifest.ddl, DdlRecord) and manifest.ddl.to_json() == DATA_WINDOW["ddl"]
    for tid, doc in DATA_WINDOW["tables"].items():
        entry = manifest.tables[tid]
        assert (entry.database, entry.table, entry.identifier, entry.snapshot_id, entry.rows) == (
            doc["database"], doc["table"], doc["identifier"], doc["snapshot_id"], doc["rows"])
        assert entry.other_keys == {}


def test_a_stored_carried_window_round_trips_without_tables():
    manifest = WindowManifest.from_json(copy.deepcopy(CARRIED_WINDOW))
    assert manifest.carried_forward and manifest.tables == {} and manifest.failed_tables == {}
    assert manifest.data_window_start_ms == 1_767_236_400_000
    assert manifest.to_json() == CARRIED_WINDOW
    assert manifest.ddl == DdlRecord()  # a quiet window applies no DDL


def test_keys_this_version_does_not_know_survive_a_round_trip():
    doc = copy.deepcopy(DATA_WINDOW)
    doc["written_by"] = {"version": "9.9"}
    doc["ddl"]["partitions_truncated"] = 3
    tid = next(iter(doc["tables"]))
    doc["tables"][tid]["bloom_filter_columns"] = ["k"]
    doc["failed_tables"] = {"db.bad": {"database": "db", "table": "bad", "reason": "r", "attempt": 2}}
    manifest = WindowManifest.from_json(copy.deepcopy(doc))
    assert manifest.other_keys == {"written_by": {"version": "9.9"}}
    assert manifest.ddl.other_keys == {"partitions_truncated": 3}
    assert manifest.tables[tid].other_keys == {"bloom_filter_columns": ["k"]}
    assert manifest.failed_tables["db.bad"] == FailedTable("db", "bad", "r", {"attempt": 2})
    assert manifest.to_json() == doc
    # kept by the records made from them too: a table carried into the next window
    assert manifest.tables[tid].carried().to_json()["bloom_filter_columns"] == ["k"]


def test_counts_and_keys_a_document_lacks_read_as_their_defaults():
    doc = copy.deepcopy(DATA_WINDOW)
    tid = next(iter(doc["tables"]))
    for key in ("removed_by_ddl", "moved_in", "table_uuid"):
        doc["tables"][tid].pop(key, None)
    del doc["ddl"]["history_tables"], doc["failed_tables"]
    manifest = WindowManifest.from_json(doc)
    entry = manifest.tables[tid]
    assert (entry.removed_by_ddl, entry.moved_in, entry.table_uuid, entry.failed) == (0, 0, None, None)
    assert manifest.ddl.history_tables == [] and manifest.failed_tables == {}
    assert "table_uuid" not in entry.to_json() and "failed" not in entry.to_json()


def test_a_carried_entry_keeps_the_snapshot_and_counts_no_change():
    entry = WindowManifest.from_json(copy.deepcopy(DATA_WINDOW)).tables["db.c"]
    failed = TableEntry.from_json({**entry.to_json(), "failed": "table db.c: writing its snapshot failed"})
    for e in (entry, failed):
        carried = e.carried()
        assert (carried.snapshot_id, carried.identifier, carried.rows, carried.previous_rows) == (
            e.snapshot_id, e.identifier, e.rows, e.rows)
        assert (carried.inserted_keys, carried.deleted_keys, carried.removed_by_ddl, carried.moved_in,
                carried.conversion_failures, carried.schema_changes) == (0, 0, 0, 0, 0, [])
        assert carried.failed == e.failed and carried.written_window_start_ms == e.written_window_start_ms


def test_a_window_with_a_failed_table_is_refused_by_require_built():
    manifest = WindowManifest.from_json(copy.deepcopy(DATA_WINDOW))
    assert manifest.require_built() is manifest
    doc = {**copy.deepcopy(DATA_WINDOW), "failed_tables": {"db.bad": {"database": "db", "table": "bad",
                                                                          "reason": "a fault"}}}
    with pytest.raises(ValueError, match=r"window \d+ has tables that failed to build \(db\.bad: a fault\)"):
        WindowManifest.from_json(doc).require_built()
