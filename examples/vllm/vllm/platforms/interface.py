"""The platform interface, in the shape of vLLM's vllm/platforms/interface.py (own text)."""

from typing import NamedTuple


class DeviceCapability(NamedTuple):
    major: int
    minor: int

    def to_int(self) -> int:
        """The capability as `<major><minor>`."""
        assert 0 <= self.minor < 10
        return self.major * 10 + self.minor


class Platform:
    device_name: str

    @classmethod
    def get_device_capability(cls, device_id: int = 0) -> DeviceCapability | None:
        return None

    @classmethod
    def has_device_capability(cls, capability: tuple[int, int] | int, device_id: int = 0) -> bool:
        """Whether the device is at least this capability."""
        current_capability = cls.get_device_capability(device_id=device_id)
        if current_capability is None:
            return False
        if isinstance(capability, tuple):
            return current_capability >= capability
        return current_capability.to_int() >= capability

    @classmethod
    def is_device_capability(cls, capability: tuple[int, int] | int, device_id: int = 0) -> bool:
        """Whether the device has exactly this capability."""
        current_capability = cls.get_device_capability(device_id=device_id)
        if current_capability is None:
            return False
        if isinstance(capability, tuple):
            return current_capability == capability
        return current_capability.to_int() == capability

    @classmethod
    def is_device_capability_family(cls, capability: int, device_id: int = 0) -> bool:
        """Whether the device is any <major>.x of this capability's major."""
        current_capability = cls.get_device_capability(device_id=device_id)
        if current_capability is None:
            return False
        return (current_capability.to_int() // 10) == (capability // 10)

    @classmethod
    def is_cuda(cls) -> bool:
        return True
