"""Measure the unzipped size of the Lambda deployment's dependencies against the zip package limit.

Installs the runtime dependencies of deltaextras (pyproject.toml ``dependencies``; boto3 is in the
Lambda Python runtime already) for Lambda's platform into a temporary directory and sums the files.
A zip package (function code plus all layers) may hold at most 250 MB unzipped; a container image
up to 10 GB. That is why lambda/Dockerfile builds an image.

Usage::

    python lambda/package_size.py                      # x86_64, Python 3.12
    python lambda/package_size.py --arch aarch64
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ZIP_LIMIT_MB = 250
REPO = Path(__file__).resolve().parents[1]


def runtime_requirements() -> list[str]:
    """The ``[project] dependencies`` of pyproject.toml."""
    import tomllib

    return list(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"])


def tree_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("Usage::")[0])
    parser.add_argument("--arch", choices=("x86_64", "aarch64"), default="x86_64")
    parser.add_argument("--python", default="3.12")
    args = parser.parse_args(argv)
    target = Path(tempfile.mkdtemp(prefix="lambda-size-"))
    try:
        cmd = [
            sys.executable, "-m", "pip", "install", "--quiet", "--target", str(target),
            "--platform", f"manylinux2014_{args.arch}", "--platform", f"manylinux_2_28_{args.arch}",
            "--python-version", args.python, "--implementation", "cp", "--only-binary=:all:",
            *runtime_requirements(),
        ]  # fmt: skip
        if subprocess.run(cmd).returncode != 0:
            print(f"pip could not install wheels for {args.arch} / Python {args.python}", file=sys.stderr)
            return 1
        sizes: dict[str, int] = {}
        for entry in target.iterdir():
            name = entry.name.split("-")[0].split(".")[0]
            sizes[name] = sizes.get(name, 0) + (tree_size(entry) if entry.is_dir() else entry.stat().st_size)
        total = sum(sizes.values())
        for name, size in sorted(sizes.items(), key=lambda kv: -kv[1])[:8]:
            print(f"{name:24s} {size / 1e6:8.1f} MB")
        print(f"{'total':24s} {total / 1e6:8.1f} MB unzipped (zip package limit {ZIP_LIMIT_MB} MB, layers included)")
        fits = total / 1e6 <= ZIP_LIMIT_MB
        print(
            "fits a zip package" if fits else "does not fit a zip package: ship the container image (lambda/Dockerfile)"
        )
        return 0
    finally:
        shutil.rmtree(target, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
