"""docs/architecture.md names every app, every package folder and every top-level folder, as
the settings table names every setting (issue 55): a new one fails here until it is placed."""

import re
import subprocess
import sys
from pathlib import Path

from django.apps import apps

from harness.live import ROOT

PAGE = ROOT / "docs" / "architecture.md"
# Folders that hold no code of their own to place: generated, or each app's own kind of file.
NOT_PLACED = {"migrations", "management", "commands"}


def tracked_folders() -> set[str]:
    """Every folder that holds a tracked file, relative to the root ("a/b")."""
    listed = subprocess.run(  # noqa: S603
        ["git", "ls-files"],  # noqa: S607
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    folders = set()
    for name in listed:
        parts = name.split("/")[:-1]
        folders.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return folders


def package_folders() -> list[str]:
    """The Python packages of the code (a folder with an __init__.py), tests' and the
    migrations' and commands' left out."""
    return sorted(
        folder
        for folder in tracked_folders()
        if (ROOT / folder / "__init__.py").is_file()
        and "/" in folder
        and not folder.startswith("tests/")
        and NOT_PLACED.isdisjoint(folder.split("/"))
    )


def bullet_of(top: str) -> str:
    """The page's bullet of top-level folder `top` ("- **top/**..." up to the next bullet)."""
    text = PAGE.read_text()
    found = re.search(rf"^- \*\*{re.escape(top)}/\*\*.*?(?=^- \*\*|^#|\Z)", text, re.M | re.S)
    assert found, f"docs/architecture.md has no bullet for {top}/"
    return found.group(0)


def test_every_app_of_relays_own_has_its_bullet():
    local = [
        config
        for config in apps.get_app_configs()
        if Path(config.path).parent == ROOT  # an app of Relay's own, not a library's
    ]
    assert len(local) >= 12, [config.name for config in local]
    for config in local:
        assert bullet_of(config.name.split(".")[0])


def test_every_package_folder_is_named_in_its_top_folders_bullet():
    folders = package_folders()
    assert "telephony/sip" in folders and "relay/platform/postgresql" in folders, folders
    for folder in folders:
        top, _, rest = folder.partition("/")
        bullet = " ".join(bullet_of(top).split())
        assert f"{rest}/" in bullet, f"docs/architecture.md's {top}/ bullet does not name {rest}/"


def test_every_top_level_folder_is_named():
    tops = {f for f in tracked_folders() if "/" not in f and not f.startswith(".")}
    assert {"bench", "deploy", "tests", "telephony"} <= tops, tops
    for top in sorted(tops):
        assert bullet_of(top)


def test_a_folder_left_off_the_page_is_found(tmp_path, monkeypatch):
    """The check itself: a page without telephony's sip/ fails on it."""
    page = tmp_path / "architecture.md"
    page.write_text(PAGE.read_text().replace("`sip/`", "`s-i-p`"))
    monkeypatch.setattr(sys.modules[__name__], "PAGE", page)
    try:
        test_every_package_folder_is_named_in_its_top_folders_bullet()
    except AssertionError as refused:
        assert "sip/" in str(refused)
    else:
        raise AssertionError("a page without sip/ passed")
