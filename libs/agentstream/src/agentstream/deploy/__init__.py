"""Kubernetes resources generated from the code's own registries (`python -m agentstream.deploy`).

Checked-in files under k8s/ are the output; tests fail when they are stale.
"""
