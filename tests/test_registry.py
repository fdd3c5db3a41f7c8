"""The generic Registry: lookup with suggestions, removal, a scoped registration, and the
name attribute it sets on what it registers."""

import pytest

from fedbench.errors import FedbenchError
from fedbench.registry import Registry


def test_get_suggests_the_closest_name() -> None:
    things = Registry[int]("thing")
    things.register("alpha")(1)
    things.register("beta")(2)
    assert things.get("beta") == 2 and list(things) == ["alpha", "beta"]
    with pytest.raises(FedbenchError, match="unknown thing 'alpah'; did you mean 'alpha'"):
        things.get("alpah")
    with pytest.raises(ValueError, match="registered twice"):
        things.register("alpha")(3)


def test_unregister_and_registered_scope() -> None:
    things = Registry[int]("thing")
    things.register("alpha")(1)
    assert things.unregister("alpha") == 1 and "alpha" not in things
    with pytest.raises(KeyError):
        things.unregister("alpha")
    with pytest.raises(RuntimeError), things.registered("gamma", 3):
        assert things.get("gamma") == 3
        raise RuntimeError("the block fails")
    assert "gamma" not in things  # removed even though the block raised


def test_name_attribute_is_set_from_the_registered_name() -> None:
    kinds = Registry[type]("kind", name_attribute="name")

    @kinds.register("square")
    class Square:
        pass

    assert Square.name == "square"  # type: ignore[attr-defined]
    plain = Registry[type]("plain")

    @plain.register("circle")
    class Circle:
        pass

    assert not hasattr(Circle, "name")


#: A registry a plugin file of the test below registers into.
WIDGETS = Registry[int]("widget")


def test_an_open_registry_loads_the_plugins_at_its_first_read(tmp_path) -> None:
    from fedbench import plugins, registry

    plugin = tmp_path / "widgets.py"
    plugin.write_text("from tests.test_registry import WIDGETS\nWIDGETS.register('extra')(2)\n")
    plugins.reset()
    completed: list[list[str]] = []
    try:
        WIDGETS.register("built_in")(1)
        plugins.declare([str(plugin)])
        assert list(WIDGETS) == ["built_in"] and plugins.loaded() == []  # not open yet
        WIDGETS.open(complete=lambda: completed.append(sorted(WIDGETS._items)))
        assert list(WIDGETS) == ["built_in", "extra"]
        (loaded,) = plugins.loaded()
        assert WIDGETS.origin("extra") is loaded and WIDGETS.origin("built_in") is None
        assert loaded.registered == [("widget", "extra")]
        assert completed == [["built_in", "extra"]]  # once, after the plugin registered
        assert WIDGETS.get("extra") == 2 and completed == [["built_in", "extra"]]
    finally:
        plugins.reset()
        registry._OPEN.remove(WIDGETS)
        WIDGETS._open = False
        WIDGETS.unregister("built_in")
