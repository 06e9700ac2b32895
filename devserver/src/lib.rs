//! An in-process Kubernetes API server for development and tests.
