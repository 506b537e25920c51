"""What ``amari-gpu --help`` and each ``amari-gpu COMMAND --help`` print is plain text for a
terminal: no reStructuredText markup, every command listed with its line, and every command's
own help page starts with a paragraph saying what it does."""

from __future__ import annotations

import re

import pytest
from amari_gpu.tools.cli import _COMMANDS, main

MARKUP = re.compile(r"``|:\w+:`|^\.\. ", flags=re.M)
"""Inline literals, roles and directives: what RST looks like when printed raw."""


def _help(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    with pytest.raises(SystemExit) as done:
        main([*argv, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


def test_top_level_help_is_plain_text_and_lists_every_command(capsys):
    out = _help(capsys, [])
    assert not MARKUP.search(out), out
    assert "Use every GPU in the machine" in out
    assert "amari-gpu COMMAND --help" in out
    for name, (summary, _) in _COMMANDS.items():
        listed = re.search(rf"^\s+{re.escape(name)}\s+(.*)$", out, flags=re.M)
        assert listed, f"{name} is not in the command list:\n{out}"
        assert " ".join(summary.split()[:3]) in listed.group(1)


@pytest.mark.parametrize("name", sorted(_COMMANDS))
def test_command_help_starts_with_what_it_does(capsys, name):
    out = _help(capsys, [name])
    assert not MARKUP.search(out), out
    usage, _, rest = out.partition("\n\n")
    assert usage.startswith(f"usage: amari-gpu {name}")
    description = rest.split("\n\n")[0]
    # The paragraph after usage is the description, not the options list.
    assert not description.lstrip().startswith(("options:", "optional arguments:")), out
    assert " ".join(description.split()) == " ".join(_COMMANDS[name][1].split())
