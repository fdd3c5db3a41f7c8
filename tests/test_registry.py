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
