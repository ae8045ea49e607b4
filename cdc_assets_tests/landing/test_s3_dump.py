"""Listing and mirroring an S3 prefix, against moto's S3 server over HTTP on loopback."""

from __future__ import annotations

import traceback
import uuid

import boto3
import botocore.config
import pytest

from cdc_assets.common.settings import SourceConfig
from cdc_assets.landing.input_files import files_not_landed, list_input_files, mirror_root, wanted_object
from cdc_assets.landing.s3_input import MIRROR_INDEX, mirror_prefix, split_s3_uri
from cdc_assets.landing.state import LandingState
from cdc_assets.landing.tables import save_state
from cdc_assets_tests.servers import moto_s3


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory):
    with moto_s3(tmp_path_factory.mktemp("moto")) as endpoint:
        yield endpoint


@pytest.fixture
def client(s3_endpoint):
    return boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1",
                        aws_access_key_id="test-key", aws_secret_access_key="test-secret")


@pytest.fixture
def bucket(client):
    name = f"dumps-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=name)
    return name


def test_split_s3_uri_names_the_bucket_and_a_folder_prefix():
    assert split_s3_uri("s3://b/a/b") == ("b", "a/b/")
    assert split_s3_uri("s3://b/a/b/") == ("b", "a/b/")
    assert split_s3_uri("s3://b") == ("b", "")
    with pytest.raises(ValueError):
        split_s3_uri("/local/folder")


def test_mirror_downloads_only_new_and_changed_data_objects(client, bucket, tmp_path):
    put = lambda key, body: client.put_object(Bucket=bucket, Key=key, Body=body)  # noqa: E731
    put("cdc/t/part-0.parquet", b"zero")
    put("cdc/t/part-1.parquet", b"one")
    put("cdc/t/_SUCCESS", b"")              # Spark bookkeeping: not data
    put("cdc/.staging/part-9.parquet", b"x")  # hidden folder: not data
    put("cdc/notes.md", b"not a dump file")
    put("cdcx/t/part-7.parquet", b"another prefix")
    uri, mirror = f"s3://{bucket}/cdc", tmp_path / "mirror"
    wanted = wanted_object("auto")

    first = mirror_prefix(client, uri, mirror, wanted)
    assert (first.objects, first.downloaded, first.bytes_downloaded) == (2, 2, 7)
    files = sorted(str(p.relative_to(mirror)) for p in mirror.rglob("*") if p.is_file())
    assert files == [MIRROR_INDEX, "t/part-0.parquet", "t/part-1.parquet"]
    # The copy's mtime is the object's LastModified (line layouts read it as the Kafka timestamp).
    head = client.head_object(Bucket=bucket, Key="cdc/t/part-0.parquet")
    assert (mirror / "t/part-0.parquet").stat().st_mtime == head["LastModified"].timestamp()

    assert mirror_prefix(client, uri, mirror, wanted).downloaded == 0
    put("cdc/t/part-1.parquet", b"one, rewritten")
    put("cdc/t/part-2.parquet", b"two")
    third = mirror_prefix(client, uri, mirror, wanted)
    assert (third.objects, third.downloaded, third.unchanged) == (3, 2, 1)
    assert (mirror / "t/part-1.parquet").read_bytes() == b"one, rewritten"


def test_a_named_layout_mirrors_every_object_that_is_not_hidden(client, bucket, tmp_path):
    """The landing then reads each as that layout or reports why not (issue 44 item 6)."""
    for key in ["cdc/t/part-0.parquet", "cdc/t/_SUCCESS", "cdc/.staging/part-9.parquet", "cdc/notes.md"]:
        client.put_object(Bucket=bucket, Key=key, Body=b"x")
    mirror = tmp_path / "mirror"
    mirror_prefix(client, f"s3://{bucket}/cdc", mirror, wanted_object("kafka-parquet"))
    files = sorted(str(p.relative_to(mirror)) for p in mirror.rglob("*") if p.is_file())
    assert files == [MIRROR_INDEX, "notes.md", "t/part-0.parquet"]


