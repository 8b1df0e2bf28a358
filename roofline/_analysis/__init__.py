"""Pure functions over a report's records: classification, roll-ups, groups, the network view, dataflow, the cache
model, fusion, hints, assumptions, the compiled view. They never import a renderer."""
