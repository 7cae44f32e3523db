// Package deploy holds the checks that keep the container images,
// compose.yaml, the Kubernetes manifests and deploy/README.md true to the
// services' code. It has no runtime code of its own.
package deploy
