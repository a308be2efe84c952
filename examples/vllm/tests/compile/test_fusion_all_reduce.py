"""A vLLM-shaped test module (own text): the skip forms its tests use."""

import pytest

from vllm.platforms import current_platform


@pytest.mark.skipif(
    not current_platform.is_device_capability(100),
    reason="Only test on SM100",
)
def test_all_reduce_fusion_nvfp4_quant():
    assert True


@pytest.mark.skipif(not current_platform.has_device_capability(90), reason="Only test on Hopper and later")
def test_all_reduce_fusion_pass():
    assert True
