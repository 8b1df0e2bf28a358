"""Compiled models inside a block: the Inductor collector, the backward tape, the module paths of FX nodes. Needs
torch."""
