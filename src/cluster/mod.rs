//! The Kubernetes API, through kube-rs: the only stage that talks to an API server.
