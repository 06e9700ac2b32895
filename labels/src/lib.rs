//! Kubernetes label selectors: parse the API server's syntax and match label sets.
