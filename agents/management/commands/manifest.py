from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from hashee_sdk.core import cli


class Command(BaseCommand):
    help = ("manifest validate|hash|diff|card|keygen|sign|verify|prove …: offline checks and signatures, "
            "printing one JSON object.")
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("args", nargs=argparse.REMAINDER)

    def handle(self, *args: Any, **options: Any) -> None:
        code, result = cli.run(list(args))
        self.stdout.write(json.dumps(result, ensure_ascii=False, indent=2))
        if code:
            sys.exit(code)
