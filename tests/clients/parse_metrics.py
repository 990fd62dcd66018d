"""Reads Prometheus' text format on stdin with the Python client's own parser and prints each
family's help text and samples as JSON, for tests/web_ui.rs to compare two scrapes."""

import json
import sys

from prometheus_client.parser import text_string_to_metric_families

families = {}
for family in text_string_to_metric_families(sys.stdin.read()):
    families[family.name] = {
        "type": family.type,
        "help": family.documentation,
        "samples": [
            {"name": sample.name, "labels": sample.labels, "value": sample.value} for sample in family.samples
        ],
    }
json.dump(families, sys.stdout)
