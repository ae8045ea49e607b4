"""Which S3 the resources connect to, from the settings alone."""

from __future__ import annotations

from dagster import EnvVar

from cdc_assets.common.settings import load_settings
from cdc_assets.defs.resources import make_s3_resource


def test_s3_credentials_are_environment_variable_references(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "very-secret")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    s3 = make_s3_resource(load_settings({"CDC_ASSETS_S3_ENDPOINT_URL": "http://127.0.0.1:9000"}))
    assert s3.endpoint_url == "http://127.0.0.1:9000"
    assert s3.aws_access_key_id == EnvVar("AWS_ACCESS_KEY_ID")
    assert s3.aws_secret_access_key == EnvVar("AWS_SECRET_ACCESS_KEY")
    assert s3.aws_session_token is None  # unset: boto3's own chain decides
    assert "very-secret" not in repr(s3)

    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    bare = make_s3_resource(load_settings({}))  # instance profile / IRSA: nothing to reference
    assert (bare.aws_access_key_id, bare.aws_secret_access_key, bare.endpoint_url) == (None, None, None)
