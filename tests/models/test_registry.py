"""Model names: a built-in name, or the user's ``package.module:function``; a misspelt one gets a suggestion."""

from __future__ import annotations

import pytest

from graphshard.errors import InputError
from graphshard.models.registry import BUILTIN, check_name


def test_builtin_and_factory_names_pass() -> None:
    for name in [*BUILTIN, "my_models:gat", "pkg.sub.mod:make_model"]:
        check_name(name)


@pytest.mark.parametrize("typed,meant", [("sagee", "sage"), ("GAT", "gat"), ("rgnc", "rgcn")])
def test_a_misspelt_model_gets_a_did_you_mean(typed: str, meant: str) -> None:
    with pytest.raises(InputError, match=rf"unknown model '{typed}' \(did you mean '{meant}'\?\)"):
        check_name(typed)


def test_a_name_like_nothing_lists_the_choices_without_a_guess() -> None:
    with pytest.raises(InputError, match=r"unknown model 'zzzzzz': give one of") as err:
        check_name("zzzzzz")
    assert "did you mean" not in str(err.value)
