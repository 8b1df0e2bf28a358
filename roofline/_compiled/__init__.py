"""Compiled models inside a block: the Inductor collector, the backward tape, the module paths of FX nodes, and the
private recompilation of graphs compiled before a block. Needs torch."""
