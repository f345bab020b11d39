#!/usr/bin/env python3
"""Fails unless the crate's declared `rust-version` is at least that of every dependency it
builds with (every feature on, dev-dependencies left out), as the lock file pins them."""

import json
import subprocess
import sys


def version(text):
    """`1.89` and `1.89.0` are one version."""
    parts = [int(part) for part in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def main():
    metadata = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--all-features", "--locked"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    packages = {package["id"]: package for package in metadata["packages"]}
    nodes = {node["id"]: node for node in metadata["resolve"]["nodes"]}
    root = metadata["resolve"]["root"]
    declared = packages[root].get("rust_version")
    if not declared:
        sys.exit("msrv: the crate declares no rust-version")
    built, pending = set(), [root]
    while pending:
        current = pending.pop()
        if current in built:
            continue
        built.add(current)
        for dependency in nodes[current]["deps"]:
            kinds = {kind["kind"] for kind in dependency["dep_kinds"]}
            if kinds & {None, "build"}:
                pending.append(dependency["pkg"])
    newest = max(
        (
            (version(packages[package]["rust_version"]), packages[package]["name"])
            for package in built - {root}
            if packages[package].get("rust_version")
        ),
        default=((0,), "none"),
    )
    if version(declared) < newest[0]:
        needed = ".".join(str(part) for part in newest[0])
        sys.exit(f"msrv: rust-version is {declared}, but {newest[1]} needs {needed}")
    print(f"msrv: rust-version {declared} covers every dependency (the newest needs "
          f"{'.'.join(str(part) for part in newest[0])}, {newest[1]})")


if __name__ == "__main__":
    main()
