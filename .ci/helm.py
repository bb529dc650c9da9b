"""A `helm` command line over Helm's own Go SDK (helm-python-sdk, see install-helm).

Only what the chart tests need, with helm's flags and output:

    helm version
    helm template [NAME] CHART [-n NS] [-f VALUES]... [--set K=V]... [--include-crds]
                  [--dry-run=server --kubeconfig FILE]
    helm lint CHART [-n NS] [-f VALUES]... [--set K=V]... [--strict]

`template` is what `helm template` is: an install with a client-side dry run (no
cluster is contacted, default capabilities), printing the release manifest in Helm's
install order. With `--dry-run=server --kubeconfig FILE` it is a server-side dry run
against that cluster, as `helm template --dry-run=server` is: templates' `lookup`
calls read the cluster (what a `helm upgrade` sees), and nothing is written.
`--include-crds` puts the chart's `crds/` files first, as helm does (tether passes it).
`--kube-version` and `--api-versions` are not accepted: the SDK's install takes no
capabilities, so a chart here sees Helm's defaults.
Errors go to stderr as `Error: ...` with exit code 1, as helm does.
"""

from __future__ import annotations

import importlib.metadata
import sys
from typing import Any

import helm_python as helm

# No cluster is ever contacted by a client-side dry run; should that change, the
# request goes to a closed loopback port and fails at once instead of leaving the host.
UNREACHABLE_API_SERVER = "https://127.0.0.1:1"


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Deep merge as helm merges -f files and --set: maps merge, anything else replaces
    (a null is kept, so Helm removes the chart's default for that key)."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def parse(
    args: list[str],
) -> tuple[list[str], str | None, dict[str, Any], bool, dict[str, str]]:
    positional: list[str] = []
    namespace: str | None = None
    values: dict[str, Any] = {}
    strict = False
    cluster: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, inline = arg.partition("=")
        needs_value = name in ("-n", "--namespace", "-f", "--values", "--set", "--kubeconfig")
        if needs_value:
            if eq:
                value = inline
            else:
                i += 1
                if i >= len(args):
                    raise SystemExit(f"Error: flag needs an argument: {name}")
                value = args[i]
            if name in ("-n", "--namespace"):
                namespace = value
            elif name == "--kubeconfig":
                cluster["kubeconfig"] = value
            elif name in ("-f", "--values"):
                with open(value, encoding="utf-8") as f:
                    values = merge(values, helm.values_from_yaml(f.read()) or {})
            else:
                values = merge(values, helm.parse_set_string(value))
        elif arg == "--strict":
            strict = True
        elif arg == "--include-crds":
            cluster["include_crds"] = "true"
        elif name == "--dry-run" and eq:
            if inline not in ("client", "server"):
                raise SystemExit(f"Error: invalid --dry-run: {inline} (client or server)")
            cluster["dry_run"] = inline
        elif arg.startswith("-"):
            raise SystemExit(f"Error: unknown flag: {arg}")
        else:
            positional.append(arg)
        i += 1
    return positional, namespace, values, strict, cluster


def template(args: list[str]) -> None:
    positional, namespace, values, _, cluster = parse(args)
    if len(positional) == 1:
        name, chart = "release-name", positional[0]
    elif len(positional) == 2:
        name, chart = positional
    else:
        raise SystemExit("Error: usage: helm template [NAME] CHART [flags]")
    namespace = namespace or "default"
    if cluster.get("dry_run") == "server":
        if "kubeconfig" not in cluster:
            raise SystemExit("Error: --dry-run=server needs --kubeconfig FILE")
        access = {"kubeconfig_path": cluster["kubeconfig"]}
    else:
        access = {"kube_apiserver": UNREACHABLE_API_SERVER}
    dry_run = cluster.get("dry_run", "client")
    crds = ""
    if cluster.get("include_crds"):
        for crd in helm.Chart.load(chart).crds:
            crds += f"---\n# Source: {crd['filename']}\n{crd['data'].rstrip()}\n"
    with helm.Config(storage_driver="memory", namespace=namespace, **access) as config:
        release = config.install(chart, name, values, namespace=namespace, dry_run=dry_run)
    sys.stdout.write(crds + release["manifest"])


def lint(args: list[str]) -> None:
    positional, namespace, values, strict, _ = parse(args)
    if len(positional) != 1:
        raise SystemExit("Error: usage: helm lint CHART [flags]")
    report = helm.lint(positional[0], values, strict=strict, namespace=namespace)
    severities = {0: "UNKNOWN", 1: "INFO", 2: "WARNING", 3: "ERROR"}
    for message in report.get("messages") or []:
        severity = severities.get(message.get("severity"), "UNKNOWN")
        print(f"[{severity}] {message.get('path')}: {message.get('error')}")
    errors = report.get("errors") or []
    if errors:
        for error in errors:
            print(f"Error: {error}", file=sys.stderr)
        raise SystemExit(1)
    print(f"{report.get('total_charts_linted', 0)} chart(s) linted, 0 chart(s) failed")


def main() -> None:
    args = sys.argv[1:]
    command = args[0] if args else "help"
    if command == "version":
        print(
            f"helm SDK {helm.helm_sdk_version()} (helm-c {helm.helm_c_version()}, "
            f"helm-python-sdk {importlib.metadata.version('helm-python-sdk')})"
        )
    elif command == "template":
        template(args[1:])
    elif command == "lint":
        lint(args[1:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    try:
        main()
    except helm.HelmError as error:
        print(f"Error: {error}", file=sys.stderr)
        raise SystemExit(1) from None
