"""``trace`` and ``log``: get or set a settings dict."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from kserve_v2.cli import _common

__all__ = ["add_settings_arguments", "print_settings", "parse_settings"]


def add_settings_arguments(parser: argparse.ArgumentParser, example: str) -> None:
    parser.add_argument(
        "action", nargs="?", choices=("get", "set"), default="get", help="get (default) or set"
    )
    parser.add_argument(
        "settings",
        nargs="*",
        metavar="KEY=VALUE",
        help=f"with set: the settings to change (e.g. {example}); values are JSON when they "
        "parse (1, true), else text; a comma-separated list for list settings",
    )


def parse_settings(items: list[str], lists: tuple[str, ...] = ()) -> dict[str, Any]:
    """``KEY=VALUE`` items; ``null`` clears a setting; keys in ``lists`` split on commas."""
    settings = _common.parse_key_values(items, "set")
    for key in lists:
        value = settings.get(key)
        if isinstance(value, str):
            settings[key] = [v.strip() for v in value.split(",") if v.strip()]
    return settings


def print_settings(
    args: argparse.Namespace, settings: dict[str, Any], title: str, changed: bool
) -> None:
    style = _common.Style(_common.wants_color(args, sys.stdout))
    rows = [(k, ", ".join(map(str, v)) if isinstance(v, list) else v) for k, v in settings.items()]
    head = f"{title} ({'now in force' if changed else 'in force'})"
    _common.emit(
        args,
        settings,
        f"{style(head, 'bold')}\n" + _common.format_table(("setting", "value"), rows),
    )


def run_settings(
    args: argparse.Namespace,
    title: str,
    get: Callable[[], dict[str, Any]],
    update: Callable[[dict[str, Any]], dict[str, Any]],
    lists: tuple[str, ...] = (),
) -> int:
    if args.action == "get":
        if args.settings:
            raise _common.CLIError("settings are given with `set KEY=VALUE ...`")
        print_settings(args, get(), title, False)
        return 0
    if not args.settings:
        raise _common.CLIError("set needs at least one KEY=VALUE")
    print_settings(args, update(parse_settings(args.settings, lists)), title, True)
    return 0
