#!/usr/bin/env python3
"""Fails unless each workspace member's declared `rust-version` is at least that of every
dependency it builds with on this machine's platform (every feature on, dev-dependencies
left out), as the lock file pins them. `cargo tree` gives what one member builds: the
resolve graph of `cargo metadata` unifies features across the workspace, dev-dependencies
included, and would count what no build of the member compiles."""

import json
import subprocess
import sys


def version(text):
    """`1.89` and `1.89.0` are one version."""
    parts = [int(part) for part in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def run(args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def main():
    host = next(
        line.split(": ", 1)[1]
        for line in run(["rustc", "-vV"]).splitlines()
        if line.startswith("host: ")
    )
    metadata = json.loads(
        run(["cargo", "metadata", "--format-version", "1", "--all-features", "--locked"])
    )
    declared = {
        (package["name"], package["version"]): package.get("rust_version")
        for package in metadata["packages"]
    }
    members = [
        package for package in metadata["packages"] if package["id"] in metadata["workspace_members"]
    ]
    failed = False
    for member in members:
        failed |= not check(member, declared, host)
    if failed:
        sys.exit(1)


def check(member, declared, host):
    """Prints what one member's declared version covers; False where it does not."""
    name = member["name"]
    own = member.get("rust_version")
    if not own:
        print(f"msrv: {name} declares no rust-version", file=sys.stderr)
        return False
    tree = run([
        "cargo", "tree", "--locked", "-p", name, "-e", "normal,build", "--all-features",
        "--target", host, "--prefix", "none", "--format", "{p}",
    ])
    built = set()
    for line in tree.splitlines():
        words = line.split()
        if len(words) >= 2 and words[1].startswith("v") and words[0] != name:
            built.add((words[0], words[1][1:]))
    newest = max(
        ((version(declared[package]), package[0]) for package in built if declared.get(package)),
        default=((0,), "none"),
    )
    needed = ".".join(str(part) for part in newest[0])
    if version(own) < newest[0]:
        print(f"msrv: {name}'s rust-version is {own}, but {newest[1]} needs {needed}",
              file=sys.stderr)
        return False
    print(f"msrv: {name}'s rust-version {own} covers every dependency (the newest needs "
          f"{needed}, {newest[1]})")
    return True


if __name__ == "__main__":
    main()
