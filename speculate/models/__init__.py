"""Model backends: one small interface (:class:`Model`) and the production backend on the anthropic SDK."""
