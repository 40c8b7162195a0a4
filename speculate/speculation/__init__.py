"""The speculation engine: predicted prompt, cache-sharing fork on an overlay, boundaries, accept/abort."""
