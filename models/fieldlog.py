"""Which fields of a ``config.json`` the loader reads: a recording view of the parsed config (light:
no sympy).

:class:`RecordingConfig` is a read-only mapping over the parsed ``config.json`` that notes every key
looked up (``cfg[key]``, ``cfg.get(key)``, ``key in cfg``) in a shared :class:`FieldLog`, with
whether the config states it. Handing one to :func:`models.hf.config_from_hf_dict` records what the
mapping of that ``model_type`` reads, so ``costmodel model check`` lists the fields read and the
fields ignored from the loader itself, never from a hand-written list that could drift from it.

A nested object (``text_config``, ``rope_scaling``, ``quantization_config``) is returned as a
recording view too, its keys logged as ``parent.key``. The loader never copies a config with
``{**cfg}`` or ``dict(cfg)`` (a copy would read every key, or stop the recording): where a mapper
adds derived fields or defaults it calls :func:`layered`, which keeps the recording on a recording
view and is the plain merge on a plain mapping (the loader's results are the same either way).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FieldLog", "RecordingConfig", "layered"]


@dataclass
class FieldLog:
    """The keys a load looked up, in order of first look: key path -> whether the config states it
    (``False``: looked for, absent, a default taken or the field not needed)."""

    looked: dict[str, bool] = field(default_factory=dict)

    def note(self, path: str, present: bool) -> None:
        """Record one look-up of ``path`` (a key present once stays present)."""
        self.looked[path] = self.looked.get(path, False) or present

    def read(self) -> tuple[str, ...]:
        """The key paths looked up that the config states."""
        return tuple(k for k, v in self.looked.items() if v)

    def absent(self) -> tuple[str, ...]:
        """The key paths looked up that the config does not state."""
        return tuple(k for k, v in self.looked.items() if not v)


class RecordingConfig(Mapping[str, Any]):
    """A read-only view of a parsed ``config.json`` that logs each key looked up (module doc).

    Parameters
    ----------
    data : the parsed object (a JSON object as a mapping)
    log : where the look-ups go (a new :class:`FieldLog` when omitted)
    prefix : the key path of ``data`` in the whole config (``"text_config."``)
    overrides, defaults : derived values that win over ``data`` / that ``data`` wins over, not logged
        as config reads (:func:`layered`)
    drop_none : read a ``null`` in ``data`` as absent (the multimodal unwrap's rule)

    >>> cfg = RecordingConfig({"hidden_size": 64, "bos_token_id": 1})
    >>> cfg["hidden_size"], cfg.get("head_dim")
    (64, None)
    >>> cfg.log.read(), cfg.log.absent()
    (('hidden_size',), ('head_dim',))
    """

    def __init__(
        self,
        data: Mapping[str, Any],
        log: FieldLog | None = None,
        prefix: str = "",
        overrides: Mapping[str, Any] | None = None,
        defaults: Mapping[str, Any] | None = None,
        drop_none: bool = False,
    ) -> None:
        self.data = data
        self.log = FieldLog() if log is None else log
        self.prefix = prefix
        self._over = dict(overrides or {})
        self._under = dict(defaults or {})
        self._drop_none = drop_none

    def _states(self, key: str) -> bool:
        return key in self.data and not (self._drop_none and self.data[key] is None)

    def __getitem__(self, key: str) -> Any:
        if key in self._over:
            return self._over[key]
        stated = self._states(key)
        self.log.note(self.prefix + str(key), stated)
        if stated:
            value = self.data[key]
            if isinstance(value, Mapping):
                return RecordingConfig(value, self.log, f"{self.prefix}{key}.")
            return value
        if key in self._under:
            return self._under[key]
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        if key in self._over:
            return True
        stated = self._states(key)
        self.log.note(self.prefix + key, stated)
        return stated or key in self._under

    def __iter__(self) -> Iterator[str]:
        keys = dict.fromkeys([*self._under, *(k for k in self.data if self._states(k)), *self._over])
        return iter(keys)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def layer(
        self,
        defaults: Mapping[str, Any] | None = None,
        overrides: Mapping[str, Any] | None = None,
        drop_none: bool = False,
    ) -> RecordingConfig:
        """This view with more defaults and overrides (:func:`layered`), logging to the same log."""
        return RecordingConfig(
            self.data,
            self.log,
            self.prefix,
            {**self._over, **(overrides or {})},
            {**(defaults or {}), **self._under},
            drop_none or self._drop_none,
        )


def layered(
    cfg: Mapping[str, Any],
    *,
    defaults: Mapping[str, Any] | None = None,
    overrides: Mapping[str, Any] | None = None,
    drop_none: bool = False,
) -> Mapping[str, Any]:
    """``{**defaults, **cfg, **overrides}`` (with ``drop_none``, ``cfg``'s nulls left out), as a
    recording view when ``cfg`` is one (module doc).

    >>> layered({"a": 1, "b": None}, defaults={"b": 2, "c": 3}, overrides={"a": 0}, drop_none=True)
    {'b': 2, 'c': 3, 'a': 0}
    """
    if isinstance(cfg, RecordingConfig):
        return cfg.layer(defaults, overrides, drop_none)
    own = {k: v for k, v in cfg.items() if not (drop_none and v is None)}
    return {**(defaults or {}), **own, **(overrides or {})}
