"""Every command's ``--help``: plain text, inside the repository, every option explained, and
complete dataset lists (checked against the registry, so a new dataset must be added)."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest

from scalebo.cli.main import COMMANDS, build_parser, main
from scalebo.data.datasets import list_datasets

#: Sphinx roles and inline literals, which ``--help`` would print verbatim.
MARKUP = re.compile(r":(func|class|mod|meth|data|attr|exc|obj):|``")


def _parsers() -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """``(command words, parser)`` of the root and of every (nested) subcommand."""
    out = []

    def walk(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> None:
        out.append((words, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*words, name))

    walk(build_parser(), ())
    return out


PARSERS = _parsers()
IDS = [" ".join(("scalebo", *words)) for words, _ in PARSERS]


def _help(words: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> str:
    """What ``scalebo WORDS --help`` prints (run through the command's entry point)."""
    assert main([*words, "--help"]) == 0
    return capsys.readouterr().out


def test_every_command_is_covered():
    assert {words[0] for words, _ in PARSERS if words} == {m.NAME for m in COMMANDS}
    assert ("bench", "run") in dict(PARSERS) and ("bench", "report") in dict(PARSERS)


@pytest.mark.parametrize(("words", "parser"), PARSERS, ids=IDS)
def test_help_is_plain_text_inside_the_repository(words, parser, capsys):
    text = _help(words, capsys)
    assert text == parser.format_help()
    assert not MARKUP.findall(text), f"Sphinx markup in {' '.join(words)} --help"
    assert "../" not in text and "DESIGN.md" not in text  # no file outside the repository


@pytest.mark.parametrize(("words", "parser"), PARSERS, ids=IDS)
def test_every_option_has_help(words, parser):
    missing = [action.option_strings or [action.dest] for action in parser._actions
               if not isinstance(action, argparse._HelpAction)
               and not (action.help or "").strip()]
    assert not missing, f"scalebo {' '.join(words)}: options without help: {missing}"


@pytest.mark.parametrize(("words", "parser"), PARSERS, ids=IDS)
def test_dataset_lists_are_complete(words, parser, capsys):
    """Commands with --dataset, or whose help offers dataset:NAME, name every dataset."""
    text = _help(words, capsys)
    takes = any("--dataset" in action.option_strings for action in parser._actions)
    if not (takes or "dataset:NAME" in text):
        pytest.skip("takes no dataset")
    flat = " ".join(text.split())
    absent = [name for name in list_datasets() if not re.search(rf"\b{name}\b", flat)]
    assert not absent, f"scalebo {' '.join(words)} --help does not name {absent}"


def test_help_through_the_installed_module():
    proc = subprocess.run([sys.executable, "-m", "scalebo.cli", "replay", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "--held-out-cells K" in proc.stdout
    assert "gadre_overtraining" in proc.stdout and not MARKUP.findall(proc.stdout)
