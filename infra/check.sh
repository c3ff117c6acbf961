#!/usr/bin/env bash
# Static checks of infra/ (Bicep and Terraform) with checkov. Installs nothing.
#
# Fails (non-zero exit) when checkov reports a failed check, when a file cannot be parsed,
# when a framework scanned no resource, or when a skip carries no written reason
# ("checkov:skip=CKV_ID: reason" inside the resource block).
#
# checkov's pinned dependencies clash with the test environment (see docs/deploy.md), so it may
# live in its own virtualenv: CHECKOV=/path/to/venv/bin/checkov bash infra/check.sh
set -euo pipefail

cd "$(dirname "$0")/.."

CHECKOV="${CHECKOV:-checkov}"
if ! command -v "$CHECKOV" >/dev/null 2>&1; then
    echo "infra/check.sh: checkov not found (install it, or set CHECKOV=/path/to/checkov)" >&2
    exit 2
fi
PYTHON="${PYTHON:-python3}"

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

start=$(date +%s)
status=0
# --skip-download: no calls to the vendor's platform (offline, reproducible).
"$CHECKOV" --directory infra \
    --framework terraform bicep \
    --quiet --compact --skip-download \
    --output cli --output json --output-file-path "console,$out/results.json" || status=$?
elapsed=$(( $(date +%s) - start ))

if [ ! -s "$out/results.json" ]; then
    echo "infra/check.sh: checkov wrote no results (exit $status)" >&2
    exit $(( status == 0 ? 1 : status ))
fi

# Summary per framework; fail on parse errors and empty scans. Then every skip in the sources
# must carry a written reason (checkov itself accepts a bare "checkov:skip=ID").
"$PYTHON" - "$out/results.json" <<'PY' || status=1
import json
import pathlib
import re
import sys

with open(sys.argv[1], encoding="utf-8") as f:
    data = json.load(f)
reports = data if isinstance(data, list) else [data]
seen = set()
bad = False
for report in reports:
    framework = report.get("check_type", "?")
    seen.add(framework)
    summary = report.get("summary", {})
    print(
        f"checkov {framework}: passed {summary.get('passed', 0)}, failed {summary.get('failed', 0)}, "
        f"skipped {summary.get('skipped', 0)}, parsing errors {summary.get('parsing_errors', 0)}, "
        f"resources {summary.get('resource_count', 0)}"
    )
    if summary.get("parsing_errors", 0):
        bad = True
        print(f"  {framework}: some files cannot be parsed (run checkov without --quiet to list them)")
    if not summary.get("resource_count", 0):
        bad = True
        print(f"  {framework}: no resource scanned")
for framework in ("terraform", "bicep"):
    if framework not in seen:
        bad = True
        print(f"  {framework}: not scanned")

skip = re.compile(r"checkov:skip=([A-Za-z0-9_,-]+)(.*)$")
for path in sorted(pathlib.Path("infra").rglob("*")):
    if path.suffix not in (".tf", ".bicep") or ".terraform" in path.parts:
        continue
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        match = skip.search(line)
        if match and len(match.group(2).lstrip(": ").strip()) < 10:
            bad = True
            print(f"  {path}:{number}: skip of {match.group(1)} without a written reason")
sys.exit(1 if bad else 0)
PY

echo "infra/check.sh: checkov took ${elapsed}s, exit ${status}"
exit "$status"
