"""Recorded traces as a source of records: a PyTorch profiler (Kineto) JSON trace becomes a :class:`roofline.Report`.

The public entry is :func:`roofline.load_trace` (``roofline/_traces/_load.py``). The modules, lowest first:

- ``_read``: the file reader (``open_trace``: the header and a single-pass iterator of events, bounded memory);
- ``_events``: the event model (the op tree of each thread, GPU kernels linked to the op that launched them, steps,
  phases, modules and devices);
- ``_ops``: the cost of one recorded op from its recorded arguments, and which ops of the tree are counted;
- ``_build``: the records, op table, module sets and ``meta["trace"]`` of a report;
- ``_load``: ``load_trace`` and ``load_one``; ``_ranks``: directories of rank traces.

Nothing here imports torch: a trace is analysed on any machine.
"""
