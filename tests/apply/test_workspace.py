"""Workspace: a --repo resolved once (real git repos in tmp_path; GitPython is counted, never replaced)."""

from __future__ import annotations

import shutil

import git
import pytest

from conftest import EXAMPLES, git as run_git, init_repo, tree_digest
from codemods.apply import run as apply_run
from codemods.apply.locate import work_tree_of
from codemods.apply.repo import Repo
from codemods.apply.shadow import ShadowRepo
from codemods.apply.workspace import Workspace
from codemods.core import errors
from codemods.recipes import load as recipes


@pytest.fixture
def opened(monkeypatch):
    """How many git.Repo objects codemod builds (the real constructor runs)."""
    count = {"n": 0}
    real = git.Repo.__init__

    def counting(self, *args, **kwargs):
        count["n"] += 1
        real(self, *args, **kwargs)

    monkeypatch.setattr(git.Repo, "__init__", counting)
    return count


def test_a_run_opens_its_repository_once(example_repo, opened):
    repo = example_repo("flashinfer")
    result = apply_run.run(recipes.find_recipe("sm120-enable"), Workspace(repo))
    assert result.status == "applied"
    assert run_git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "codemod/sm120-enable"
    assert opened["n"] == 1


def test_the_repository_and_state_dir_are_found_once_and_kept(example_repo, opened):
    workspace = Workspace(example_repo("flashinfer"))
    first = workspace.repo
    assert type(first) is Repo and workspace.repo is first
    assert workspace.state_dir == first.state_dir and workspace.state_dir.parent.name == ".git"
    assert opened["n"] == 1


def test_a_folder_outside_git_gets_a_shadow_repository_only_when_a_run_creates_it(tmp_path):
    folder = tmp_path / "site-packages" / "flashinfer"
    shutil.copytree(EXAMPLES / "flashinfer", folder)
    pristine = tree_digest(folder)
    workspace = Workspace(folder)
    assert workspace.repo is None and work_tree_of(folder) is None
    assert workspace.state_dir == ShadowRepo.location(folder) / "state"
    with pytest.raises(errors.RepoState, match="no record"):
        workspace.open()
    shadow = workspace.open(create=True)
    assert isinstance(shadow, ShadowRepo) and shadow.root == folder.resolve()
    assert shadow.state_dir == workspace.state_dir and shadow.ready_step == "shadow-ready"
    assert tree_digest(folder) == pristine  # nothing written into the folder
    assert type(Workspace(folder).repo) is ShadowRepo  # recorded now: found again without creating


def test_an_ignored_folder_inside_a_project_gets_a_shadow_repository(tmp_path):
    project = tmp_path / "project"
    (project / ".venv").mkdir(parents=True)
    (project / ".gitignore").write_text(".venv/\n")
    init_repo(project)
    assert work_tree_of(project / ".venv") is None
    assert work_tree_of(project) is not None


def test_a_bare_repository_and_one_without_commits_are_refused(tmp_path):
    bare = tmp_path / "bare.git"
    run_git(tmp_path, "init", "-q", "--bare", str(bare))
    with pytest.raises(errors.RepoState, match="bare repository"):
        _ = Workspace(bare).repo
    empty = tmp_path / "empty"
    empty.mkdir()
    run_git(empty, "init", "-q")
    with pytest.raises(errors.RepoState, match="no commits yet"):
        _ = Workspace(empty).repo
    assert Workspace(empty).state_dir is None


def test_a_git_work_tree_has_no_record_to_forget(example_repo):
    repo = Workspace(example_repo("flashinfer")).open()
    with pytest.raises(errors.RevertRefused, match="--forget only applies"):
        repo.forget(dry_run=True)
    assert repo.drift() == []
