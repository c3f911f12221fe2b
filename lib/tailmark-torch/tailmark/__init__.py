"""tailmark: Python bindings. `import tailmark.torch` registers the
torch.distributed backend "tailmark"."""
