#!/usr/bin/env python3
"""Rewrites docs/ci-preview.png (shown in docs/ci.md) from a real run: builds a small
repository whose pull request bumps an image, changes a Kustomize-generated
ConfigMap's content, adds a CRD field, changes a Secret and breaks one overlay (issue
#29's "done when"), runs `tether diff --base HEAD~1 -o markdown` in it, renders the
Markdown as a pull-request comment (the `markdown` package from PyPI, GitHub-like CSS)
and screenshots it with headless Chromium (Debian's `chromium`, as docs/screenshots.sh
uses).

    python3 -m pip install markdown
    cargo build --bin tether
    python3 docs/preview-screenshot.py [path/to/tether]

Needs git, kubectl (Kustomize) and chromium on PATH.
"""

import pathlib
import subprocess
import sys
import tempfile

import markdown

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "ci-preview.png"
# Wide enough for a diff line, tall enough for the summary, two open apps and the
# folded rest.
WINDOW = "940,1780"
OPEN = 2
ORIGIN = "https://git.example.com/shop/deploy.git"

CONFIG = "apps:\n" + "".join(
    f"  - name: {name}\n    source: {{repo: \"{ORIGIN}\", path: apps/{name}}}\n"
    "    destination: {namespace: shop}\n"
    for name in ["web", "shop", "crds", "api", "broken"]
)


def web(image, password):
    return f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: shop, labels: {{app: web}}}}
spec:
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
        - name: web
          image: {image}
---
apiVersion: v1
kind: Secret
metadata: {{name: web-db, namespace: shop}}
stringData: {{password: {password}, user: web}}
"""


def overlay(colour):
    return f"""resources: [../../bases/shop]
namespace: shop
configMapGenerator:
  - name: shop-config
    literals: [colour={colour}]
"""


def crd(extra):
    return f"""apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: widgets.example.com}}
spec:
  group: example.com
  names: {{kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {{type: integer}}{extra}
"""


BASE = {
    "tether.yaml": CONFIG,
    "apps/web/web.yaml": web("nginx:1.25", "s3cr3t-base"),
    "bases/shop/kustomization.yaml": "resources: [deployment.yaml]\n",
    "bases/shop/deployment.yaml": """apiVersion: apps/v1
kind: Deployment
metadata: {name: shop}
spec:
  selector: {matchLabels: {app: shop}}
  template:
    metadata: {labels: {app: shop}}
    spec:
      containers:
        - name: shop
          image: shop:1
          envFrom: [{configMapRef: {name: shop-config}}]
""",
    "apps/shop/kustomization.yaml": overlay("blue"),
    "apps/crds/crd.yaml": crd(""),
    "apps/api/api.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: api, namespace: shop}\ndata: {mode: steady}\n",
    "apps/broken/kustomization.yaml": "resources: [cm.yaml]\n",
    "apps/broken/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: broken, namespace: shop}\n",
}

HEAD = {
    "apps/web/web.yaml": web("nginx:1.27", "s3cr3t-head"),
    "apps/shop/kustomization.yaml": overlay("green"),
    "apps/crds/crd.yaml": crd("\n                colour: {type: string}"),
    "apps/broken/kustomization.yaml": "resources: [cm.yaml, missing.yaml]\n",
}

# GitHub's comment look, by hand: its fonts, borders, code and <details>.
CSS = """
body { margin: 0; padding: 24px; background: #fff; color: #1f2328;
       font: 14px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif; }
.comment { border: 1px solid #d1d9e0; border-radius: 6px; max-width: 880px; }
.header { background: #f6f8fa; border-bottom: 1px solid #d1d9e0; padding: 8px 16px;
          border-radius: 6px 6px 0 0; color: #59636e; }
.header b { color: #1f2328; }
.markdown-body { padding: 16px; }
h1, h2, h3 { margin: 16px 0 8px; font-weight: 600; }
h3 { font-size: 1.25em; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; background: #eff1f3;
       padding: .2em .4em; border-radius: 6px; }
pre { background: #f6f8fa; padding: 12px; border-radius: 6px; overflow: hidden; }
pre code { background: none; padding: 0; }
table { border-collapse: collapse; margin: 8px 0; }
td, th { border: 1px solid #d1d9e0; padding: 4px 12px; }
details { margin: 8px 0; }
summary { cursor: pointer; }
ul { padding-left: 2em; }
"""


def git(repo, *args):
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def commit(repo, files, subject):
    for rel, text in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=dev", "-c", "user.email=dev@example.com",
        "commit", "-q", "-m", subject)


def main():
    tether = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "target/debug/tether")
    with tempfile.TemporaryDirectory() as tmp:
        repo = pathlib.Path(tmp) / "deploy"
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        git(repo, "remote", "add", "origin", ORIGIN)
        commit(repo, BASE, "base")
        commit(repo, HEAD, "Bump web to nginx 1.27, shop to green, add Widget.spec.colour")
        run = subprocess.run(
            [tether, "diff", "--base", "HEAD~1", "--config", "tether.yaml", "-o", "markdown"],
            cwd=repo, capture_output=True, text=True)
        if run.returncode not in (0, 1):
            sys.exit(f"tether diff --base failed ({run.returncode}): {run.stderr}")
        for secret in ("s3cr3t-base", "s3cr3t-head"):
            assert secret not in run.stdout, "a Secret value in the report"
        # GitHub renders Markdown inside <details>; python-markdown does with md_in_html.
        # The first two folds are shown open, as a reviewer clicks them; the others
        # show their one line.
        text = run.stdout.replace("<details>", '<details open markdown="1">', OPEN)
        text = text.replace("<details>", '<details markdown="1">')
        body = markdown.markdown(text, extensions=["md_in_html", "fenced_code", "tables"])
        page = pathlib.Path(tmp) / "comment.html"
        page.write_text(
            "<!doctype html><html><head><meta charset='utf-8'>"
            f"<style>{CSS}</style></head><body><div class='comment'>"
            "<div class='header'><b>github-actions</b> bot commented</div>"
            f"<div class='markdown-body'>{body}</div></div></body></html>")
        subprocess.run(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--window-size={WINDOW}", f"--screenshot={OUT}", page.as_uri()],
            check=True, capture_output=True)
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
