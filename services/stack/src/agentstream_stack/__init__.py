"""The composition root: the `agentstream` CLI and the embedded all-in-one process.

The only package that imports the services.
"""
