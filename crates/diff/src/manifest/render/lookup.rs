//! Helm's `lookup` in the render stage (issue #26, argoproj/argo-cd#5202): a chart
//! whose templates call `lookup` reuses what the cluster already holds (grafana's
//! admin password, a generated certificate), so rendered offline it renders anew
//! each time, and every render is drift. Such a chart is rendered by
//! `helm template --dry-run=server` against a read-only endpoint the caller serves
//! for that one render (`tether_core::cluster::lookup`), which answers as the
//! app's own identity; without one (an offline diff) `lookup` answers empty maps,
//! as `helm template` does, and the render says so. A chart that never calls
//! `lookup` renders offline as before: no cluster request, nothing to trust.

use std::fs;
use std::path::Path;

/// Files of a chart read to look for a `lookup` call: at most this many, each at
/// most [`MAX_TEMPLATE_BYTES`] (Helm's own per-file limit for a chart archive is
/// 5 MiB; a template larger than that is not rendered by Helm either).
const MAX_TEMPLATE_FILES: usize = 10_000;

/// See [`MAX_TEMPLATE_FILES`].
const MAX_TEMPLATE_BYTES: u64 = 5 * 1024 * 1024;

/// Whether a chart's template text calls Helm's `lookup` function: the word as a
/// function name (`lookup "v1" …`, `(lookup …)`), not a field (`.Values.lookup`)
/// nor part of another name (`mylookup`). Pure.
pub fn calls_lookup(text: &[u8]) -> bool {
    const WORD: &[u8] = b"lookup";
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'$';
    text.windows(WORD.len()).enumerate().any(|(i, w)| {
        w == WORD
            && (i == 0 || !ident(text[i - 1]))
            && text
                .get(i + WORD.len())
                .is_some_and(|b| b.is_ascii_whitespace())
    })
}

/// Whether the chart at `chart` (a folder on disk, its subcharts under `charts/`
/// included) may call `lookup`: a template that does, or a subchart kept as an
/// archive (`charts/x.tgz`), whose templates are not read here and may.
pub fn chart_calls_lookup(chart: &Path) -> bool {
    let mut stack = vec![chart.to_path_buf()];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            seen += 1;
            if seen > MAX_TEMPLATE_FILES {
                // A chart this large is read no further: treated as calling it.
                return true;
            }
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if kind.is_dir() {
                stack.push(path);
                continue;
            }
            let archive = name.ends_with(".tgz");
            let template = || {
                path.strip_prefix(chart)
                    .is_ok_and(|rel| rel.components().any(|c| c.as_os_str() == "templates"))
                    && fs::metadata(&path).is_ok_and(|m| m.len() <= MAX_TEMPLATE_BYTES)
                    && fs::read(&path).is_ok_and(|text| calls_lookup(&text))
            };
            if kind.is_file() && (archive || template()) {
                return true;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn a_call_is_told_from_a_field_or_another_name() {
        for call in [
            "{{ lookup \"v1\" \"Secret\" .Release.Namespace \"x\" }}",
            "{{- $s := (lookup\t\"v1\" \"Secret\" \"ns\" \"x\") -}}",
            "lookup \"v1\" \"Namespace\" \"\" \"\"",
            "{{- if not (lookup \"v1\" \"ConfigMap\" \"a\" \"b\") }}",
        ] {
            assert!(calls_lookup(call.as_bytes()), "{call}");
        }
        for other in [
            "{{ .Values.lookup }}",
            "{{ mylookup \"x\" }}",
            "{{ $lookup }}",
            "lookups: 3",
            "{{ include \"lookup\" . }}",
            "lookup",
        ] {
            assert!(!calls_lookup(other.as_bytes()), "{other}");
        }
    }

    #[test]
    fn a_chart_calls_lookup_in_its_templates_or_a_subchart_archive() {
        let dir = tempfile::tempdir().expect("tempdir");
        let chart = dir.path().join("c");
        fs::create_dir_all(chart.join("templates")).expect("mkdir");
        fs::write(chart.join("Chart.yaml"), "name: c\nnote: lookup here\n").expect("write");
        fs::write(chart.join("templates/cm.yaml"), "kind: ConfigMap\n").expect("write");
        assert!(!chart_calls_lookup(&chart), "Chart.yaml is no template");
        fs::create_dir_all(chart.join("charts/sub/templates")).expect("mkdir");
        fs::write(
            chart.join("charts/sub/templates/_helpers.tpl"),
            "{{- define \"pw\" -}}{{ (lookup \"v1\" \"Secret\" \"a\" \"b\").data }}{{- end -}}",
        )
        .expect("write");
        assert!(chart_calls_lookup(&chart), "a subchart's helper calls it");
        fs::remove_dir_all(chart.join("charts/sub")).expect("rm");
        fs::write(chart.join("charts/sub-1.0.0.tgz"), b"\x1f\x8b").expect("write");
        assert!(chart_calls_lookup(&chart), "an archive may call it");
    }

    /// A chart whose Secret is random unless `lookup` finds it, and one that never
    /// calls `lookup`, as a revision's files under `web/`.
    fn chart(with_lookup: bool) -> Vec<(String, Vec<u8>)> {
        let secret = if with_lookup {
            "{{- $s := (lookup \"v1\" \"Secret\" \"shop\" \"web\") | default dict }}\n\
             apiVersion: v1\nkind: Secret\nmetadata:\n  name: web\ndata:\n\
             \x20 pw: {{ (get ($s.data | default dict) \"pw\") | default (randAlphaNum 8 | b64enc) | quote }}\n"
        } else {
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: web\ndata:\n  pw: cHc=\n"
        };
        [
            (
                "web/Chart.yaml",
                "apiVersion: v2\nname: web\nversion: 0.1.0\n",
            ),
            ("web/templates/secret.yaml", secret),
        ]
        .iter()
        .map(|(p, b)| (p.to_string(), b.as_bytes().to_vec()))
        .collect()
    }

    fn renderers(lookup: Option<PathBuf>) -> super::super::Renderers {
        super::super::Renderers {
            helm: super::super::HelmInputs {
                program: Some(super::super::tests::installed_helm()),
                namespace: "shop".into(),
                lookup,
                ..Default::default()
            },
            release: "web".into(),
            ..Default::default()
        }
    }

    #[test]
    fn offline_a_lookup_chart_renders_with_empty_lookups_and_says_so_and_only_it_asks_a_cluster() {
        use super::super::render_tree;
        use crate::manifest::ParseOptions;
        let opts = ParseOptions::default();
        let offline = render_tree(&chart(true), "web", &renderers(None), &opts).expect("renders");
        assert_eq!(offline.empty_lookups, ["web"]);
        assert_eq!(offline.objects[0].id.name, "web");
        let plain = render_tree(&chart(false), "web", &renderers(None), &opts).expect("renders");
        assert!(plain.empty_lookups.is_empty());

        // With an endpoint (here one that is not there), only the chart calling
        // `lookup` is rendered against it: the other never contacts a cluster.
        let nowhere = tempfile::tempdir().expect("tempdir");
        let kubeconfig = nowhere.path().join("kubeconfig");
        fs::write(
            &kubeconfig,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:9'}\n\
             users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n",
        )
        .expect("write");
        let online = renderers(Some(kubeconfig));
        let plain = render_tree(&chart(false), "web", &online, &opts).expect("renders offline");
        assert!(plain.empty_lookups.is_empty());
        let error = render_tree(&chart(true), "web", &online, &opts).expect_err("no cluster there");
        let error = error.to_string();
        assert!(error.contains("helm template failed"), "{error}");
    }
}
