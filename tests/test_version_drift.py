"""sm120-enable across releases: one real wheel per shape the four gates have taken.

Survey (every FlashInfer release 0.5.3..0.7.4 and every SGLang release
0.5.6..0.5.23, each as an unpacked wheel) found these shapes; each case below
is one release standing for a range and asserts the *correct* outcome there.
Every shape below is handled: the recipe lists each place the SGLang gates
have lived as `[[change.at]]` candidates, plus the `_resolve_backend` gate
(0.5.14+, `optional = "absent"` before that).

FlashInfer (all handled today):
  0.5.3..0.6.9      gen_trtllm_comm_module [9, 10]; 13 `&& (__CUDA_ARCH__ < 1200)` guards
  0.6.10..0.6.12    + sibling gen_mixed_comm_module [9, 10] in the same file (must stay)
  0.6.13..0.6.16.*  + sibling gen_trtllm_mnnvl_comm_module [9, 10] (must stay)
  0.6.17..0.7.4     [9, 10, 12], guards `>= 900` only: already enabled (upstream PR #3903)

SGLang:
  0.5.6..0.5.6.post2  fusion gate in communicator.py _gather_hidden_states_and_residual
                      `(_is_sm100_supported or _is_sm90_supported)`; auto-enable per model:
                      DeepseekV3 `if is_cuda() and is_sm100_supported():` (guards SM100-only
                      settings too), GptOss `if is_blackwell_supported():` (admits 10 and 12)
  0.5.7               same fusion gate; auto-enable `(is_sm90_supported() or is_blackwell_supported())`
  0.5.8..0.5.13.post1 communicator.py apply_flashinfer_allreduce_fusion; server_args.py
                      `self.enable_flashinfer_allreduce_fusion = True` under
                      `(is_sm90_supported() or is_sm100_supported())`  (handled today)
  0.5.14              auto-enable assigns `self.flashinfer_allreduce_fusion_backend = "auto"`;
                      new gate flashinfer_comm_fusion.py _resolve_backend
                      `if not (is_sm90_supported() or is_sm100_supported()): raise ValueError`
  0.5.15..0.5.18      auto-enable moved to arg_groups/overrides.py
                      _flashinfer_allreduce_fusion_auto_enable (returns a dict)
  0.5.19..0.5.20      same places, `get_platform().is_sm90 or get_platform().is_sm100`
  0.5.21              fusion gate moved to layers/layer_boundary/residual/add_norm.py
  0.5.22..0.5.23      ... and renamed flashinfer_ar_fusion_applies
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import git, init_repo, tree_digest, unpack_wheel

pytestmark = pytest.mark.real

DIST = {"flashinfer": "flashinfer-python", "sglang": "sglang"}

# Files, relative to the repo made from the wheel (the "wheel" layout).
FI_COMM = "flashinfer/jit/comm.py"
FI_HEADER = "flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh"
SG_COMMUNICATOR = "sglang/srt/layers/communicator.py"
SG_ADD_NORM = "sglang/srt/layers/layer_boundary/residual/add_norm.py"
SG_SERVER_ARGS = "sglang/srt/server_args.py"
SG_OVERRIDES = "sglang/srt/arg_groups/overrides.py"
SG_RESOLVE = "sglang/srt/layers/flashinfer_comm_fusion.py"

FUSION = "sglang.allreduce-fusion-gate"
AUTO = "sglang.allreduce-fusion-auto-enable"

FI_ADDED = {
    FI_COMM: ["        supported_major_versions=[9, 10, 12]"],
    FI_HEADER: ["#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))"] * 13,
}
FI_REMOVED = {
    FI_COMM: ["        supported_major_versions=[9, 10]"],
    FI_HEADER: ["#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))"] * 13,
}

CALL_DEFINED = "_is_sm120_supported = _is_cuda and is_sm120_supported()"
ATTR_DEFINED = "_is_sm120_supported = _is_cuda and get_platform().is_sm120"
NAME_CHAIN = "(_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)"
CALL_CHAIN = "(is_sm90_supported() or is_sm100_supported() or is_sm120_supported())"
ATTR_CHAIN = "(get_platform().is_sm90 or get_platform().is_sm100 or get_platform().is_sm120)"
# `    if not ` + ATTR_CHAIN + `:` is 89 columns, past the file's 88: split as black splits it
RESOLVE_SPLIT = [
    "    if not (", "        get_platform().is_sm90 or get_platform().is_sm100 or get_platform().is_sm120", "    ):",
]

NEEDS_RESOLVE = (
    "a third SGLang change: {python}/srt/layers/flashinfer_comm_fusion.py, function _resolve_backend, "
    "`if not (<sm90> or <sm100>): raise ValueError(...)`, must admit SM12x too (SGLang resolves the "
    "backend when it builds the workspace, so enabling the fusion on SM12x without it raises); the change "
    "must be allowed to be absent where the function does not exist (SGLang < 0.5.14)"
)


@dataclass(frozen=True)
class Case:
    project: str
    version: str
    exit_code: int
    # correct edit: the exact set of files the run changes (one commit per change) and,
    # per file, lines the diff must add (in any order, each at least once)
    changed: tuple[str, ...] = ()
    added: dict = field(default_factory=dict)
    removed: dict = field(default_factory=dict)
    # nothing to do: exit 0, "already enabled", no branch
    already: bool = False
    # refusal: change id -> file the message must name; ids it must not name
    refused: dict = field(default_factory=dict)
    not_refused: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    todo: str = ""  # the missing recipe/engine work; marks the case xfail(strict=True)

    @property
    def id(self) -> str:
        return f"{self.project}-{self.version}" + ("-" + "-".join(a.lstrip("-") for a in self.args) if self.args else "")


CASES = [
    # ---------------------------------------------------------------- FlashInfer
    Case("flashinfer", "0.5.3", 0, changed=(FI_COMM, FI_HEADER), added=FI_ADDED, removed=FI_REMOVED),
    Case("flashinfer", "0.6.12", 0, changed=(FI_COMM, FI_HEADER), added=FI_ADDED, removed=FI_REMOVED),
    Case("flashinfer", "0.6.16.post4", 0, changed=(FI_COMM, FI_HEADER), added=FI_ADDED, removed=FI_REMOVED),
    Case("flashinfer", "0.6.17", 0, already=True),
    # ---------------------------------------------------------------- SGLang
    Case(
        "sglang", "0.5.6", 3, refused={AUTO: SG_SERVER_ARGS}, not_refused=(FUSION,),
    ),
    Case(
        "sglang", "0.5.6", 0, args=("--skip", AUTO), changed=(SG_COMMUNICATOR,),
        added={SG_COMMUNICATOR: [
            "    is_sm120_supported,", CALL_DEFINED,
            "                (_is_sm100_supported or _is_sm90_supported or _is_sm120_supported)",
        ]},
    ),
    Case(
        "sglang", "0.5.7", 0, changed=(SG_COMMUNICATOR,),
        added={SG_COMMUNICATOR: [
            "    is_sm120_supported,", CALL_DEFINED,
            "                (_is_sm100_supported or _is_sm90_supported or _is_sm120_supported)",
        ]},
    ),
    Case(
        "sglang", "0.5.13", 0, changed=(SG_COMMUNICATOR, SG_SERVER_ARGS),
        added={
            SG_COMMUNICATOR: ["    is_sm120_supported,", CALL_DEFINED, "        " + NAME_CHAIN],
            SG_SERVER_ARGS: ["            and " + CALL_CHAIN],
        },
    ),
    Case(
        "sglang", "0.5.14", 0, changed=(SG_COMMUNICATOR, SG_SERVER_ARGS, SG_RESOLVE),
        added={
            SG_COMMUNICATOR: [CALL_DEFINED, "        " + NAME_CHAIN],
            SG_SERVER_ARGS: ["            and " + CALL_CHAIN],
            SG_RESOLVE: ["    is_sm120_supported,", "    if not " + CALL_CHAIN + ":"],
        },
    ),
    Case(
        "sglang", "0.5.18", 0, changed=(SG_COMMUNICATOR, SG_OVERRIDES, SG_RESOLVE),
        added={
            SG_COMMUNICATOR: [CALL_DEFINED, "        " + NAME_CHAIN],
            SG_OVERRIDES: ["        and " + CALL_CHAIN],
            SG_RESOLVE: ["    is_sm120_supported,", "    if not " + CALL_CHAIN + ":"],
        },
    ),
    Case(
        "sglang", "0.5.20", 0, changed=(SG_COMMUNICATOR, SG_OVERRIDES, SG_RESOLVE),
        added={
            SG_COMMUNICATOR: [ATTR_DEFINED, "        " + NAME_CHAIN],
            SG_OVERRIDES: ["        and " + ATTR_CHAIN],
            SG_RESOLVE: RESOLVE_SPLIT,
        },
    ),
    Case(
        "sglang", "0.5.21", 0, changed=(SG_ADD_NORM, SG_OVERRIDES, SG_RESOLVE),
        added={
            SG_ADD_NORM: [ATTR_DEFINED, "        " + NAME_CHAIN],
            SG_OVERRIDES: ["        and " + ATTR_CHAIN],
            SG_RESOLVE: RESOLVE_SPLIT,
        },
    ),
    Case(
        "sglang", "0.5.23", 0, changed=(SG_ADD_NORM, SG_OVERRIDES, SG_RESOLVE),
        added={
            SG_ADD_NORM: [ATTR_DEFINED, "        " + NAME_CHAIN],
            SG_OVERRIDES: ["        and " + ATTR_CHAIN],
            SG_RESOLVE: RESOLVE_SPLIT,
        },
    ),
]


def _param(case: Case):
    marks = [pytest.mark.xfail(strict=True, reason=case.todo)] if case.todo else []
    return pytest.param(case, id=case.id, marks=marks)


def _ignore(_dir, names):
    # bytecode and compiled extensions say nothing about the gates and only slow the copy
    return [n for n in names if n == "__pycache__" or n.endswith((".so", ".pyc"))]


def make_repo(case: Case, dest: Path) -> Path:
    unpacked = unpack_wheel(DIST[case.project], case.version)
    dest.mkdir()
    shutil.copytree(unpacked / case.project, dest / case.project, ignore=_ignore)
    return init_repo(dest)


def refs(repo: Path) -> str:
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


def diff_files(patch: str) -> list[str]:
    return sorted(re.findall(r"^diff --git a/(\S+) b/", patch, re.M))


def changed_lines(repo: Path, rel: str) -> tuple[list[str], list[str]]:
    diff = git(repo, "diff", "-U0", "main", "HEAD", "--", rel)
    removed = [l[1:] for l in diff.splitlines() if l.startswith("-") and not l.startswith("---")]
    added = [l[1:] for l in diff.splitlines() if l.startswith("+") and not l.startswith("+++")]
    return removed, added


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_release(cli, tmp_path, case: Case):
    repo = make_repo(case, tmp_path / case.project)
    pristine, pristine_refs = tree_digest(repo), refs(repo)

    dry = cli("run", "sm120-enable", "--repo", repo, "--dry-run", *case.args)
    assert dry.exit_code == case.exit_code, dry.output
    assert tree_digest(repo) == pristine and refs(repo) == pristine_refs, "a dry run writes nothing"

    if case.refused:
        for change_id, rel in case.refused.items():
            assert change_id in dry.stderr and rel in dry.stderr, dry.stderr
        for change_id in case.not_refused:
            assert change_id not in dry.stderr.split("cannot be planned", 1)[-1], dry.stderr
        result = cli("run", "sm120-enable", "--repo", repo, *case.args)
        assert result.exit_code == case.exit_code, result.output
        assert tree_digest(repo) == pristine and refs(repo) == pristine_refs, "a refusal writes nothing"
        return

    if case.already:
        assert "already enabled" in dry.stderr, dry.stderr
        assert dry.stdout.strip() == ""
        result = cli("run", "sm120-enable", "--repo", repo, *case.args)
        assert result.exit_code == 0 and "already enabled" in result.stderr, result.output
        assert tree_digest(repo) == pristine and refs(repo) == pristine_refs, "no branch, no edit"
        return

    assert diff_files(dry.stdout) == sorted(case.changed), dry.stdout
    result = cli("run", "sm120-enable", "--repo", repo, *case.args)
    assert result.exit_code == 0, result.output
    assert git(repo, "diff", "--name-only", "main", "HEAD").split() == sorted(case.changed)
    assert len(git(repo, "log", "--format=%H", "main..HEAD").split()) == len(case.changed)
    for rel in case.changed:
        removed, added = changed_lines(repo, rel)
        for line in case.added.get(rel, []):
            assert line in added, f"{rel}: expected added line {line!r}; added: {added}"
        if rel in case.removed:
            assert sorted(removed) == sorted(case.removed[rel]) and sorted(added) == sorted(case.added[rel])
        if rel.endswith(".py"):
            compile((repo / rel).read_text(), rel, "exec")
    if case.project == "flashinfer":
        # only gen_trtllm_comm_module widens; sibling modules keep their own lists
        comm = (repo / FI_COMM).read_text()
        body = comm.split("def gen_trtllm_comm_module", 1)[1].split("\ndef ", 1)[0]
        assert "supported_major_versions=[9, 10, 12]" in body

    back = cli("revert", "sm120-enable", "--repo", repo)
    assert back.exit_code == 0, back.output
    assert tree_digest(repo) == pristine and refs(repo) == pristine_refs
