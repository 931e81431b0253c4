"""The one registry type (issue 31 item 2): properties of :class:`credo.registry.Registry`.

Registering and looking up round-trip for any names and entries; a name registered twice is
refused and the first entry kept; an unknown name raises the user error, one line naming it
and every known name; a registry filled by a module above its reader imports that module on
its first read.
"""

from __future__ import annotations

import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from credo.errors import UserError
from credo.registry import DuplicateName, Registry, UnknownName

NAMES = st.text(st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Zs")),
                min_size=1, max_size=12).filter(str.isprintable)
ENTRIES = st.dictionaries(NAMES, st.integers(), max_size=8)


def _filled(entries: dict[str, int]) -> Registry[int]:
    reg: Registry[int] = Registry("widget")
    for name, value in entries.items():
        reg.add(name, value)
    return reg


@given(ENTRIES)
def test_register_then_look_up_round_trips(entries):
    reg = _filled(entries)
    assert reg.names() == tuple(entries)  # registration order
    assert list(reg) == list(entries)
    assert len(reg) == len(entries)
    assert dict(reg.items()) == entries
    for name, value in entries.items():
        assert name in reg
        assert reg[name] == value
        assert reg.get(name) == value


@given(ENTRIES, st.integers())
def test_the_decorator_registers_and_returns_the_object(entries, value):
    reg = _filled(entries)
    name = "".join(entries) + "-new"

    def fn() -> int:
        return value

    assert reg.register(name)(fn) is fn  # type: ignore[arg-type]
    assert reg[name] is fn
    made: Registry[tuple[str, int]] = Registry("spec")
    assert made.register(name, lambda f: (f.__name__, f()))(fn) is fn
    assert made[name] == ("fn", value)


@given(ENTRIES.filter(bool), st.data())
def test_a_name_registered_twice_is_refused_and_the_first_kept(entries, data):
    reg = _filled(entries)
    name = data.draw(st.sampled_from(sorted(entries)))
    for again in (lambda: reg.add(name, -1), lambda: reg.register(name)(-1),
                  lambda: reg.__setitem__(name, -1)):
        with pytest.raises(DuplicateName, match="is already registered"):
            again()
    assert reg[name] == entries[name]
    assert len(reg) == len(entries)


@given(ENTRIES, NAMES)
def test_an_unknown_name_is_one_user_error_listing_the_choices(entries, name):
    reg = _filled({k: v for k, v in entries.items() if k != name})
    assert name not in reg
    assert reg.get(name) is None
    with pytest.raises(UnknownName) as caught:
        reg[name]
    err = caught.value
    assert isinstance(err, UserError) and isinstance(err, KeyError)
    text = str(err)
    assert "\n" not in text
    head, known = text.split("; known widgets: ", 1)
    assert head == f"unknown widget {name!r}"
    assert known == (", ".join(sorted(reg)) or "none")


@given(ENTRIES.filter(bool), st.data())
def test_remove_takes_one_entry_out(entries, data):
    reg = _filled(entries)
    name = data.draw(st.sampled_from(sorted(entries)))
    assert reg.remove(name) == entries[name]
    assert name not in reg
    assert reg.names() == tuple(k for k in entries if k != name)
    with pytest.raises(UnknownName):
        reg.remove(name)
    reg.add(name, 7)  # free again
    assert reg[name] == 7


@pytest.mark.parametrize("bad", ["", "two\nlines", 3])
def test_a_name_must_be_one_printable_line(bad):
    with pytest.raises(ValueError, match="printable string"):
        Registry("widget").add(bad, 1)  # type: ignore[arg-type]


def test_unhashable_names_are_no_entry():
    reg = _filled({"a": 1})
    assert [] not in reg
    with pytest.raises(UnknownName, match=r"unknown widget \[\]; known widgets: a"):
        reg[[]]  # type: ignore[index]


def test_monkeypatch_setitem_adds_and_takes_back(monkeypatch):
    reg = _filled({"a": 1})
    with monkeypatch.context() as m:
        m.setitem(reg, "b", 2)
        assert reg.names() == ("a", "b")
    assert reg.names() == ("a",)


def test_load_imports_the_registering_module_on_first_read(tmp_path, monkeypatch):
    """A reader below the registering module (the config and the stopping rules) sees the
    built-in entries without importing that module itself."""
    reg: Registry[int] = Registry("gadget", load=("credo_test_gadgets",))
    (tmp_path / "credo_test_gadgets.py").write_text(
        "from test_registry_type import LOADED\nLOADED.add('built-in', 1)\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "test_registry_type", sys.modules[__name__])
    monkeypatch.setattr(sys.modules[__name__], "LOADED", reg, raising=False)
    monkeypatch.delitem(sys.modules, "credo_test_gadgets", raising=False)
    reg.add("mine", 2)  # registering does not load
    assert "credo_test_gadgets" not in sys.modules
    assert reg.names() == ("mine", "built-in")
    assert reg["built-in"] == 1
    with pytest.raises(UnknownName, match="known gadgets: built-in, mine"):
        reg["other"]
