"""Ceilings: the measured CPU and GPU ceilings with their cache, the load while a block ran, the interconnect measured
in this process. The datasheet table is ``roofline.devices``."""
