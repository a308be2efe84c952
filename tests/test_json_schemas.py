"""Every --format json output validates against the schema `codemod schema COMMAND` prints, one shape for one target or many."""

from __future__ import annotations

import json

import jsonschema
import pytest

from conftest import EXAMPLES


def schema(cli, command: str) -> dict:
    result = cli("schema", command)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(document)
    return document


def valid(cli, command: str, stdout: str) -> dict:
    data = json.loads(stdout)
    jsonschema.validate(data, schema(cli, command))
    assert next(iter(data)) == "schema_version" and data["schema_version"] == 1
    return data


def test_run_and_status_have_one_shape_for_one_target_and_for_many(cli, example_repo):
    fi, sg = example_repo("flashinfer"), example_repo("sglang")
    one = valid(cli, "run", cli("run", "sm120-enable", "--repo", fi, "--dry-run", "--format", "json").stdout)
    two = valid(cli, "run", cli("run", "sm120-enable", "--repo", fi, "--repo", sg, "--dry-run", "--format", "json").stdout)
    assert len(one["results"]) == 1 and len(two["results"]) == 2
    applied = valid(cli, "run", cli("run", "sm120-enable", "--repo", fi, "--format", "json").stdout)
    assert applied["results"][0]["status"] == "applied" and len(applied["results"][0]["commits"]) == 2
    status = valid(cli, "status", cli("status", "--repo", fi, "--repo", sg, "--format", "json").stdout)
    assert [r["state"] for r in status["results"]] == ["applied", "not applied"]


def test_scan_verify_doctor_validate(cli, example_repo):
    repo = example_repo("flashinfer")
    valid(cli, "scan", cli("scan", "--repo", repo, "--format", "json").stdout)
    assert cli("run", "sm120-enable", "--repo", repo).exit_code == 0
    verify = valid(cli, "verify", cli("verify", "--repo", repo, "--format", "json").stdout)
    assert verify["status"] == "verified"
    doctor = valid(cli, "doctor", cli("doctor", EXAMPLES / "logs" / "sglang-tp8-healthy.log", "--format", "json").stdout)
    assert doctor["verdict"]


@pytest.mark.parametrize(
    "args, code",
    [
        pytest.param(["run", "sm120-enable", "--repo", "/no/such/tree", "--format", "json"], 6, id="run-missing-tree"),
        pytest.param(["status", "--repo", "/no/such/tree", "--format", "json"], 6, id="status-missing-tree"),
        pytest.param(["run", "no-such-recipe", "--repo", ".", "--format", "json"], 8, id="unknown-recipe"),
    ],
)
def test_an_error_is_a_json_document_too(cli, args, code):
    result = cli(*args)
    assert result.exit_code == code
    data = valid(cli, "error", result.stdout)
    assert data["error"]["exit_code"] == code and data["error"]["message"] in result.stderr


def test_unknown_schema_is_bad_usage(cli):
    result = cli("schema", "nothing")
    assert result.exit_code == 2 and "choose one of" in result.stderr


def test_scan_classification_is_in_the_schema(cli, example_repo):
    repo = example_repo("flashinfer")
    data = valid(cli, "scan", cli("scan", "--repo", repo, "--arch", "sm_121", "--format", "json").stdout)
    assert data["gates"] and all(gate["classification"] in {"blocker", "widenable", "needs-human", "unknown", "covered", "admits"} for gate in data["gates"])
    assert all((gate["classification"] == "admits") == (not gate["excludes_arch"]) or gate["classification"] == "unknown" for gate in data["gates"])
    data["gates"][0]["classification"] = "fine"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema(cli, "scan"))
    del data["gates"][0]["classification"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema(cli, "scan"))
