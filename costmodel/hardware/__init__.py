"""Hardware specs and the shipped catalog."""

from .catalog import (
    Catalog,
    active_catalog,
    catalog,
    device_names,
    distinct_devices,
    get_device,
    hardware_from_dict,
    load_hardware_file,
    register_device,
    shipped_devices,
    use_catalog,
)
from .spec import WILDCARD, Hardware, Link, MemoryLevel, Roof, memory_kind

__all__ = [
    "Catalog",
    "active_catalog",
    "use_catalog",
    "Hardware",
    "Roof",
    "MemoryLevel",
    "Link",
    "WILDCARD",
    "get_device",
    "device_names",
    "distinct_devices",
    "register_device",
    "load_hardware_file",
    "hardware_from_dict",
    "catalog",
    "shipped_devices",
    "memory_kind",
]
