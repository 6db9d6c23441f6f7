"""The libraries pyproject.toml pins to one release (==X.Y.*), by their normalized names,
each with its pin."""

import tomllib

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from harness.live import ROOT


def pinned() -> dict[str, SpecifierSet]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = {}
    for line in project["dependencies"]:
        requirement = Requirement(line)
        specs = list(requirement.specifier)
        if len(specs) == 1 and specs[0].operator == "==":
            found[canonicalize_name(requirement.name)] = requirement.specifier
    return found
