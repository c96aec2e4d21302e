"""Where an engine's kernel rule applies: devices of named architectures or named catalog devices.

An engine profile's kernel rules (:mod:`.moe_kernels`, :mod:`.attention_kernels`) each name the
devices they apply on by the catalog's :attr:`~costmodel.hardware.Hardware.architecture`, or by
catalog name where an architecture's name spans compute capabilities (the catalog's "Blackwell"
is SM 10.x and SM 12.x). These helpers check and read that scope once for every kind of rule.
"""

from __future__ import annotations

from costmodel.errors import CostModelError

__all__ = ["check_scope", "in_scope", "scope_words"]


def check_scope(what: str, architectures: object, devices: object) -> None:
    """Refuse a scope that is not two tuples of names, or names nothing.

    Parameters
    ----------
    what : str
        The rule, as the error names it (``MoE kernel rule marlin``).
    architectures, devices : tuple of str
        The catalog architectures and device names the rule applies on.

    Raises
    ------
    CostModelError
        Naming the field and what is allowed.

    >>> check_scope("rule x", ("Ampere",), ())
    >>> check_scope("rule x", (), ())
    Traceback (most recent call last):
    costmodel.errors.CostModelError: rule x: give architectures or devices it applies on
    """
    for name, v in (("architectures", architectures), ("devices", devices)):
        if not isinstance(v, tuple) or not all(isinstance(a, str) and a for a in v):
            raise CostModelError(f"{what}: {name} must be a tuple of names, got {v!r}")
    if not architectures and not devices:
        raise CostModelError(f"{what}: give architectures or devices it applies on")


def in_scope(
    architectures: tuple[str, ...], devices: tuple[str, ...], architecture: str, device: str = ""
) -> bool:
    """Whether ``device`` of ``architecture`` is in the scope (``""``: not given, never a match).

    Parameters
    ----------
    architectures, devices : tuple of str
        The scope.
    architecture : str
        The device's architecture.
    device : str
        The device's catalog name.

    Returns
    -------
    bool

    >>> in_scope(("Ampere",), ("rtx-5090",), "Blackwell", "rtx-5090"), in_scope(("Ampere",), (), "", "")
    (True, False)
    """
    return bool(architecture and architecture in architectures) or bool(device and device in devices)


def scope_words(architectures: tuple[str, ...], devices: tuple[str, ...]) -> str:
    """The scope in words (``Ampere/Ada Lovelace/rtx-5090``).

    Parameters
    ----------
    architectures, devices : tuple of str
        The scope.

    Returns
    -------
    str
    """
    return "/".join((*architectures, *devices))
