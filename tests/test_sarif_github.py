"""SARIF that GitHub code scanning accepts: rule help, names, levels, fingerprints, repository-relative URIs, provenance."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest

from conftest import git

SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
HEADER = "include/flashinfer/comm/trtllm_allreduce.cuh"


def sarif_of(cli, root: Path) -> dict:
    result = cli("scan", "--repo", root, "--arch", "sm_120", "--format", "sarif")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    jsonschema.validate(data, json.loads(SCHEMA.read_text()))
    return data


def test_every_rule_and_result_has_what_github_requires(cli, example_repo):
    repo = example_repo("flashinfer")
    git(repo, "remote", "add", "origin", "https://user:secret@example.invalid/flashinfer.git")
    [run] = sarif_of(cli, repo)["runs"]
    driver = run["tool"]["driver"]
    assert driver["informationUri"].startswith("https://") and driver["version"]
    for rule in driver["rules"]:
        assert rule["name"] and rule["shortDescription"]["text"] and rule["fullDescription"]["text"]
        assert rule["help"]["text"] and rule["help"]["markdown"] and rule["defaultConfiguration"]["level"]
    assert run["results"]
    for result in run["results"]:
        assert result["partialFingerprints"]["codemodGate/v1"]
        assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uriBaseId"] == "SRCROOT"
    [vcs] = run["versionControlProvenance"]
    assert vcs["revisionId"] == git(repo, "rev-parse", "HEAD").strip() and vcs["branch"] == "main"
    assert vcs["repositoryUri"] == "https://example.invalid/flashinfer.git", "credentials never printed"


def test_uris_are_relative_to_the_repository_root_from_a_subfolder(cli, example_repo):
    repo = example_repo("flashinfer")
    [run] = sarif_of(cli, repo / "include")["runs"]
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]}
    assert HEADER in uris
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"] == repo.resolve().as_uri() + "/"


def test_fingerprints_survive_a_line_shift(cli, example_repo):
    repo = example_repo("flashinfer")
    before = {r["partialFingerprints"]["codemodGate/v1"] for r in sarif_of(cli, repo)["runs"][0]["results"]}
    header = repo / HEADER
    header.write_text("// a new licence header line\n// and another\n" + header.read_text())
    after_run = sarif_of(cli, repo)["runs"][0]["results"]
    after = {r["partialFingerprints"]["codemodGate/v1"] for r in after_run}
    assert before == after
    assert len(after) == len(after_run), "identical gates get distinct fingerprints"


def test_github_rules_of_the_sarif_multitool_pass(cli, example_repo, tmp_path):
    """Microsoft's SARIF multitool with its GitHub rules (`--rule-kind Gh`), when it is installed (npm @microsoft/sarif-multitool)."""
    tool = shutil.which("sarif-multitool")
    if tool is None:
        pytest.skip("sarif-multitool is not on PATH")
    repo = example_repo("flashinfer")
    log = tmp_path / "scan.sarif"
    log.write_text(json.dumps(sarif_of(cli, repo)))
    proc = subprocess.run([tool, "validate", "--rule-kind", "Gh", "-o", str(tmp_path / "out.sarif"), str(log)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and ": error " not in proc.stdout, proc.stdout


@pytest.mark.parametrize(
    "remote, shown",
    [
        pytest.param("https://user:p@ss@github.com/x/flashinfer.git", "https://github.com/x/flashinfer.git", id="at-in-password"),
        pytest.param("https://gitlab.example.invalid/x.git?private_token=SECRET", "https://gitlab.example.invalid/x.git", id="query-token"),
        pytest.param("https://oauth2:SECRET@gitlab.example.invalid/x.git#SECRET", "https://gitlab.example.invalid/x.git", id="fragment"),
        pytest.param("https://u:a/b?c#SECRET@github.com/x.git", "https://github.com/x.git", id="slash-query-hash-in-password"),
        pytest.param("user:SECRET@host.example.invalid:org/x.git", "host.example.invalid:org/x.git", id="scp-style"),
        pytest.param("ssh://git:SECRET@host.example.invalid:2222/x.git", "ssh://host.example.invalid:2222/x.git", id="ssh"),
        pytest.param("https://github.com/flashinfer-ai/flashinfer.git", "https://github.com/flashinfer-ai/flashinfer.git", id="plain-unchanged"),
    ],
)
def test_provenance_never_shows_credentials_queries_or_fragments(cli, example_repo, remote, shown):
    repo = example_repo("flashinfer")
    git(repo, "remote", "add", "origin", remote)
    result = cli("scan", "--repo", repo, "--arch", "sm_120", "--format", "sarif")
    assert result.exit_code == 0, result.output
    [vcs] = json.loads(result.stdout)["runs"][0]["versionControlProvenance"]
    assert vcs["repositoryUri"] == shown
    assert "SECRET" not in result.stdout and "p@ss" not in result.stdout
