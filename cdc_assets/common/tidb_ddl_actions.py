"""TiDB's DDL action codes (`model.ActionType`, pkg/meta/model/job.go) -> action names.

Open Protocol DDL events (`t`) and the storage sink's schema files (`Type`) carry the code;
the change log's `ddl_type` holds the name (the form the simulator's DDL events use).
"""

from __future__ import annotations

DDL_ACTIONS = {
    1: "create schema", 2: "drop schema", 3: "create table", 4: "drop table", 5: "add column",
    6: "drop column", 7: "add index", 8: "drop index", 9: "add foreign key",
    10: "drop foreign key", 11: "truncate table", 12: "modify column", 13: "rebase auto id",
    14: "rename table", 15: "set default value", 16: "shard rowid", 17: "modify table comment",
    18: "rename index", 19: "add table partition", 20: "drop table partition", 21: "create view",
    22: "modify table charset and collate", 23: "truncate table partition", 24: "drop view",
    25: "recover table", 26: "modify schema charset and collate", 27: "lock table",
    28: "unlock table", 29: "repair table", 30: "set tiflash replica",
    31: "update tiflash replica status", 32: "add primary key", 33: "drop primary key",
    34: "create sequence", 35: "alter sequence", 36: "drop sequence", 37: "add columns",
    38: "drop columns", 39: "modify auto id cache", 40: "rebase auto_random ID",
    41: "alter index visibility", 42: "exchange partition", 43: "add check constraint",
    44: "drop check constraint", 45: "alter check constraint", 47: "rename tables", 48: "drop indexes",
    49: "alter table attributes", 50: "alter table partition attributes", 51: "create placement policy",
    52: "alter placement policy", 53: "drop placement policy", 54: "alter table partition placement",
    55: "modify schema default placement", 56: "alter table placement", 57: "alter table cache",
    58: "alter table statistics options", 59: "alter table nocache", 60: "create tables",
    61: "alter table multi-schema change", 62: "flashback cluster", 63: "flashback schema",
    64: "alter table reorganize partition", 65: "alter table ttl", 67: "alter table no_ttl",
    68: "create resource group", 69: "alter resource group", 70: "drop resource group",
    71: "alter table partition by", 72: "alter table remove partitioning", 73: "add vector index",
}


def ddl_action_name(code) -> str:
    return DDL_ACTIONS.get(code, f"ddl type {code}")
