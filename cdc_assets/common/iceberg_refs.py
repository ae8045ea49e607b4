"""pyiceberg catalog operations on a window's tables, no Spark job: load a table by the
manifest's identifier, find it again after a RENAME TABLE (its UUID), and set the refs that
publish a window (each table's end tag, and `main` when the window is the newest).

Spark, or pyiceberg for a small write (`iceberg_arrow_writes`), writes a window on a branch
(`iceberg_tables.IcebergTable.write_window`); the refs
are moved here, as catalog commits, once every table of the window is written."""

from __future__ import annotations

from cdc_assets.common.warehouse import identifier_parts, load_pyiceberg_catalog, table_identifier


def load_table(catalog, identifier: str):
    """A pyiceberg table by the manifest's identifier `<namespace>.<name>` (a name may hold dots)."""
    return catalog.load_table(identifier_parts(identifier))


def table_uuids(catalog, identifiers) -> dict[str, str]:
    """Each table's Iceberg UUID (kept by a rename): what a manifest entry records to find
    its table again (`resolve_identifier`)."""
    return {i: str(load_table(catalog, i).metadata.table_uuid) for i in identifiers}


def resolve_identifier(catalog, identifier: str, table_uuid: str | None, snapshot_id: int) -> str:
    """The identifier the table of a manifest entry has now. An entry names the table as it
    was when the window was written; a later RENAME TABLE renamed the Iceberg table (same
    UUID, same snapshots), and a later CREATE may have made another table under the old
    name. The entry's table is the one with its UUID (entries written before UUIDs were
    recorded: the one holding its snapshot, snapshot ids being random 63-bit numbers).
    Looks at the entry's own identifier first, then the namespace's other tables."""
    from pyiceberg.exceptions import NoSuchTableError

    def is_it(table) -> bool:
        if table_uuid is not None:
            return str(table.metadata.table_uuid) == table_uuid
        return table.metadata.snapshot_by_id(snapshot_id) is not None

    namespace, _ = identifier_parts(identifier)
    try:
        if is_it(load_table(catalog, identifier)):
            return identifier
    except NoSuchTableError:
        pass
    for candidate in catalog.list_tables((namespace,)):
        name = table_identifier(namespace, candidate[-1])
        if name != identifier and is_it(catalog.load_table(candidate)):
            return name
    raise LookupError(f"the Iceberg table of {identifier} (uuid {table_uuid}, snapshot {snapshot_id}) is not "
                      f"in the catalog's namespace {namespace!r}: it was dropped outside cdc_assets")


def publish(warehouse, written: dict[str, int], carried: dict[str, int], tag: str, branch: str,
            newest: bool) -> None:
    """Make a window visible: every table of it (`identifier -> snapshot id`) gets the tag of
    its end; the tables it wrote drop their window branch and, when it is the newest window,
    move `main` to that snapshot. pyiceberg: catalog commits only, no Spark job."""
    catalog = load_pyiceberg_catalog(warehouse)
    for identifier, snapshot_id in {**carried, **written}.items():
        table = load_table(catalog, identifier)
        with table.manage_snapshots() as refs:
            refs.create_tag(snapshot_id, tag)
            if identifier in written:
                if newest and (table.current_snapshot() is None
                               or table.current_snapshot().snapshot_id != snapshot_id):
                    refs.set_current_snapshot(snapshot_id=snapshot_id)
                if branch in table.metadata.refs:
                    refs.remove_branch(branch)


def tag_snapshots(warehouse, snapshots: dict[str, int], tags: list[str]) -> None:
    """Every tag in `tags` on each table's snapshot (`identifier -> snapshot id`): one catalog
    commit per table, however many tags (a run of quiet windows)."""
    catalog = load_pyiceberg_catalog(warehouse)
    for identifier, snapshot_id in snapshots.items():
        table = load_table(catalog, identifier)
        with table.manage_snapshots() as refs:
            for tag in tags:
                refs.create_tag(snapshot_id, tag)
