#!/usr/bin/python3
"""Reads a ctest run's JUnit report and its tests' timeouts; prints the slowest tests, and a
warning for each test that took more than half its timeout, so that a test creeping towards its
timeout is seen before it fails.

    deploy/test-times.py JUNIT_XML TESTS_JSON DEFAULT_TIMEOUT [--slowest N]

TESTS_JSON is `ctest --show-only=json-v1` of the same build; DEFAULT_TIMEOUT is the --timeout
ctest ran with (the timeout of tests that set none). Exits 0 whatever it finds: it reports.
"""
import argparse
import json
import sys
import xml.etree.ElementTree as ET


def timeouts(tests_json, default):
    """Each test's timeout in seconds, by name."""
    with open(tests_json, encoding="utf-8") as f:
        listing = json.load(f)
    result = {}
    for test in listing.get("tests", []):
        timeout = default
        for prop in test.get("properties", []):
            if prop.get("name") == "TIMEOUT":
                timeout = float(prop["value"])
        result[test["name"]] = timeout
    return result


def times(junit_xml):
    """(name, seconds, status) of every test that ran."""
    root = ET.parse(junit_xml).getroot()
    result = []
    for case in root.iter("testcase"):
        status = case.get("status", "run")
        if case.find("failure") is not None:
            status = "failed"
        elif case.find("skipped") is not None:
            status = "skipped"
        result.append((case.get("name"), float(case.get("time", "0")), status))
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("junit_xml")
    parser.add_argument("tests_json")
    parser.add_argument("default_timeout", type=float)
    parser.add_argument("--slowest", type=int, default=10)
    args = parser.parse_args()
    try:
        limits = timeouts(args.tests_json, args.default_timeout)
        ran = times(args.junit_xml)
    except (OSError, ValueError, ET.ParseError) as e:
        print(f"test times: cannot read the report: {e}")
        return 0
    ran.sort(key=lambda t: t[1], reverse=True)
    print(f"Slowest {min(args.slowest, len(ran))} of {len(ran)} tests "
          f"(seconds, share of the test's timeout):")
    for name, seconds, status in ran[:args.slowest]:
        limit = limits.get(name, args.default_timeout)
        print(f"  {seconds:8.1f} s  {seconds / limit:4.0%} of {limit:.0f} s  {name}"
              + ("" if status in ("run", "passed") else f"  ({status})"))
    creeping = [(n, s, limits.get(n, args.default_timeout)) for n, s, st in ran
                if s > limits.get(n, args.default_timeout) / 2]
    for name, seconds, limit in creeping:
        print(f"WARNING: {name} took {seconds:.1f} s, more than half its {limit:.0f} s timeout")
    return 0


if __name__ == "__main__":
    sys.exit(main())
