"""The embedded model simulator: a local Messages-API HTTP server with prompt-cache and latency models."""
