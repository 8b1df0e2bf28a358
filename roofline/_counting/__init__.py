"""The cost model's Python side: the op table, the generated operator schemas, op resolution, ``roofline.cost`` and the
Python formulas. No torch."""
