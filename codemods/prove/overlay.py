"""The base as a folder: the work tree through symlinks, with the changed files' base versions written in.

Both proofs read the base this way (nvcc -E in codemods.prove.nvcc, the
build in codemods.prove.build), so unchanged siblings and relative
`#include "../x.h"` resolve as they do in the work tree.
"""

from __future__ import annotations

from pathlib import Path


def shadow_tree(source: Path, dest: Path, files: dict[str, bytes]) -> None:
    """Make `dest` read like `source` with `files` (repo-relative path -> bytes) in place of its own.

    Every entry of `source` is a symlink in `dest`, except the folders on the
    way to a file of `files`, which are real folders of symlinks, and those
    files, which are written. `source` is not touched.
    """
    source = Path(source).absolute()
    dest = Path(dest)
    folders: set[str] = {""}
    for rel in files:
        parts = rel.split("/")[:-1]
        folders.update("/".join(parts[: n + 1]) for n in range(len(parts)))
    for folder in sorted(folders):
        (dest / folder).mkdir(parents=True, exist_ok=True)
        real = source / folder
        for entry in sorted(real.iterdir()) if real.is_dir() else []:
            rel = f"{folder}/{entry.name}" if folder else entry.name
            if rel not in folders and rel not in files:
                (dest / rel).symlink_to(entry)
    for rel, data in files.items():
        (dest / rel).write_bytes(data)
