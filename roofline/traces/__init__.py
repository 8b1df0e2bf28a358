"""Reading torch.profiler traces into roofline records."""
