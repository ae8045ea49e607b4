"""Dumps under `s3://bucket/prefix`: list the objects and mirror the new ones locally.

Spark here has no s3a connector (no hadoop-aws jar), so landing reads a local mirror of the
prefix: `mirror_prefix` downloads only the objects whose ETag or size is not the one it
mirrored before, then landing proceeds as for a local folder (and skips content it has
already landed, by digest). A downloaded file gets the object's LastModified as its mtime,
the closest thing to a local file's mtime (the landing's size-and-mtime fingerprint, which
saves re-hashing a file it has seen).

The client is any boto3 S3 client (dagster-aws `S3Resource.get_client()` in the assets).
Credentials never pass through here: boto3 reads them from the environment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from cdc_assets.common.names import read_json, temp_sibling, write_json_atomic

S3_SCHEME = "s3://"
# The mirror's record of what it holds: relative path -> {"etag", "size"}.
MIRROR_INDEX = ".s3_index.json"


def is_s3_uri(location: str) -> bool:
    return location.startswith(S3_SCHEME)


def split_s3_uri(uri: str) -> tuple[str, str]:
    """`s3://bucket/a/b` -> ("bucket", "a/b/"): the prefix always names a folder."""
    if not is_s3_uri(uri):
        raise ValueError(f"not an s3:// URI: {uri!r}")
    bucket, _, prefix = uri[len(S3_SCHEME):].partition("/")
    if not bucket:
        raise ValueError(f"no bucket in {uri!r}")
    prefix = prefix.strip("/")
    return bucket, f"{prefix}/" if prefix else ""


@dataclass(frozen=True)
class RemoteObject:
    key: str
    relative: PurePosixPath  # below the prefix: the path of its copy below the mirror root
    size: int
    etag: str
    last_modified: datetime

    @property
    def version(self) -> dict:
        return {"etag": self.etag, "size": self.size}


def _relative(key: str, prefix: str) -> PurePosixPath:
    rel = PurePosixPath(key[len(prefix):])
    # A key is any string: one with `..` or an absolute path must not escape the mirror.
    if not rel.parts or rel.is_absolute() or any(p in ("..", ".") for p in rel.parts):
        raise ValueError(f"object key {key!r} is not a plain path below the prefix {prefix!r}")
    return rel


def list_objects(client: Any, uri: str, wanted: Callable[[PurePosixPath], bool] = lambda _p: True) -> list[RemoteObject]:
    """Every object below the prefix whose relative path `wanted` accepts, by key."""
    bucket, prefix = split_s3_uri(uri)
    out = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            if obj["Key"].endswith("/"):
                continue  # a "folder" marker, no data
            rel = _relative(obj["Key"], prefix)
            if wanted(rel):
                out.append(RemoteObject(obj["Key"], rel, int(obj["Size"]), obj["ETag"].strip('"'),
                                        obj["LastModified"]))
    return sorted(out, key=lambda o: o.key)


def read_mirror_index(mirror_root: Path) -> dict[str, dict]:
    return read_json(mirror_root / MIRROR_INDEX, default={})


def not_mirrored(objects: list[RemoteObject], mirror_root: Path) -> list[RemoteObject]:
    """The objects whose current version the mirror does not hold (new or changed)."""
    index = read_mirror_index(mirror_root)
    return [o for o in objects
            if index.get(str(o.relative)) != o.version or not (mirror_root / o.relative).is_file()]


@dataclass(frozen=True)
class MirrorResult:
    objects: int
    downloaded: int
    bytes_downloaded: int

    @property
    def unchanged(self) -> int:
        return self.objects - self.downloaded


def mirror_prefix(client: Any, uri: str, mirror_root: Path,
                  wanted: Callable[[PurePosixPath], bool] = lambda _p: True) -> MirrorResult:
    """Download the new and changed objects below `uri` into `mirror_root`.

    Each file appears atomically (temporary sibling, then rename), and the index is saved
    after every download, so an interrupted mirror resumes where it stopped.
    """
    bucket, _ = split_s3_uri(uri)
    objects = list_objects(client, uri, wanted)
    todo = not_mirrored(objects, mirror_root)
    index = read_mirror_index(mirror_root)
    done_bytes = 0
    for obj in todo:
        final = mirror_root / obj.relative
        tmp = temp_sibling(final)  # hidden: no layout lists it
        client.download_file(bucket, obj.key, str(tmp))
        stamp = obj.last_modified.timestamp()
        os.utime(tmp, (stamp, stamp))
        os.replace(tmp, final)
        index[str(obj.relative)] = obj.version
        write_json_atomic(mirror_root / MIRROR_INDEX, index)
        done_bytes += obj.size
    return MirrorResult(len(objects), len(todo), done_bytes)
