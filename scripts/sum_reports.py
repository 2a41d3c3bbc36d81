#!/usr/bin/env python3
"""Totals JUnit XML reports (GoogleTest and pytest both write them) into one closing line."""
import sys
import xml.etree.ElementTree as ET

passed = failed = skipped = 0
for path in sys.argv[1:]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"unreadable report {path}: {e}")
        failed += 1
        continue
    suites = [root] if root.tag == "testsuite" else root.iter("testsuite")
    for s in suites:
        total = int(s.get("tests", 0))
        f = int(s.get("failures", 0)) + int(s.get("errors", 0))
        sk = int(s.get("skipped", 0)) + int(s.get("disabled", 0))
        failed += f
        skipped += sk
        passed += total - f - sk
print(f"total: {passed} passed, {failed} failed, {skipped} skipped")
