"""A `helm` command line over Helm's own Go SDK (helm-python-sdk, see install-helm).

Only what the chart tests need, with helm's flags and output:

    helm version
    helm template [NAME] CHART [-n NS] [-f VALUES]... [--set K=V]... [--include-crds]
                  [--kube-version V] [--api-versions GV]...
                  [--dry-run=server --kubeconfig FILE [--take-ownership]]
    helm lint CHART [-n NS] [-f VALUES]... [--set K=V]... [--strict]
    helm package CHART [-d DIR]
    helm repo index DIR [--url URL]
    helm push CHART.tgz oci://HOST/PATH [--plain-http] [--username U --password-stdin]

`template` is what `helm template` is: the chart rendered by Helm's engine as a
first install, no cluster contacted, printing the manifests in Helm's install order
and then the hooks, each under its `# Source:` line. `--kube-version` and
`--api-versions` (repeated or comma-separated) set `.Capabilities.KubeVersion` and
add to `.Capabilities.APIVersions`, as helm's flags do: the SDK's render call takes
both and hands them to Helm's own engine (its install call takes neither).
With `--dry-run=server --kubeconfig FILE` it is a server-side dry run against that
cluster, as `helm template --dry-run=server` is: templates' `lookup` calls read the
cluster (what a `helm upgrade` sees), and nothing is written. `--take-ownership`
is Helm's (3.17+): objects that already exist without Helm's ownership labels (what
another tool applied) are no error, as they are without it. The SDK's install returns
no hooks, so the hooks printed then are rendered as without a cluster (their own
`lookup` calls answer nothing).
`--include-crds` puts the chart's `crds/` files first, as helm does (tether passes it).
`package` and `repo index` are Helm's own (the chart tests build Helm repositories
with them): an archive `NAME-VERSION.tgz`, and `DIR/index.yaml` listing every
archive of DIR with its digest, as `helm repo index` writes it.
`push` is Helm's own `helm push`: the archive as an OCI artifact with Helm's media
types, tagged with the chart's version, under `oci://HOST/PATH/NAME`; with
`--username` the password is read from stdin (never from the command line) and the
registry logged in first, as `helm registry login --password-stdin` does.
Errors go to stderr as `Error: ...` with exit code 1, as helm does.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import sys
from typing import Any

import helm_python as helm
from helm_python import _native

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
        needs_value = name in (
            "-n",
            "--namespace",
            "-f",
            "--values",
            "--set",
            "--kubeconfig",
            "--kube-version",
            "--api-versions",
            "-a",
        )
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
            elif name == "--kube-version":
                cluster["kube_version"] = value
            elif name in ("--api-versions", "-a"):
                # A string slice flag: repeated, or comma-separated, or both.
                apis = [v for v in cluster.get("api_versions", "").split(",") if v]
                apis += [v.strip() for v in value.split(",") if v.strip()]
                cluster["api_versions"] = ",".join(apis)
            elif name in ("-f", "--values"):
                with open(value, encoding="utf-8") as f:
                    values = merge(values, helm.values_from_yaml(f.read()) or {})
            else:
                values = merge(values, helm.parse_set_string(value))
        elif arg == "--strict":
            strict = True
        elif arg == "--include-crds":
            cluster["include_crds"] = "true"
        elif arg == "--take-ownership":
            cluster["take_ownership"] = "true"
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


# Helm's install order (pkg/release/util/kind_sorter.go): kinds not listed go last,
# in name order, as there.
INSTALL_ORDER = [
    "PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
    "PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList",
    "ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
    "CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
    "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList",
    "Service", "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
    "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
    "APIService", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
]

# How helm splits a rendered template into documents (releaseutil.SplitManifests).
SEPARATOR = re.compile(r"(?:^|\s*\n)---\s*")


def render(
    chart: str, name: str, namespace: str, values: dict[str, Any], cluster: dict[str, str]
) -> tuple[str, str]:
    """The chart rendered by Helm's engine as `helm template` renders it, with the
    capabilities given: its manifests in install order, and its hooks, each as helm
    prints them."""
    options: dict[str, Any] = {"name": name, "namespace": namespace, "revision": 1, "is_install": True}
    if "kube_version" in cluster:
        options["kube_version"] = cluster["kube_version"]
    if cluster.get("api_versions"):
        options["api_versions"] = cluster["api_versions"].split(",")
    loaded = helm.Chart.load(chart)
    if loaded.schema is not None:
        # helm checks the coalesced values against values.schema.json before rendering.
        try:
            loaded.validate_schema(loaded.merge_values(values))
        except helm.HelmError as error:
            raise SystemExit(
                "Error: values don't meet the specifications of the schema(s) in the "
                f"following chart(s):\n{error}"
            ) from None
    rendered = json.loads(
        _native.call_string("helm_render", loaded._raw(), json.dumps(values), json.dumps(options))
    )
    manifests: list[tuple[int, str, str, str]] = []
    hooks: list[tuple[str, str]] = []
    for path in sorted(rendered):
        if path.endswith("NOTES.txt"):
            continue
        for doc in SEPARATOR.split(rendered[path]):
            if not doc.strip():
                continue
            parsed = helm.values_from_yaml(doc) or {}
            annotations = (parsed.get("metadata") or {}).get("annotations") or {}
            if "helm.sh/hook" in annotations:
                hooks.append((path, doc.strip("\n")))
                continue
            kind = parsed.get("kind") or ""
            rank = INSTALL_ORDER.index(kind) if kind in INSTALL_ORDER else len(INSTALL_ORDER)
            manifests.append((rank, kind if rank == len(INSTALL_ORDER) else "", path, doc.strip("\n")))
    manifests.sort(key=lambda m: (m[0], m[1]))
    out = "".join(f"---\n# Source: {path}\n{doc}\n" for _, _, path, doc in manifests)
    return out, "".join(f"---\n# Source: {path}\n{doc}\n" for path, doc in hooks)


def template(args: list[str]) -> None:
    positional, namespace, values, _, cluster = parse(args)
    if len(positional) == 1:
        name, chart = "release-name", positional[0]
    elif len(positional) == 2:
        name, chart = positional
    else:
        raise SystemExit("Error: usage: helm template [NAME] CHART [flags]")
    namespace = namespace or "default"
    crds = ""
    if cluster.get("include_crds"):
        for crd in helm.Chart.load(chart).crds:
            crds += f"---\n# Source: {crd['filename']}\n{crd['data'].rstrip()}\n"
    manifests, hooks = render(chart, name, namespace, values, cluster)
    if cluster.get("dry_run") != "server":
        sys.stdout.write(crds + manifests + hooks)
        return
    if "kubeconfig" not in cluster:
        raise SystemExit("Error: --dry-run=server needs --kubeconfig FILE")
    access = {"kubeconfig_path": cluster["kubeconfig"]}
    options: dict[str, Any] = {"namespace": namespace, "dry_run": "server"}
    if cluster.get("take_ownership"):
        options["take_ownership"] = True
    with helm.Config(storage_driver="memory", namespace=namespace, **access) as config:
        # The SDK's install, with the option its Python signature does not name.
        handle, ref = config._chart_args(chart)
        payload = _native.call_string(
            "helm_install", config._raw(), config._context_arg(None), handle, ref, name,
            json.dumps(values), json.dumps(options),
        )
    release = json.loads(payload)
    manifest = release["manifest"]
    if manifest and not manifest.endswith("\n"):
        manifest += "\n"
    sys.stdout.write(crds + manifest + hooks)


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


def one_positional(args: list[str], flags: tuple[str, ...], usage: str) -> tuple[str, str | None]:
    """The one positional argument of `args` and the value of the one flag (any of its
    spellings in `flags`) that takes a value, if given; any other flag is an error."""
    value: str | None = None
    positional: list[str] = []
    i = 0
    while i < len(args):
        if args[i] in flags and i + 1 < len(args):
            value = args[i + 1]
            i += 2
            continue
        if args[i].startswith("-"):
            raise SystemExit(f"Error: unknown flag: {args[i]}")
        positional.append(args[i])
        i += 1
    if len(positional) != 1:
        raise SystemExit(f"Error: usage: {usage}")
    return positional[0], value


def package(args: list[str]) -> None:
    chart, destination = one_positional(args, ("-d", "--destination"), "helm package CHART [-d DIR]")
    path = helm.package(chart, destination=destination or ".")
    print(f"Successfully packaged chart and saved it to: {path}")


def repo_index(args: list[str]) -> None:
    directory, url = one_positional(args, ("--url",), "helm repo index DIR [--url URL]")
    helm.repo_index_generate(directory, base_url=url)


def push(args: list[str]) -> None:
    plain_http = False
    username: str | None = None
    positional: list[str] = []
    i = 0
    while i < len(args):
        if args[i] == "--plain-http":
            plain_http = True
        elif args[i] == "--username" and i + 1 < len(args):
            username = args[i + 1]
            i += 1
        elif args[i] == "--password-stdin":
            pass
        elif args[i].startswith("-"):
            raise SystemExit(f"Error: unknown flag: {args[i]}")
        else:
            positional.append(args[i])
        i += 1
    if len(positional) != 2 or not positional[1].startswith("oci://"):
        raise SystemExit("Error: usage: helm push CHART.tgz oci://HOST/PATH")
    chart, remote = positional
    client = None
    if username is not None:
        import tempfile

        password = sys.stdin.readline().rstrip("\n")
        host = remote.removeprefix("oci://").split("/", 1)[0]
        store = tempfile.NamedTemporaryFile(suffix=".json", delete=False)
        store.close()
        client = helm.RegistryClient(plain_http=plain_http, credentials_file=store.name)
        client.login(host, username, password, plain_http=plain_http)
    pushed = helm.push(chart, remote, client=client, plain_http=plain_http)
    print(json.dumps(pushed))


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
    elif command == "package":
        package(args[1:])
    elif command == "repo" and args[1:2] == ["index"]:
        repo_index(args[2:])
    elif command == "push":
        push(args[1:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    try:
        main()
    except helm.HelmError as error:
        print(f"Error: {error}", file=sys.stderr)
        raise SystemExit(1) from None
