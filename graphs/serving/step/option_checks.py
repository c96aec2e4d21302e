"""One-line refusals of a request's settings, in the command line's words (issue 43 item 3).

Every typed request (:class:`~graphs.serving.sim.simulation_request.SimulationRequest`, the
planning wing's search and size requests, :class:`~graphs.serving.analysis.phase_request.PhaseRequest`)
checks its numbers, lists and devices here, naming each setting by its field and as the command
line spells it (:func:`label`: ``think_time (--think-time)``) with the words its parser uses, so
a Python caller and the command are refused alike, each reading the name it gave. Standard library and the core's error only: the
lightest module of the lowest wing, importable from every request.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from costmodel.errors import CostModelError

__all__ = [
    "flag",
    "label",
    "check_number",
    "check_whole_list",
    "check_devices",
    "check_device_repeats",
    "check_dtype_repeats",
    "check_choice",
    "real_arg",
    "whole_arg",
]


def flag(name: str) -> str:
    """The command-line spelling of setting ``name``: ``--`` and dashes (``think_time`` -> ``--think-time``).

    Parameters
    ----------
    name : str
        The setting's name (a request field).

    Returns
    -------
    str
        The option as the command line spells it.
    """
    return "--" + name.replace("_", "-")


def label(name: str) -> str:
    """Setting ``name`` as an error names it, read right from Python and from the shell alike:
    the request field and its option (``think_time (--think-time)``).

    Parameters
    ----------
    name : str
        The setting's name (a request field).

    Returns
    -------
    str
        ``NAME (--OPTION)``.
    """
    return f"{name} ({flag(name)})"


def check_number(
    name: str, value: Any, lo: float, hi: float, *, whole: bool = False, inclusive: bool = True
) -> None:
    """Refuse ``value`` of setting ``name`` unless it is a number in ``[lo, hi]`` (``(lo, hi]``
    when not ``inclusive``; a whole number when ``whole``), in one line naming :func:`flag`'s
    option: the words the command line's parser uses.

    Parameters
    ----------
    name : str
        The setting's name (a request field).
    value : Any
        Its value.
    lo, hi : float
        The range allowed, in the setting's units.
    whole : bool
        Only whole numbers allowed.
    inclusive : bool
        ``lo`` itself allowed.

    Raises
    ------
    CostModelError
        When ``value`` is not such a number: one line naming the option, the range and the value.
    """
    f = label(name)
    if whole:  # an int, or a numpy integer (np.int64(40) was refused as "not a whole number")
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise CostModelError(f"{f} must be a whole number, got {value!r}")
        if not lo <= int(value) <= hi:
            raise CostModelError(f"{f} must be in [{lo}, {hi}], got {value}")
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise CostModelError(f"{f} must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise CostModelError(f"{f} must be a finite number, got {value!r}")
    if v > hi or v < lo or (v == lo and not inclusive):
        raise CostModelError(f"{f} must be in {'[' if inclusive else '('}{lo:g}, {hi:g}], got {v:g}")


def check_whole_list(name: str, values: Any, hi: int, most: int) -> None:
    """Refuse ``values`` of setting ``name`` unless a tuple of 1 to ``most`` whole numbers in ``[1, hi]``.

    Parameters
    ----------
    name : str
        The setting's name (a request field).
    values : Any
        Its value (a tuple of whole numbers).
    hi : int
        The largest number allowed.
    most : int
        The most numbers allowed.

    Raises
    ------
    CostModelError
        When ``values`` is not such a tuple.
    """
    ok = isinstance(values, tuple) and 0 < len(values) <= most
    if not ok or not all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= hi for v in values):
        raise CostModelError(f"{label(name)} must list 1 to {most} whole numbers in [1, {hi}], got {values!r}")


def check_devices(devices: Any, option: str = "--device") -> None:
    """Refuse a ``devices`` setting that names no device (each a non-empty name).

    Parameters
    ----------
    devices : Any
        The setting's value (a tuple of catalog device names or aliases).
    option : str
        The option as the command line spells it, named in the error (``--device``: the
        documented spelling of ``--devices``, :data:`graphs.cli.options.SPELLINGS`).

    Raises
    ------
    CostModelError
        When it is not a non-empty tuple of non-empty names.
    """
    if (
        not isinstance(devices, tuple)
        or not devices
        or not all(isinstance(d, str) and d.strip() for d in devices)
    ):
        given = ",".join(map(str, devices)) if isinstance(devices, tuple) else devices
        raise CostModelError(f"{option} must name at least one device, got {given!r}")


def check_device_repeats(devices: Any, option: str = "--device") -> None:
    """Refuse a device named twice, by the same name or by two that resolve to one catalog entry
    (``h100`` and ``h100-sxm``): every command refuses a list that gives a value twice, naming it
    (``graphs.cli.options._refuse_repeats``), where ``search`` and ``size`` once searched a
    repeated device once and ``sweep`` refused it.

    Parameters
    ----------
    devices : sequence of str or Hardware
        Catalog device names, aliases or specs (an unknown name is refused by
        :func:`costmodel.hardware.get_device`, naming it).
    option : str
        The option as the command line spells it, named in the error.

    Raises
    ------
    CostModelError
        When two entries are one device: ``--device gives h100-sxm twice (as h100 and h100-sxm):
        list each device once``; or two different specs share a name (a what-if copy beside its
        original), which results keyed by device name could not tell apart.
    """
    from costmodel.hardware import distinct_devices  # light callers never pay for the catalog

    distinct_devices(devices, option)


def check_dtype_repeats(dtypes: Any, name: str) -> None:
    """Refuse a dtype named twice, by the same name or by two that are one format (``fp8`` and
    ``fp8_e4m3``), or the model's own (None) twice, as the command line refuses
    ``--weight-dtypes fp8,fp8`` and :func:`check_device_repeats` a device twice (the library's
    ``search`` once searched it once and said so, ``sweep`` twice, both on the frontier). A name
    no dtype has is left to the caller's own check, which names the formats allowed.

    Parameters
    ----------
    dtypes : sequence of str, DType or None
        The dtypes as given (None: the model's own).
    name : str
        The setting as the caller spells it (``weight_dtypes``, ``--kv-dtypes``), named in the error.

    Raises
    ------
    CostModelError
        When two entries are one format: ``weight_dtypes gives fp8_e4m3 twice (as fp8 and fp8):
        list each dtype once``.
    """
    from costmodel.dtypes import get_dtype  # core; light callers never pay for it

    seen: dict[str | None, str] = {}
    for d in dtypes:
        if d is None:
            key, given = None, "None"
        else:
            try:
                key = get_dtype(d).name
            except CostModelError:
                continue  # an unknown name: refused by the caller's check, which lists the formats
            given = d.strip() if isinstance(d, str) else key
        if key in seen:
            shown = "None (the model's own)" if key is None else key
            first = seen[key]
            spelled = "" if key is None or first == given == key else f" (as {first[:40]} and {given[:40]})"
            raise CostModelError(f"{name} gives {shown} twice{spelled}: list each dtype once")
        seen[key] = given


def check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    """Refuse ``value`` of setting ``name`` unless it is one of ``allowed``.

    Parameters
    ----------
    name : str
        The setting's name (a request field).
    value : Any
        Its value.
    allowed : tuple of str
        The values accepted.

    Raises
    ------
    CostModelError
        When ``value`` is not one of them, the choices listed.
    """
    if value not in allowed:
        raise CostModelError(f"{label(name)} must be one of {', '.join(allowed)}, got {value!r}")


def real_arg(
    name: str, value: Any, lo: float, hi: float = math.inf, *, inclusive: bool = True, unit: str = ""
) -> float:
    """A library function's real-valued argument ``name`` as a float, or one line naming it, its
    value and the range allowed (a string, None, a bool, NaN or an infinity was a bare TypeError
    or a NaN answer). Any real number is taken: an int, a float, a numpy scalar.

    Parameters
    ----------
    name : str
        The parameter's name, as the Python caller spelled it.
    value : Any
        Its value.
    lo, hi : float
        The range allowed (``hi`` infinite: no upper bound, the value still finite).
    inclusive : bool
        ``lo`` itself allowed; False: the value must exceed it.
    unit : str
        The value's unit, for the message (``B/s``, ``s``).

    Returns
    -------
    float
        ``value`` as a float.

    Raises
    ------
    CostModelError
        When ``value`` is not a finite real number in range.

    >>> real_arg("hop_latency", 2e-6, 0)
    2e-06
    >>> real_arg("link_bandwidth", "50e9", 0, inclusive=False, unit="B/s")
    Traceback (most recent call last):
    ...
    costmodel.errors.CostModelError: link_bandwidth must be a finite number > 0 (B/s), got str '50e9'
    """
    lower = f"{'>=' if inclusive else '>'} {lo:g}"
    where = lower if hi == math.inf else f"in {'[' if inclusive else '('}{lo:g}, {hi:g}]"
    allowed = f"a finite number {where}" + (f" ({unit})" if unit else "")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise CostModelError(f"{name} must be {allowed}, got {type(value).__name__} {value!r:.40}")
    f = float(value)
    if not math.isfinite(f) or f > hi or f < lo or (f == lo and not inclusive):
        raise CostModelError(f"{name} must be {allowed}, got {f:g}")
    return f


def whole_arg(name: str, value: Any, lo: int, hi: int) -> int:
    """A library function's whole-number argument ``name`` as an int (a numpy integer or a float
    with no fraction taken), or one line naming it, its value and the range allowed.

    Parameters
    ----------
    name : str
        The parameter's name, as the Python caller spelled it.
    value : Any
        Its value.
    lo, hi : int
        The range allowed, inclusive.

    Returns
    -------
    int
        ``value`` as an int.

    Raises
    ------
    CostModelError
        When ``value`` is not a whole number in ``[lo, hi]``.

    >>> whole_arg("k_max", 4.0, 1, 256)
    4
    """
    allowed = f"a whole number in [{lo}, {hi}]"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise CostModelError(f"{name} must be {allowed}, got {type(value).__name__} {value!r:.40}")
    if isinstance(value, numbers.Integral):
        n = int(value)
    elif math.isfinite(float(value)) and float(value).is_integer():
        n = int(float(value))
    else:
        raise CostModelError(f"{name} must be {allowed}, got {value!r}")
    if not lo <= n <= hi:
        raise CostModelError(f"{name} must be {allowed}, got {n}")
    return n
