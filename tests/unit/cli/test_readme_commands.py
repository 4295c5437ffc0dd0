"""The README tells the truth about the CLI and the settings: every ``tenantq`` command it shows
exists and takes the options shown, every ``make`` target exists, every ``TENANTQ_*`` variable
and knob it names is a setting, every document it links to exists, its Python parses, and it
stays a ten-minute read (at most 450 lines)."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer.main
from pydantic import BaseModel

from tenantq.cli import app
from tenantq.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()
MAKEFILE = (ROOT / "Makefile").read_text()
LONGEST = 450

CONSOLE_BLOCKS = re.findall(r"```console\n(.*?)```", README, re.S)
PYTHON_BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)
INLINE_CODE = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", README, flags=re.S))


def _setting_names() -> set[str]:
    """Every environment variable of the settings model, nested sections joined by ``__``."""
    names = set()
    for name, field in Settings.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            for inner in annotation.model_fields:
                names.add(f"TENANTQ_{name}__{inner}".upper())
        else:
            names.add(f"TENANTQ_{name}".upper())
    return names


SETTINGS = _setting_names()


def _console_commands() -> list[list[str]]:
    """The argument lists of every ``$`` line of the console blocks (with the indented lines
    that continue it), split at ``&&``."""
    lines: list[str] = []
    for block in CONSOLE_BLOCKS:
        continued = False
        for line in block.splitlines():
            if line.startswith("$ "):
                lines.append(line[2:])
                continued = True
            elif continued and line.startswith(" "):
                lines[-1] += "\n" + line
            else:
                continued = False
    commands = []
    for line in lines:
        command: list[str] = []
        for word in shlex.split(line, comments=True) + ["&&"]:
            if word == "&&":
                if command:
                    commands.append(command)
                command = []
            elif word.strip("[]"):
                command.append(word.strip("[]"))
    return commands


def _tenantq_arguments(command: list[str]) -> list[str] | None:
    """What follows the ``tenantq`` program in a command line (after ``VAR=value`` words)."""
    for index, word in enumerate(command):
        if re.fullmatch(r"[A-Z_]+=.*", word):
            continue
        if word in ("tenantq", ".venv/bin/tenantq"):
            return command[index + 1 :]
        return None
    return None


def _subcommands(command: Any) -> dict[str, Any] | None:
    """A group's commands by name, None for a command (typer ships its own click)."""
    return getattr(command, "commands", None)


def _check_tenantq(arguments: list[str]) -> None:
    command = typer.main.get_command(app)
    path = ["tenantq"]
    for word in arguments:
        subcommands = _subcommands(command)
        if subcommands is not None and not word.startswith("-"):
            assert word in subcommands, f"`{' '.join(path)} {word}`: no such command"
            command = subcommands[word]
            path.append(word)
        elif word.startswith("-"):
            known = {opt for param in command.params for opt in param.opts}
            option = word.split("=", 1)[0]
            assert option in known, f"`{' '.join(path)}` has no option {option}"
    assert _subcommands(command) is None, f"`{' '.join(path)}` needs a subcommand"


def test_the_readme_is_a_ten_minute_read() -> None:
    assert len(README.splitlines()) <= LONGEST


@pytest.mark.parametrize(
    "command",
    [c for c in _console_commands() if _tenantq_arguments(c) is not None],
    ids=" ".join,
)
def test_console_commands_exist_with_their_options(command: list[str]) -> None:
    arguments = _tenantq_arguments(command)
    assert arguments is not None
    _check_tenantq(arguments)


def test_commands_in_the_text_exist() -> None:
    mentioned = [span.split() for span in INLINE_CODE if span.startswith("tenantq ")]
    assert mentioned
    for words in mentioned:
        # Only the command path: inline text may elide arguments ("tenantq dev up | status").
        path = [word for word in words[1:3] if re.fullmatch(r"[a-z]+", word)]
        command = typer.main.get_command(app)
        for word in path:
            subcommands = _subcommands(command)
            if subcommands is None:
                break
            assert word in subcommands, f"`tenantq {' '.join(path)}`: no such command"
            command = subcommands[word]


def test_make_targets_exist() -> None:
    targets = {
        word
        for command in _console_commands()
        if command[0] == "make"
        for word in command[1:]
        if "=" not in word
    }
    targets |= set(re.findall(r"^make ([a-z-]+)$", "\n".join(INLINE_CODE), re.M))
    assert {"demo", "test"} <= targets
    for target in targets:
        assert re.search(rf"^{re.escape(target)}:", MAKEFILE, re.M), f"no make target {target}"


def test_every_variable_named_is_a_setting() -> None:
    for line in README.splitlines():
        full = re.findall(r"TENANTQ_[A-Z0-9_]*[A-Z0-9]", line)
        for name in full:
            assert name in SETTINGS, f"{name} is not a setting"
        # `TENANTQ_WORKER__DEFAULT_TIMEOUT_SECONDS` / `__DEFAULT_MAX_ATTEMPTS`: the short form
        # is a sibling of the last full name before it on the line.
        for short in re.findall(r"`(__[A-Z0-9_]+)`", line):
            assert full, f"{short} without a full variable on its line"
            section = full[0].rsplit("__", 1)[0]
            assert f"{section}{short}" in SETTINGS, f"{section}{short} is not a setting"


def test_every_knob_named_is_a_setting() -> None:
    tails = {name.split("__")[-1] for name in SETTINGS}
    knobs = [span for span in INLINE_CODE if re.fullmatch(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)+", span)]
    assert knobs
    # The OpenTelemetry SDK's own variables (OTEL_*) are read by the SDK, not by tenantq.
    knobs = [knob for knob in knobs if not knob.startswith("OTEL_")]
    for knob in knobs:
        assert knob in tails, f"`{knob}` is no setting"


def test_linked_documents_exist() -> None:
    linked = re.findall(r"\]\(((?:docs/)[^)#\s]+)", README)
    linked += re.findall(r"`(docs/[^`\s]+)`", README)
    assert linked
    for path in linked:
        assert (ROOT / path).exists(), f"{path} does not exist"


@pytest.mark.parametrize("block", PYTHON_BLOCKS)
def test_python_samples_parse(block: str) -> None:
    ast.parse(block)
