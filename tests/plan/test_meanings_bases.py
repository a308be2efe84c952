"""`cls.is_blackwell()` in a class whose base another project file defines: run reads that file's class.

A tree in SGLang's wheel layout (the `sglang/srt` marker), its diffusion platform split as upstream splits
it: `Platform` in interface.py, `CudaPlatformBase(Platform)` in cuda.py, imported absolutely or relatively.
"""

from pathlib import Path
from textwrap import dedent

import pytest

from codemods.plan.widen import meanings_for
from codemods.recipes.load import detect

INTERFACE = dedent(
    """\
    import torch


    class Platform:
        @classmethod
        def is_blackwell(cls):
            return torch.cuda.get_device_capability()[0] == 10

        @classmethod
        def is_sm120(cls):
            return torch.cuda.get_device_capability()[0] == 12
    """
)

CUDA = dedent(
    """\
    {imported}


    class CudaPlatformBase(Platform):
        @classmethod
        def prepare(cls) -> bool:
            if not cls.is_blackwell():
                return True
            return False
    """
)


def _tree(tmp_path: Path, imported: str):
    platforms = tmp_path / "sglang" / "multimodal_gen" / "runtime" / "platforms"
    platforms.mkdir(parents=True)
    (tmp_path / "sglang" / "srt").mkdir()
    (platforms / "interface.py").write_text(INTERFACE)
    (platforms / "cuda.py").write_text(CUDA.format(imported=imported))
    return detect(tmp_path, ["sglang"])


@pytest.mark.parametrize(
    "imported",
    [
        "from sglang.multimodal_gen.runtime.platforms.interface import Platform",
        "from .interface import Platform",
        "from ..platforms.interface import Platform",
    ],
)
def test_the_base_class_file_is_read(tmp_path: Path, imported: str) -> None:
    tree = _tree(tmp_path, imported)
    rel = "sglang/multimodal_gen/runtime/platforms/cuda.py"
    meanings = meanings_for(tree.project, rel, (tmp_path / rel).read_bytes(), tree, lambda r: (tmp_path / r).read_bytes())
    assert meanings["CudaPlatformBase.is_blackwell"].caps == frozenset((10, n) for n in range(10))
    assert meanings["CudaPlatformBase.is_sm120"].caps == frozenset((12, n) for n in range(10))


def test_a_module_outside_the_project_is_not_read(tmp_path: Path) -> None:
    tree = _tree(tmp_path, "from vllm.platforms.interface import Platform")
    rel = "sglang/multimodal_gen/runtime/platforms/cuda.py"
    meanings = meanings_for(tree.project, rel, (tmp_path / rel).read_bytes(), tree, lambda r: (tmp_path / r).read_bytes())
    assert "CudaPlatformBase.is_blackwell" not in meanings
