//! What a pass applies: the revision (Git's, verified, or a pin's), its identity
//! (inputs, variables, keys, values) and its manifests, rendered once per identity,
//! with the watches of the kinds they use.

use kube::core::GroupVersionKind;
use tether_core::metrics::METRICS;
use tether_core::source::Revision;
use tether_core::sync::desired::{DesiredError, label_for_app, read_revision};
use tether_diff::manifest::ManifestSet;

use super::Worker;
use crate::reconcile::decryption::{self, AppKeys};
use crate::reconcile::pass::PassError;
use crate::reconcile::values::{self, PassValues};
use crate::reconcile::{inputs, variables};

impl Worker {
    /// Whether the kept render is of the source's current commit (or of the same
    /// inputs).
    pub(super) fn rendered_is_current(&self) -> bool {
        let head = self.applicable_revision();
        let wanted = head.map(|head| self.revision_id(&self.pinning.target(&head).0.sha));
        wanted.as_ref() == self.rendered.revision()
    }

    /// The revision passes and heals apply: the source's, or with `source.verify` the
    /// last verified one.
    pub(super) fn applicable_revision(&self) -> Option<Revision> {
        match self.trust.enabled() {
            true => self.trust.verified().cloned(),
            false => self.source.borrow().revision.clone(),
        }
    }

    /// The identity of what a pass at `sha` renders: the inputs identity when it is
    /// known at `sha` (else the commit), the variables and the SOPS keys.
    pub(super) fn revision_id(&self, sha: &str) -> String {
        let base = match &self.identity {
            Some(identity) if identity.sha == sha => identity.id(),
            _ => sha.to_string(),
        };
        let id = variables::revision_id(&base, self.variables.as_ref());
        let id = decryption::revision_id(id, self.keys.as_ref());
        let id = self.value_sources.revision_id(id);
        values::revision_id(id, self.values.as_ref())
    }

    /// Learns the inputs identity at `revision` ([`inputs`]), from the one known.
    pub(super) async fn identify(&mut self, revision: &Revision) {
        let renderers = tether_diff::manifest::Renderers {
            timeout: self.shared.render_timeout,
            ..self.config.renderers()
        };
        let previous = self.identity.take();
        self.identity = inputs::identify(
            &self.config.name,
            &self.shared.sources,
            self.config.source(),
            revision,
            renderers,
            previous,
        )
        .await;
    }

    /// The manifests at `wanted` with the pass's variables, read, rendered and
    /// validated once per revision and variables. Git's head, or the revision the app
    /// is pinned to, checked to be in the head's history.
    pub(super) async fn desired(&mut self, wanted: &Revision) -> Result<ManifestSet, PassError> {
        let mut rendered = std::mem::take(&mut self.rendered);
        let set = rendered
            .manifests(&self.revision_id(&wanted.sha), || async {
                let source = self.config.source();
                let revision = match self.applicable_revision() {
                    Some(head) if head.sha == wanted.sha => head,
                    _ if self.pinning.get().is_some_and(|p| p.revision == wanted.sha) => self
                        .shared
                        .sources
                        .earlier(&source, &wanted.sha)
                        .await
                        .map_err(|e| PassError::Manifest(DesiredError::Source(e)))?,
                    _ => return Err(PassError::RevisionMoved),
                };
                METRICS.rendered(&self.config.name);
                let cluster = &self.shared.cluster;
                let scopes = cluster.scopes().await.map_err(PassError::Cluster)?;
                let (version, apis) = cluster.capabilities().await.map_err(PassError::Cluster)?;
                let mut set = read_revision(
                    &self.shared.sources,
                    &source,
                    &revision,
                    &self.config.destination.namespace,
                    Some(&scopes),
                    &tether_diff::manifest::Renderers {
                        timeout: self.shared.render_timeout,
                        substitute: self.variables.clone(),
                        sops: self.keys.as_ref().map(AppKeys::sops).unwrap_or_default(),
                        ..self.config.renderers()
                    }
                    .for_cluster(version, apis)
                    .with_values_from(
                        self.values
                            .as_ref()
                            .map(PassValues::layers)
                            .unwrap_or_default(),
                    )
                    .with_ref_values(self.ref_values.clone()),
                    // Charts' `lookup` reads the cluster as this app's identity (#26).
                    Some(cluster),
                )
                .await
                .map_err(PassError::Manifest)?;
                label_for_app(&mut set, &self.config.name);
                Ok(set)
            })
            .await;
        self.rendered = rendered;
        set
    }

    /// Starts watches for the kinds the app uses (and Namespaces), once each.
    pub(super) async fn watch_kinds(&mut self, desired: &ManifestSet) {
        let mut kinds: Vec<GroupVersionKind> = desired
            .objects
            .iter()
            .map(|m| GroupVersionKind::gvk(&m.id.group, &m.id.version, &m.id.kind))
            .chain(self.inventory.iter().flat_map(|i| {
                i.objects.iter().map(|e| {
                    let id = e.id();
                    GroupVersionKind::gvk(&id.group, &id.version, &id.kind)
                })
            }))
            .collect();
        kinds.push(GroupVersionKind::gvk("", "v1", "Namespace"));
        for gvk in kinds {
            if self.watched.contains(&gvk) {
                continue;
            }
            if let Ok(Some(kind)) = self.shared.cluster.resolve(&gvk).await
                && self.shared.cache.watch(&gvk.group, &gvk.kind, &kind).await
            {
                self.watched.insert(gvk);
            }
        }
    }
}
