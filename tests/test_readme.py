"""README opens with the two commands, and CI runs exactly its test command."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    return re.findall(r"```sh\n(.+?)\n```", text)


def test_readme_opens_with_demo_and_test_commands() -> None:
    demo, tests = readme_commands()[:2]
    assert "pip install -e ." in demo and demo.endswith("hta-tui --demo")
    assert "pip install -e '.[test]'" in tests and tests.endswith("pytest")
    head = (REPO / "README.md").read_text().split("```sh")[1:3]
    assert all(not part.startswith("\n#") for part in head)


def test_ci_runs_the_readme_test_command() -> None:
    tests = readme_commands()[1]
    ci_lines = (REPO / ".ci" / "run").read_text().splitlines()
    assert tests in ci_lines


def test_every_deliberate_difference_names_a_test_that_exists() -> None:
    """README's list of deliberate differences from HTA: each row names its test, and the
    test is there (renaming one must update the list)."""
    text = (REPO / "README.md").read_text()
    section = text.split("### Where the numbers differ from HTA, on purpose")[1].split("\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`tests/" in line]
    assert len(rows) >= 20
    for row in rows:
        for file, name in re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", row):
            assert f"def {name}(" in (REPO / file).read_text(), (file, name)
