//! forge-build: Build context (Dockerfile from Dockerfile.tmpl), Kubernetes manifests and package checks.