def test_a_key_that_would_leave_the_mirror_is_refused(client, bucket, tmp_path):
    client.put_object(Bucket=bucket, Key="cdc/../escape.parquet", Body=b"x")
    with pytest.raises(ValueError, match="not a plain path"):
        mirror_prefix(client, f"s3://{bucket}/cdc", tmp_path / "mirror")
    assert not (tmp_path / "escape.parquet").exists()


def test_files_not_landed_covers_unmirrored_objects_and_unlanded_copies(client, bucket, tmp_path):
    for i in range(3):
        client.put_object(Bucket=bucket, Key=f"cdc/t/part-{i}.parquet", Body=f"p{i}".encode())
    source = SourceConfig(name="s", protocol="canal-json", input_path=f"s3://{bucket}/cdc", layout="kafka-parquet")
    warehouse = tmp_path / "warehouse"
    assert [f.name for f in list_input_files(source, s3_client=client)] == [f"t/part-{i}.parquet" for i in range(3)]
    assert len(files_not_landed(source, warehouse, client)) == 3

    mirror_prefix(client, source.input_path, mirror_root(warehouse, "s"), wanted_object(source.layout))
    # Mirrored but not landed yet (say the landing failed after the download): still pending.
    assert [f.name for f in files_not_landed(source, warehouse, client)] == [f"t/part-{i}.parquet" for i in range(3)]

    # Landing fingerprints the copies of part-0 and part-1.
    state = LandingState()
    for i in range(2):
        state.remember_file(mirror_root(warehouse, "s") / f"t/part-{i}.parquet", f"digest-{i}")
        state.landed_digests.add(f"digest-{i}")
    save_state(warehouse, "s", state)
    assert [f.name for f in files_not_landed(source, warehouse, client)] == ["t/part-2.parquet"]

    client.put_object(Bucket=bucket, Key="cdc/t/part-0.parquet", Body=b"p0 changed")
    assert sorted(f.name for f in files_not_landed(source, warehouse, client)) == ["t/part-0.parquet", "t/part-2.parquet"]


def test_files_not_landed_for_a_local_folder(tmp_path):
    dump = tmp_path / "dump"
    (dump / "t").mkdir(parents=True)
    for i in range(2):
        (dump / "t" / f"part-{i}.parquet").write_bytes(b"p%d" % i)
    source = SourceConfig(name="s", protocol="canal-json", input_path=str(dump))  # layout auto
    warehouse = tmp_path / "warehouse"
    assert [f.name for f in list_input_files(source)] == ["t/part-0.parquet", "t/part-1.parquet"]
    state = LandingState()
    state.remember_file(dump / "t" / "part-0.parquet", "d0")
    state.landed_digests.add("d0")
    save_state(warehouse, "s", state)
    assert [f.name for f in files_not_landed(source, warehouse)] == ["t/part-1.parquet"]
    assert files_not_landed(SourceConfig(name="s", protocol="canal-json", input_path=str(tmp_path / "none")),
                            warehouse) == []


def test_a_failing_s3_call_never_shows_the_credentials(s3_endpoint, tmp_path):
    """Errors (a missing bucket, a dead endpoint) name the bucket, never the keys."""
    secret = "never-print-this-secret-9f3a"
    source = SourceConfig(name="s", protocol="canal-json", input_path="s3://no-such-bucket/dump")
    for endpoint in (s3_endpoint, "http://127.0.0.1:9"):  # moto, then a closed port
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                              aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key=secret,
                              config=botocore.config.Config(retries={"max_attempts": 1}, connect_timeout=2))
        with pytest.raises(Exception) as failure:
            list_input_files(source, s3_client=client)
        text = "".join(traceback.format_exception(failure.value))
        assert secret not in text and "AKIDEXAMPLE" not in text
