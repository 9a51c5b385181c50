"""Get or set the server's log settings (logging extension).

examples:
  kserve-v2 log
  kserve-v2 log set log_verbose_level=1 log_info=true
"""

from __future__ import annotations

import argparse

from kserve_v2.cli import _common, _settings

__all__ = ["OPTIONS", "add_arguments", "run"]

OPTIONS = ("connection", "output")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _settings.add_settings_arguments(parser, "log_verbose_level=1")


def run(args: argparse.Namespace) -> int:
    with _common.client(args) as client:
        return _settings.run_settings(
            args, "log settings", client.log_settings, client.update_log_settings
        )
