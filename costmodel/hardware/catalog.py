"""The hardware catalog: shipped as data (``catalog.toml``), extensible.

Users add devices from a TOML or JSON file with the same layout
(:func:`load_hardware_file`) or register a :class:`Hardware` built in Python
(:func:`register_device`). Field values may be numbers or expression strings
(``"108*16*1410e6"``, or a symbol such as ``"P"``), parsed safely. A file is held to the
catalog's own rules (:func:`hardware_from_dict`): names the engine reads (roof precisions,
memory levels, links), a source for every number, values in their physical range; an error
names the file, the field, the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tomllib
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..dtypes import ROOF_PRECISIONS, UnknownDTypeError, get_dtype
from ..errors import HardwareSpecError, UnknownDeviceError
from ..safefile import read_user_file, unique_keys
from ..text import has_controls
from .spec import LINK_NAMES, MEMORY_LEVELS, Hardware, Link, MemoryLevel, Roof

__all__ = [
    "Catalog",
    "active_catalog",
    "use_catalog",
    "get_device",
    "device_names",
    "register_device",
    "load_hardware_file",
    "hardware_from_dict",
    "catalog",
    "shipped_devices",
]


_ROOF_KEYS = {"unit", "precision", "peak_flops_per_s", "source"}
_MEM_KEYS = {"name", "bandwidth_bytes_per_s", "capacity_bytes", "source", "per"}
_LINK_KEYS = {"name", "bandwidth_bytes_per_s", "latency_s", "source", "domain"}
_DEVICE_KEYS = {
    "description",
    "vendor",
    "architecture",
    "architecture_source",
    "aliases",
    "sm_count",
    "power_w",
    "power_source",
    "price_usd_per_hour",
    "price_source",
    "reported_memory_bytes",
    "reported_memory_source",
    "roofs",
    "sparse_roofs",
    "memory",
    "links",
    "launch_overhead_s",
    "overlap",
    "notes",
    "preliminary",
}


#: the largest hardware file read (bytes): the whole catalog is about 60 kB
MAX_FILE_BYTES = 4 * 2**20


#: a source given as one word of key characters (``h100-datasheet``) cites a key of the file's
#: ``[sources]``; text of several words, or a URL, is the source itself
_SOURCE_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def _check_keys(entry: Mapping[str, Any], allowed: set[str], where: str) -> None:
    if not isinstance(entry, Mapping):
        raise HardwareSpecError(f"{where} must be a table/object, got {type(entry).__name__}")
    extra = set(entry) - allowed
    if extra:
        raise HardwareSpecError(
            f"{where}: unknown field(s) {', '.join(sorted(extra))}; allowed: {', '.join(sorted(allowed))}"
        )


def _value(entry: Mapping[str, Any], key: str, where: str, required: bool = True) -> Any:
    if key not in entry:
        if required:
            raise HardwareSpecError(f"{where}: missing required field {key!r}")
        return None
    v = entry[key]
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise HardwareSpecError(
            f"{where}.{key} must be a number or an expression string, got {type(v).__name__} {v!r}"
        )
    return v


def _source(text: Any, sources: Mapping[str, str], where: str) -> str:
    """The source ``text`` cites: its ``[sources]`` entry when it is a key, else the text itself;
    one word of key characters that is no key (a misspelled or missing entry) is refused, naming
    the keys the file defines, rather than printed as if it were the citation."""
    if text is None:
        return ""
    if not isinstance(text, str):
        raise HardwareSpecError(
            f"{where} must be text (a key of [sources] or the source itself), got {type(text).__name__} {text!r:.60}"
        )
    if text in sources:
        out = sources[text]
    elif _SOURCE_KEY.fullmatch(text):
        keys = ", ".join(sorted(sources)) if sources else "none (the file has no [sources] table)"
        raise HardwareSpecError(
            f"{where} cites source {text!r}, which [sources] does not define (defined: {keys}); "
            "add it to [sources], or write the source itself as text (a sentence naming the document)"
        )
    else:
        out = text
    if has_controls(out):  # printed on one line after a figure: a newline would forge the next
        raise HardwareSpecError(
            f"source {out!r:.60} must be text of printable characters (no newline, tab or control)"
        )
    return out


def _name(entry: Mapping[str, Any], key: str, known: Collection[str], what: str, where: str) -> str:
    """``entry[key]``, a name the engine knows (``known``), else an error listing them."""
    value = entry.get(key)
    if not isinstance(value, str):
        raise HardwareSpecError(f"{where}: field {key!r} must be a string")
    if value not in known:
        hint = ""
        try:  # a dtype's name where its roof's key is meant: bfloat16 -> bf16, fp8_e4m3 -> fp8
            roof = get_dtype(value).roof if known is ROOF_PRECISIONS else None
        except UnknownDTypeError:
            roof = None
        if roof is not None and roof != value:
            hint = f" (the dtype {value} computes on the {roof} roof: write {roof!r})"
        raise HardwareSpecError(
            f"{where}.{key} {value!r:.60} is not a {what} the engine knows; known: {', '.join(sorted(known))}{hint}"
        )
    return value


def _check_sourced(hw: Hardware, where: str) -> None:
    """Every number of a device carries its source (STYLE: units in names, a source per number),
    and so does its architecture; a symbolic value (``P``) is no claim and needs none."""
    # (the field's path in the file, its value, its source, the field that would give the source)
    fields: list[tuple[str, Any, str, str]] = []
    for key, roofs in (("roofs", hw.roofs), ("sparse_roofs", hw.sparse_roofs)):
        fields += [
            (f"{key}[{i}].peak_flops_per_s", r.peak_flops_per_s, r.source, "source")
            for i, r in enumerate(roofs)
        ]
    for i, m in enumerate(hw.memory):
        fields += [(f"memory[{i}].bandwidth_bytes_per_s", m.bandwidth_bytes_per_s, m.source, "source")]
        fields += [(f"memory[{i}].capacity_bytes", m.capacity_bytes, m.source, "source")]
    for i, lk in enumerate(hw.links):
        fields += [(f"links[{i}].bandwidth_bytes_per_s", lk.bandwidth_bytes_per_s, lk.source, "source")]
        fields += [(f"links[{i}].latency_s", lk.latency_s, lk.source, "source")]
    fields += [
        ("power_w", hw.power_w, hw.power_source, "power_source"),
        ("price_usd_per_hour", hw.price_usd_per_hour, hw.price_source, "price_source"),
        (
            "reported_memory_bytes",
            hw.reported_memory_bytes,
            hw.reported_memory_source,
            "reported_memory_source",
        ),
        ("architecture", hw.architecture or None, hw.architecture_source, "architecture_source"),
    ]
    for at, value, source, source_field in fields:
        if source or value is None or not (isinstance(value, str) or value.is_number):
            continue
        shown = value if isinstance(value, str) else format(float(value), "g")
        give = "the entry source" if source_field == "source" else source_field
        raise HardwareSpecError(
            f"{where}.{at} = {shown} has no source: give {give} = a key of [sources] or the source itself "
            "as text (every figure of a device file names where it comes from)"
        )


@contextmanager
def _at(where: str) -> Iterator[None]:
    """Errors of a roof, memory level or link built inside say which entry of the file it is."""
    try:
        yield
    except HardwareSpecError as exc:
        raise HardwareSpecError(f"{where}: {exc}") from None


def hardware_from_dict(
    name: str, entry: Mapping[str, Any], sources: Mapping[str, str] | None = None
) -> Hardware:
    """Build a :class:`Hardware` from one device table of a catalog file.

    Besides each field's type and range (:data:`~costmodel.hardware.spec.RANGES`), the table
    is refused, naming the field, the value and what is allowed, where a roof's precision is
    no roof key (:data:`~costmodel.dtypes.ROOF_PRECISIONS`), a memory level or link has a name
    the engine never reads (:data:`MEMORY_LEVELS`, :data:`LINK_NAMES`), a source is one word
    that ``sources`` does not define (a misspelled key), or a number (or the architecture)
    has no source at all; symbolic values need none.

    Parameters
    ----------
    name : str
        The device's name (its ``[devices.NAME]`` key).
    entry : mapping
        The device table.
    sources : mapping, optional
        The file's ``[sources]``: citation key -> the source's text.

    Returns
    -------
    Hardware

    Raises
    ------
    HardwareSpecError
        Naming the field (``device 'box'.memory[0].name``), the value and what is allowed.
    """
    src = dict(sources or {})
    for key, text in src.items():
        if not isinstance(text, str):
            raise HardwareSpecError(
                f"[sources] {key!r} must be text naming the document, got {type(text).__name__}"
            )
    where = f"device {name!r}"
    _check_keys(entry, _DEVICE_KEYS, where)
    for key, text in (
        ("name", name),
        ("description", entry.get("description", "")),
        ("vendor", entry.get("vendor", "")),
        ("architecture", entry.get("architecture", "")),
        ("notes", entry.get("notes", "")),
    ):
        if (key in ("name", "description", "vendor") and not isinstance(text, str)) or (
            isinstance(text, str) and has_controls(text)
        ):
            raise HardwareSpecError(
                f"{where}: {key} must be text of printable characters (no newline, tab or control), got {text!r:.60}"
            )

    def roofs(key: str) -> tuple[Roof, ...]:
        out = []
        items = entry.get(key, [])
        if not isinstance(items, list):
            raise HardwareSpecError(f"{where}.{key} must be a list of tables")
        for i, r in enumerate(items):
            w = f"{where}.{key}[{i}]"
            _check_keys(r, _ROOF_KEYS, w)
            if not isinstance(r.get("unit"), str):
                raise HardwareSpecError(f"{w}: field 'unit' must be a string")
            precision = _name(r, "precision", ROOF_PRECISIONS, "roof precision", w)
            peak, source = _value(r, "peak_flops_per_s", w), _source(r.get("source"), src, f"{w}.source")
            with _at(w):
                out.append(Roof(r["unit"], precision, peak, source, dense=(key == "roofs")))
        return tuple(out)

    def listed(key: str) -> list[Any]:
        items = entry.get(key, [])
        if not isinstance(items, list):
            raise HardwareSpecError(f"{where}.{key} must be a list of tables, got {type(items).__name__}")
        return items

    memory = []
    for i, m in enumerate(listed("memory")):
        w = f"{where}.memory[{i}]"
        _check_keys(m, _MEM_KEYS, w)
        level = _name(m, "name", MEMORY_LEVELS, "memory level", w)
        bw, cap = (
            _value(m, "bandwidth_bytes_per_s", w, required=False),
            _value(m, "capacity_bytes", w, required=False),
        )
        source = _source(m.get("source"), src, f"{w}.source")
        with _at(w):
            memory.append(MemoryLevel(level, bw, cap, source, per=m.get("per", "device")))
    if not memory:
        raise HardwareSpecError(f"{where}: needs at least one memory level (e.g. 'dram')")
    links = []
    for i, lk in enumerate(listed("links")):
        w = f"{where}.links[{i}]"
        _check_keys(lk, _LINK_KEYS, w)
        link = _name(lk, "name", LINK_NAMES, "link", w)
        bw, latency = _value(lk, "bandwidth_bytes_per_s", w), _value(lk, "latency_s", w, required=False)
        source = _source(lk.get("source"), src, f"{w}.source")
        with _at(w):
            links.append(Link(link, bw, latency, source, lk.get("domain")))
    sm = entry.get("sm_count")
    if sm is not None and (isinstance(sm, bool) or not isinstance(sm, int)):
        raise HardwareSpecError(f"{where}.sm_count must be an integer, got {sm!r:.40}")
    preliminary = entry.get("preliminary", "")
    if not isinstance(preliminary, str):
        raise HardwareSpecError(
            f"{where}.preliminary must be text naming the source and its date, got {preliminary!r}"
        )
    architecture = entry.get("architecture", "")
    if not isinstance(architecture, str) or len(architecture) > 60:
        raise HardwareSpecError(
            f"{where}.architecture must be the vendor's architecture name (text, at most 60 characters), "
            f"got {architecture!r}"
        )
    kwargs: dict[str, Any] = {}
    for key in ("launch_overhead_s", "overlap"):
        if key in entry:
            kwargs[key] = _value(entry, key, where)
    hw = Hardware(
        name=name,
        roofs=roofs("roofs"),
        sparse_roofs=roofs("sparse_roofs"),
        memory=tuple(memory),
        links=tuple(links),
        description=str(entry.get("description", "")),
        vendor=str(entry.get("vendor", "")),
        architecture=architecture.strip(),
        architecture_source=_source(entry.get("architecture_source"), src, f"{where}.architecture_source"),
        power_w=_value(entry, "power_w", where, required=False),
        power_source=_source(entry.get("power_source"), src, f"{where}.power_source"),
        price_usd_per_hour=_value(entry, "price_usd_per_hour", where, required=False),
        price_source=_source(entry.get("price_source"), src, f"{where}.price_source"),
        reported_memory_bytes=_value(entry, "reported_memory_bytes", where, required=False),
        reported_memory_source=_source(
            entry.get("reported_memory_source"), src, f"{where}.reported_memory_source"
        ),
        sm_count=sm,
        notes=str(entry.get("notes", "")),
        preliminary=_source(preliminary or None, src, f"{where}.preliminary"),
        **kwargs,
    )
    if not hw.roofs:
        raise HardwareSpecError(f"{where}: needs at least one dense roof")
    _check_sourced(hw, where)
    return hw


def _parse(data: Mapping[str, Any]) -> list[tuple[Hardware, list[str]]]:
    """The devices of a catalog-layout document with their aliases; a name or alias given twice
    (names are case-insensitive: ``Box`` and ``box`` are one device) is refused."""
    if "devices" not in data or not isinstance(data["devices"], Mapping):
        raise HardwareSpecError("expected a 'devices' table mapping names to devices")
    sources = data.get("sources", {})
    if not isinstance(sources, Mapping):
        raise HardwareSpecError("'sources' must map keys to text")
    out = []
    seen: dict[str, tuple[str, str]] = {}  # a name or alias, lower case -> (its device, what gave it)
    for name, entry in data["devices"].items():
        hw = hardware_from_dict(name, entry, sources)
        aliases = entry.get("aliases", [])
        if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
            raise HardwareSpecError(f"device {name!r}.aliases must be a list of strings")
        for a in aliases:
            if has_controls(a) or not a.strip():
                raise HardwareSpecError(
                    f"device {name!r}.aliases: {a!r:.60} must be a name of printable characters "
                    "(no newline, tab or control)"
                )
        for n, what in (
            (name, f"device {name!r}"),
            *((a, f"alias {a!r} of device {name!r}") for a in aliases),
        ):
            other, said = seen.setdefault(n.lower(), (name, what))
            if other != name:
                raise HardwareSpecError(
                    f"{what} names the same device as {said} (names are case-insensitive); "
                    "give each device a name of its own"
                )
        out.append((hw, aliases))
    return out


#: where a catalog device came from: the shipped ``catalog.toml``, a hardware file (its path),
#: or a :class:`Hardware` registered in Python
_SHIPPED, _FILE, _PYTHON = "shipped", "file", "python"


@cache
def _shipped() -> list[tuple[Hardware, list[str]]]:
    """The shipped devices, parsed once (Hardware specs are immutable)."""
    text = resources.files(__package__).joinpath("catalog.toml").read_text(encoding="utf-8")
    try:
        return _parse(tomllib.loads(text))
    except HardwareSpecError as exc:
        raise HardwareSpecError(f"catalog.toml: {exc}") from None


def shipped_devices() -> dict[str, Hardware]:
    """The devices of the shipped ``catalog.toml`` only, freshly parsed."""
    return {hw.name: hw for hw, _ in _shipped()}


class Catalog:
    """A set of devices by name, with aliases (case-insensitive).

    The engine reads one *active* catalog (:func:`active_catalog`), which
    starts as the shipped ``catalog.toml``. :func:`use_catalog` swaps in
    another one for a block (tests give each test a fresh copy, so no test
    sees devices another one registered).
    """

    def __init__(self, entries: list[tuple[Hardware, list[str]]] | None = None) -> None:
        self._devices: dict[str, Hardware] = {}
        self._aliases: dict[str, str] = {}
        self._origins: dict[str, tuple[str, str]] = {}  # lower-case name -> (_SHIPPED/_FILE/_PYTHON, path)
        for hw, aliases in entries or []:
            self.register(hw, aliases=aliases)

    @classmethod
    def shipped(cls) -> Catalog:
        """A fresh catalog of the shipped ``catalog.toml`` devices."""
        cat = cls(_shipped())
        cat._origins = {key: (_SHIPPED, "") for key in cat._devices}
        return cat

    def register(
        self,
        hw: Hardware,
        *,
        aliases: list[str] | None = None,
        replace: bool = False,
        origin: str = "",
    ) -> None:
        """Add a device (and aliases); an existing name needs ``replace=True``. ``origin`` is the
        hardware file it was read from (``""``: registered in Python), which :meth:`describe`
        says."""
        if not isinstance(hw, Hardware):
            raise HardwareSpecError(f"register_device expects a Hardware, got {type(hw).__name__}")
        key = hw.name.lower()
        if key in self._devices and not replace:
            raise HardwareSpecError(
                f"device {hw.name!r} is already in the catalog ({self.describe(key)}); pass replace=True"
            )
        if replace:  # a name that was another device's alias now means this device
            self._aliases.pop(key, None)
        self._devices[key] = hw
        self._origins[key] = (_FILE, origin) if origin else (_PYTHON, "")
        for a in aliases or []:
            self._aliases[a.lower()] = key

    def describe(self, name: str) -> str:
        """Which device ``name`` (or alias) is and where it came from, for a message:
        ``"the catalog device 'h100-sxm'"``, ``"device 'box' of hardware file 'a.toml'"``,
        ``"device 'box' registered in Python"``.

        >>> from costmodel.hardware import active_catalog
        >>> active_catalog().describe("H100")
        "the catalog device 'h100-sxm'"
        """
        key = self._aliases.get(name.lower(), name.lower())
        hw = self._devices[key]
        kind, path = self._origins.get(key, (_PYTHON, ""))
        if kind == _SHIPPED:
            return f"the catalog device {hw.name!r}"
        if kind == _FILE:
            return f"device {hw.name!r} of hardware file {path!r}"
        return f"device {hw.name!r} registered in Python"

    def is_alias(self, name: str) -> bool:
        """Whether ``name`` is another device's alias, not a device's own name.

        >>> from costmodel.hardware import active_catalog
        >>> active_catalog().is_alias("h100"), active_catalog().is_alias("h100-sxm")
        (True, False)
        """
        key = name.lower()
        return key in self._aliases and key not in self._devices

    def get(self, name: str) -> Hardware:
        """A device by name or alias, case-insensitive; a series name (``mi400``: a word of a
        description with a digit in it, as part numbers have) with one catalog part is that part
        (its :attr:`~costmodel.hardware.spec.Hardware.resolved_from` says so, and every report
        prints it), with several it is refused listing them. Another word of a description
        (``box``, ``cooled``) is no device: refused, naming the part whose description holds it."""
        if not isinstance(name, str):
            raise UnknownDeviceError(
                f"device must be a name or a Hardware, got {type(name).__name__} {name!r:.40}"
            )
        name = name.strip()  # " h100" (a stray space) is the alias, not a word of a description
        key = name.lower()
        key = self._aliases.get(key, key)
        try:
            return self._devices[key]
        except KeyError:
            series = self.series(name)
            numbered = any(c.isdigit() for c in name)  # mi400, b300: a part number's series
            if len(series) == 1 and numbered:  # a series with one catalog part (mi400): that part, and said
                return dataclasses.replace(self._devices[series[0]], resolved_from=name[:40])
            if series and not numbered:  # a plain word of descriptions ('box' in gaudi3's): not a name
                whose = (
                    f"{series[0]}'s description"
                    if len(series) == 1
                    else f"the descriptions of {', '.join(series)}"
                )
                raise UnknownDeviceError(
                    f"unknown device {name[:40]!r}: only a word of {whose}; give a device's name "
                    "(`costmodel hw list`)"
                ) from None
            if series:  # a family name of several parts (rubin): refused with them, never picked
                raise UnknownDeviceError(
                    f"device {name[:40]!r} names a series, not a part; the catalog's parts of it: "
                    f"{', '.join(series)}"
                ) from None
            raise UnknownDeviceError(
                f"unknown device {name!r}; known devices: {', '.join(self.names())}"
            ) from None

    def series(self, name: str) -> tuple[str, ...]:
        """The devices whose description names ``name`` as a word (case-insensitive, at least three
        characters: ``mi400`` -> the parts described as "MI400 series"), for an error that lists
        them; empty when none does.

        >>> from costmodel.hardware import active_catalog
        >>> active_catalog().series("MI400")
        ('mi455x',)
        """
        import re

        word = name.strip().lower()
        if len(word) < 3 or not re.fullmatch(r"[a-z0-9][a-z0-9.\-]*", word):
            return ()
        pattern = re.compile(rf"(?<![a-z0-9]){re.escape(word)}(?![a-z0-9])")
        return tuple(n for n, hw in self._devices.items() if pattern.search(hw.description.lower()))

    def names(self) -> tuple[str, ...]:
        """Device names in registration order."""
        return tuple(self._devices)

    def copy(self) -> Catalog:
        new = Catalog()
        new._devices, new._aliases, new._origins = (
            dict(self._devices),
            dict(self._aliases),
            dict(self._origins),
        )
        return new

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._aliases.get(name.lower(), name.lower()) in self._devices

    def __len__(self) -> int:
        return len(self._devices)


_ACTIVE: Catalog | None = None


def active_catalog() -> Catalog:
    """The catalog the engine reads (the shipped devices plus what was registered)."""
    global _ACTIVE
    if _ACTIVE is None:
        _ACTIVE = Catalog.shipped()
    return _ACTIVE


@contextmanager
def use_catalog(cat: Catalog) -> Iterator[Catalog]:
    """Make ``cat`` the active catalog inside a ``with`` block, then restore the previous one.

    Parameters
    ----------
    cat : Catalog
        The catalog :func:`get_device` reads inside the block.

    Yields
    ------
    Catalog
        ``cat``.
    """
    global _ACTIVE
    previous = _ACTIVE
    _ACTIVE = cat
    try:
        yield cat
    finally:
        _ACTIVE = previous


def register_device(hw: Hardware, *, aliases: list[str] | None = None, replace: bool = False) -> None:
    """Add a device (and aliases) to the active catalog; duplicates need ``replace``.

    Parameters
    ----------
    hw : Hardware
        The device.
    aliases : list of str, optional
        Other names it answers to (case-insensitive); None: none.
    replace : bool, default False
        Replace a device already registered under the name or an alias; else that is an error.

    Raises
    ------
    HardwareSpecError
        When the name or an alias is taken and ``replace`` is False.
    """
    active_catalog().register(hw, aliases=aliases, replace=replace)


def _check_clashes(parsed: list[tuple[Hardware, list[str]]], origin: str) -> None:
    """A device (or alias) of a file that would shadow a different device already known (a
    catalog device, another file's, one registered in Python) is an error naming both."""
    cat = active_catalog()
    for hw, aliases in parsed:
        for name in (hw.name, *aliases):
            if name in cat and cat.get(name) != hw:
                raise HardwareSpecError(
                    f"hardware file {origin!r}: {'device' if name == hw.name else 'alias'} {name!r} is "
                    f"already {cat.describe(name)}; give it another name (or replace that device on "
                    "purpose: replace=True, or --hw-override on the command line)"
                )


def load_hardware_file(path: str | Path, *, register: bool = True, replace: bool = False) -> list[Hardware]:
    """Read devices from a TOML or JSON file (catalog layout) and register them.

    A device or alias named like a different device already known (a catalog device, one of
    another file, one registered in Python) is an error naming both unless ``replace`` (then
    the file's device replaces it); a JSON object with a key given twice is refused, and so is
    a name given twice in the file. Every error names the file, then the field
    (:func:`hardware_from_dict`).

    Parameters
    ----------
    path : str or Path
        A ``.toml`` or ``.json`` file in the catalog's layout (units in the keys: FLOP/s, bytes, B/s).
    register : bool, default True
        Add the devices to the active catalog; False: only parse and return them.
    replace : bool, default False
        Let the file's devices replace same-named ones already known.

    Returns
    -------
    list of Hardware
        The file's devices, in file order.

    Raises
    ------
    HardwareSpecError
        For an unreadable file, a bad field (named) or a name clash.
    """
    if not isinstance(path, str | os.PathLike):  # None was a bare TypeError from Path()
        raise HardwareSpecError(
            f"path must be a hardware file's path (str or Path), got {type(path).__name__} {path!r:.40}"
        )
    path = Path(path)
    raw = read_user_file(path, what="hardware file", max_bytes=MAX_FILE_BYTES, error=HardwareSpecError)
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(raw, object_pairs_hook=unique_keys(HardwareSpecError))
        else:
            data = tomllib.loads(raw.decode("utf-8"))
    except HardwareSpecError as exc:
        raise HardwareSpecError(f"hardware file {str(path)!r}: {exc}") from None
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise HardwareSpecError(f"hardware file {str(path)!r} is not valid TOML/JSON: {exc}") from None
    except RecursionError:
        raise HardwareSpecError(f"hardware file {str(path)!r} is nested too deeply to read") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise HardwareSpecError(f"hardware file {str(path)!r} holds a value out of range: {exc}") from None
    if not isinstance(data, Mapping):
        raise HardwareSpecError(f"hardware file {str(path)!r}: top level must be a table/object")
    try:
        parsed = _parse(data)
    except HardwareSpecError as exc:  # every error says which file, then which field
        raise HardwareSpecError(f"hardware file {str(path)!r}: {exc}") from None
    if not parsed:  # an empty [devices] table loaded nothing and said nothing
        raise HardwareSpecError(
            f"hardware file {str(path)!r} defines no device: its 'devices' table is empty "
            "(a device is a [devices.NAME] table)"
        )
    if register:
        if not replace:
            _check_clashes(parsed, str(path))
        for hw, aliases in parsed:
            active_catalog().register(hw, aliases=aliases, replace=True, origin=str(path))
    return [hw for hw, _ in parsed]


def get_device(name: str | Hardware) -> Hardware:
    """Look a device up by name or alias (case-insensitive) in the active catalog.

    Parameters
    ----------
    name : str or Hardware
        A device name or alias (``h100`` is the SXM part), case-insensitive, surrounding whitespace
        ignored; a series with one catalog part resolves to it. A :class:`Hardware` (a custom or
        scaled device) is returned as it is.

    Returns
    -------
    Hardware
        The device spec: roofs (FLOP/s), memory levels (bytes, B/s), links, power.

    Raises
    ------
    UnknownDeviceError
        When ``name`` names no device (the known ones listed), names a series of several parts,
        or is neither a str nor a Hardware.

    >>> get_device(" H100").name
    'h100-sxm'
    """
    if isinstance(name, Hardware):
        return name
    return active_catalog().get(name)


def distinct_devices(devices: Collection[str | Hardware], option: str = "devices") -> list[Hardware]:
    """The specs of ``devices``, refusing one device given twice: by the same name or by two that
    resolve to one catalog entry (``h100`` and ``h100-sxm``), or two different specs of one name
    (a what-if copy, :meth:`Hardware.scaled`, beside its original), which results keyed by device
    name could not tell apart. Every command and library call taking a device list checks it here
    (``hw compare``, ``derive balance``, ``sweep``, ``search``, ``size``).

    Parameters
    ----------
    devices : collection of str or Hardware
        Catalog names, aliases or specs (an unknown name is refused by :func:`get_device`).
    option : str
        The setting as the caller spells it (``devices``, ``--device``), named in the error.

    Returns
    -------
    list of Hardware
        The specs, in the order given.

    Raises
    ------
    CostModelError
        ``devices gives h100-sxm twice (as h100 and h100-sxm): list each device once``.

    >>> [hw.name for hw in distinct_devices(["h100", "a100"])]
    ['h100-sxm', 'a100-sxm-40gb']
    """
    from ..errors import CostModelError

    seen: dict[str, tuple[str, Hardware]] = {}
    out: list[Hardware] = []
    for dev in devices:
        hw = get_device(dev)
        given = dev.strip() if isinstance(dev, str) else hw.name
        if hw.name in seen:
            first, spec = seen[hw.name]
            if spec != hw:  # a what-if copy (Hardware.scaled) keeps its original's name
                raise CostModelError(
                    f"{option} gives two different specs named {hw.name} (a what-if copy keeps its "
                    "original's name): name the copy apart, e.g. dataclasses.replace(copy, "
                    f"name='{hw.name[:40]}-whatif'), as results are keyed by device name"
                )
            spelled = "" if first == given == hw.name else f" (as {first[:60]} and {given[:60]})"
            raise CostModelError(f"{option} gives {hw.name} twice{spelled}: list each device once")
        seen[hw.name] = (given, hw)
        out.append(hw)
    return out


def device_names() -> tuple[str, ...]:
    """Catalog device names in catalog order.

    Returns
    -------
    tuple of str
        The active catalog's canonical names (aliases left out).
    """
    return active_catalog().names()


def catalog() -> dict[str, Hardware]:
    """A copy of the whole active catalog (name -> Hardware).

    Returns
    -------
    dict of str to Hardware
        Canonical name -> spec; editing it leaves the catalog unchanged.
    """
    cat = active_catalog()
    return {n: cat.get(n) for n in cat.names()}
